//! Hand-written pre-tokenizers for byte-level BPE, one per `tokenizer.ggml.pre` family. Each
//! reproduces the splits llama.cpp makes with its regexes (its own hand-written GPT-2 and
//! Llama 3 splitters, and std::regex for the rest), without a regex engine: faster, and the
//! same code runs on wasm.
//!
//! A pipeline is a list of stages; every stage re-splits each chunk of the previous stage on
//! its own, keeping the text between matches as chunks too (llama.cpp's semantics).

use super::unicode::{is_letter, is_number, is_punctuation, is_whitespace};

/// One splitting stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
    Gpt2,
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    Llama3 { max_digits: usize },
    /// `\p{N}`: every number character alone.
    EachNumber,
    /// `\p{N}+`
    NumberRuns,
    /// `[\p{P}\$\+<=>\^~\|]+`
    PunctRuns,
    /// `[0-9][0-9][0-9]`
    AsciiDigitTriples,
}

/// A pre-tokenizer: the stages for one `tokenizer.ggml.pre` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PreTokenizer {
    stages: Vec<Stage>,
}

impl PreTokenizer {
    /// The pre-tokenizer for a `tokenizer.ggml.pre` name, whether merges are skipped for words
    /// already in the vocabulary, and whether the type turns BOS on by default. Unknown names
    /// fall back to `default`, like llama.cpp.
    pub fn for_name(name: Option<&str>) -> (Self, bool, bool) {
        use Stage::*;
        let llama3 = Llama3 { max_digits: 3 };
        let (stages, ignore_merges, add_bos) = match name.unwrap_or("default") {
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" => (vec![llama3], true, true),
            "dbrx" | "smaug-bpe" | "chatglm-bpe" | "glm4" => (vec![llama3], false, false),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "stablelm2" | "megrez" | "hunyuan"
            | "grok-2" => (vec![Llama3 { max_digits: 1 }], false, false),
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone"
            | "minerva-7b" => (vec![EachNumber, Gpt2], false, false),
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "exaone4" | "mpt" | "olmo"
            | "jais" | "trillion" | "granite-docling" | "jina-v1-en" | "jina-v2-code"
            | "roberta-bpe" => (vec![Gpt2], false, false),
            _ => (
                vec![PunctRuns, Gpt2, NumberRuns, AsciiDigitTriples],
                false,
                false,
            ),
        };
        (PreTokenizer { stages }, ignore_merges, add_bos)
    }

    /// Splits `text` into words, as byte ranges covering it in order.
    pub fn split(&self, text: &str) -> Vec<(usize, usize)> {
        let chars: Vec<char> = text.chars().collect();
        let mut byte_at = Vec::with_capacity(chars.len() + 1);
        byte_at.extend(text.char_indices().map(|(i, _)| i));
        byte_at.push(text.len());

        let mut chunks = vec![(0usize, chars.len())];
        for &stage in &self.stages {
            let mut next = Vec::with_capacity(chunks.len() * 2);
            for &(ini, end) in &chunks {
                let mut s = Splitter {
                    c: &chars[..end],
                    end,
                    prev: ini,
                    out: &mut next,
                };
                s.run(stage, ini);
            }
            chunks = next;
        }
        chunks
            .into_iter()
            .map(|(a, b)| (byte_at[a], byte_at[b]))
            .collect()
    }
}

struct Splitter<'a> {
    c: &'a [char],
    end: usize,
    prev: usize,
    out: &'a mut Vec<(usize, usize)>,
}

impl Splitter<'_> {
    fn get(&self, p: usize) -> Option<char> {
        if p < self.end {
            Some(self.c[p])
        } else {
            None
        }
    }

    /// Ends the current word at `end` (empty words are dropped).
    fn cut(&mut self, end: usize) {
        if end > self.prev {
            self.out.push((self.prev, end));
        }
        self.prev = end;
    }

    fn is<F: Fn(char) -> bool>(&self, p: usize, f: F) -> bool {
        self.get(p).is_some_and(f)
    }

    fn run(&mut self, stage: Stage, ini: usize) {
        match stage {
            Stage::Gpt2 => self.gpt2(ini),
            Stage::Llama3 { max_digits } => self.llama3(ini, max_digits),
            Stage::EachNumber => self.runs(ini, is_number, true),
            Stage::NumberRuns => self.runs(ini, is_number, false),
            Stage::PunctRuns => self.runs(
                ini,
                |c| is_punctuation(c) || matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|'),
                false,
            ),
            Stage::AsciiDigitTriples => {
                let mut pos = ini;
                while pos < self.end {
                    if (0..3).all(|k| self.is(pos + k, |c| c.is_ascii_digit())) {
                        self.cut(pos);
                        self.cut(pos + 3);
                        pos += 3;
                    } else {
                        pos += 1;
                    }
                }
                self.cut(self.end);
            }
        }
    }

    /// `[class]+` (or `[class]` with `single`): matches become words, and so does the text
    /// between them.
    fn runs(&mut self, ini: usize, f: impl Fn(char) -> bool, single: bool) {
        let mut pos = ini;
        while pos < self.end {
            if f(self.c[pos]) {
                self.cut(pos);
                pos += 1;
                while !single && pos < self.end && f(self.c[pos]) {
                    pos += 1;
                }
                self.cut(pos);
            } else {
                pos += 1;
            }
        }
        self.cut(self.end);
    }

    /// Length of an English contraction at `pos` (`'s`, `'re`, ...), if any.
    fn contraction(&self, pos: usize, fold_case: bool) -> usize {
        if self.get(pos) != Some('\'') || pos + 1 >= self.end {
            return 0;
        }
        let low = |c: char| {
            if fold_case {
                super::unicode::to_lower(c)
            } else {
                c
            }
        };
        let n = low(self.c[pos + 1]);
        if matches!(n, 's' | 't' | 'm' | 'd') {
            return 2;
        }
        if pos + 2 < self.end {
            let nn = low(self.c[pos + 2]);
            if matches!((n, nn), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                return 3;
            }
        }
        0
    }

    fn other(c: char) -> bool {
        !(is_whitespace(c) || is_letter(c) || is_number(c))
    }

    fn gpt2(&mut self, ini: usize) {
        let mut pos = ini;
        while pos < self.end {
            let c = self.c[pos];
            let k = self.contraction(pos, false);
            if k > 0 {
                pos += k;
                self.cut(pos);
                continue;
            }
            let lead = (c == ' ') as usize;
            let c2 = if c == ' ' { self.get(pos + 1) } else { Some(c) };
            if let Some(c2) = c2 {
                let class: Option<fn(char) -> bool> = if is_letter(c2) {
                    Some(is_letter)
                } else if is_number(c2) {
                    Some(is_number)
                } else if Self::other(c2) {
                    Some(Self::other)
                } else {
                    None
                };
                if let Some(f) = class {
                    pos += lead;
                    while self.is(pos, f) {
                        pos += 1;
                    }
                    self.cut(pos);
                    continue;
                }
            }
            let mut n = 0;
            while self.is(pos + n, is_whitespace) {
                n += 1;
            }
            if n > 1 && pos + n < self.end {
                pos += n - 1; // \s+(?!\S): leave the last space to the next word
            } else if n > 0 {
                pos += n;
            } else {
                pos += 1;
            }
            self.cut(pos);
        }
    }

    fn llama3(&mut self, ini: usize, max_digits: usize) {
        let mut pos = ini;
        while pos < self.end {
            let c = self.c[pos];
            let k = self.contraction(pos, true);
            if k > 0 {
                pos += k;
                self.cut(pos);
                continue;
            }
            // [^\r\n\p{L}\p{N}]?\p{L}+
            if !(c == '\r' || c == '\n' || is_number(c))
                && (is_letter(c) || self.is(pos + 1, is_letter))
            {
                pos += 1;
                while self.is(pos, is_letter) {
                    pos += 1;
                }
                self.cut(pos);
                continue;
            }
            // \p{N}{1,max}
            if is_number(c) {
                let mut start = pos;
                while self.is(pos, is_number) {
                    pos += 1;
                    if pos - start >= max_digits {
                        self.cut(pos);
                        start = pos;
                    }
                }
                self.cut(pos);
                continue;
            }
            // " ?[^\s\p{L}\p{N}]+[\r\n]*"
            let c2 = if c == ' ' { self.get(pos + 1) } else { Some(c) };
            if c2.is_none_or(Self::other) {
                pos += (c == ' ') as usize;
                while self.is(pos, Self::other) {
                    pos += 1;
                }
                while self.is(pos, |x| x == '\r' || x == '\n') {
                    pos += 1;
                }
                self.cut(pos);
                continue;
            }
            let mut n = 0;
            let mut last_newline_end = 0;
            while self.is(pos + n, is_whitespace) {
                if matches!(self.c[pos + n], '\r' | '\n') {
                    last_newline_end = pos + n + 1;
                }
                n += 1;
            }
            if last_newline_end > 0 {
                pos = last_newline_end; // \s*[\r\n]+
            } else if n > 1 && pos + n < self.end {
                pos += n - 1; // \s+(?!\S)
            } else if n > 0 {
                pos += n; // \s+
            } else {
                pos += 1;
            }
            self.cut(pos);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: &str, text: &str) -> Vec<String> {
        let (p, _, _) = PreTokenizer::for_name(Some(pre));
        p.split(text)
            .into_iter()
            .map(|(a, b)| text[a..b].to_string())
            .collect()
    }

    #[test]
    fn gpt2_family() {
        assert_eq!(
            words("gpt-2", "Hello world's  end 123\n\nok"),
            ["Hello", " world", "'s", " ", " end", " 123", "\n", "\n", "ok"]
        );
        assert_eq!(words("smollm", "ab 123x"), ["ab", " ", "1", "2", "3", "x"]);
        assert_eq!(
            words("default", "a+b=12345!"),
            ["a", "+", "b", "=", "123", "45", "!"]
        );
    }

    #[test]
    fn llama3_family() {
        assert_eq!(
            words("llama-bpe", "I'M 12345 ok!!\n\n  x  "),
            ["I", "'M", " ", "123", "45", " ok", "!!\n\n", " ", " x", "  "]
        );
        assert_eq!(words("qwen2", "x 123"), ["x", " ", "1", "2", "3"]);
        assert_eq!(words("qwen2", "  \n  y"), ["  \n", " ", " y"]);
    }
}
