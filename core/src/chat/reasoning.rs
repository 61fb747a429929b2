//! Reasoning apart from the answer: models whose chat template marks it (Qwen3- and
//! DeepSeek-R1-style) write `<think>…</think>` before their answer, and some templates open the
//! block in the prompt itself. Every surface splits the reply with [`ReasoningSplitter`], so the
//! reasoning never reaches the answer text.

/// The tag that opens a reasoning block.
pub const THINK_OPEN: &str = "<think>";
/// The tag that closes it.
pub const THINK_CLOSE: &str = "</think>";

/// Whether a rendered prompt ends inside an open reasoning block (the template wrote
/// `<think>` after the last `</think>`), so the reply starts as reasoning.
pub fn opens_reasoning(prompt: &str) -> bool {
    match (prompt.rfind(THINK_OPEN), prompt.rfind(THINK_CLOSE)) {
        (Some(open), Some(close)) => open > close,
        (Some(_), None) => true,
        _ => false,
    }
}

/// Streaming splitter: push generated text, get `(is_reasoning, text)` runs. A tag split across
/// pieces is held back until it is complete; the tags themselves are dropped.
#[derive(Debug)]
pub struct ReasoningSplitter {
    held: String,
    thinking: bool,
    /// False for a model that writes no reasoning: its text passes through as answer, tags
    /// and all.
    split: bool,
}

impl Default for ReasoningSplitter {
    fn default() -> Self {
        Self::new(false)
    }
}

impl ReasoningSplitter {
    /// A splitter for a reply that starts inside a reasoning block when `inside`.
    pub fn new(inside: bool) -> Self {
        ReasoningSplitter {
            held: String::new(),
            thinking: inside,
            split: true,
        }
    }

    /// A splitter that splits nothing (for models that write no reasoning).
    pub fn none() -> Self {
        ReasoningSplitter {
            split: false,
            ..Self::new(false)
        }
    }

    /// Adds text; returns the runs that are settled.
    pub fn push(&mut self, text: &str) -> Vec<(bool, String)> {
        if !self.split {
            return if text.is_empty() {
                vec![]
            } else {
                vec![(false, text.to_string())]
            };
        }
        self.held.push_str(text);
        let mut out = Vec::new();
        loop {
            let tag = if self.thinking {
                THINK_CLOSE
            } else {
                THINK_OPEN
            };
            if let Some(i) = self.held.find(tag) {
                let before: String = self.held[..i].to_string();
                if !before.is_empty() {
                    out.push((self.thinking, before));
                }
                self.held.drain(..i + tag.len());
                self.thinking = !self.thinking;
                continue;
            }
            // Keep a tail that could be the start of the tag.
            let keep = (1..tag.len())
                .rev()
                .find(|&n| self.held.ends_with(&tag[..n]))
                .unwrap_or(0);
            let cut = self.held.len() - keep;
            if cut > 0 {
                out.push((self.thinking, self.held[..cut].to_string()));
                self.held.drain(..cut);
            }
            return out;
        }
    }

    /// Releases what is held.
    pub fn finish(&mut self) -> Vec<(bool, String)> {
        let rest = std::mem::take(&mut self.held);
        if rest.is_empty() {
            vec![]
        } else {
            vec![(self.thinking, rest)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_tags_across_pieces() {
        let mut s = ReasoningSplitter::default();
        let mut all = Vec::new();
        for p in ["Hi <thi", "nk>plan", " more</th", "ink> answer", " <"] {
            all.extend(s.push(p));
        }
        all.extend(s.finish());
        assert_eq!(
            all,
            vec![
                (false, "Hi ".into()),
                (true, "plan".into()),
                (true, " more".into()),
                (false, " answer".into()),
                (false, " ".into()),
                (false, "<".into()),
            ]
        );
    }

    /// A whole reply as `(reasoning, answer)`.
    fn split_reasoning(text: &str, inside: bool) -> (String, String) {
        let mut s = ReasoningSplitter::new(inside);
        let (mut reasoning, mut answer) = (String::new(), String::new());
        for (thinking, t) in s.push(text).into_iter().chain(s.finish()) {
            if thinking {
                reasoning.push_str(&t);
            } else {
                answer.push_str(&t);
            }
        }
        (
            reasoning.trim().to_string(),
            answer.trim_start().to_string(),
        )
    }

    #[test]
    fn a_reply_may_start_inside_the_block() {
        assert_eq!(
            split_reasoning("17*20=340\n</think>\n\n391", true),
            ("17*20=340".to_string(), "391".to_string())
        );
        assert_eq!(
            split_reasoning("no tags here", false),
            (String::new(), "no tags here".to_string())
        );
        // Never closed: all of it is reasoning, none of it the answer.
        assert_eq!(
            split_reasoning("still thinking", true),
            ("still thinking".to_string(), String::new())
        );
    }

    #[test]
    fn prompts_that_open_the_block() {
        assert!(opens_reasoning("<|im_start|>assistant\n<think>\n"));
        assert!(!opens_reasoning(
            "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        ));
        assert!(!opens_reasoning("<|im_start|>assistant\n"));
        assert!(opens_reasoning("a<think>b</think>c<think>\n"));
    }
}
