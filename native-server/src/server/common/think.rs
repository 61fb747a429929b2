//! Splits streamed text into visible text and `<think>…</think>` reasoning, for the chat-UI
//! `thinking` frames. A tag split across pieces is held back until it is complete.

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// Streaming splitter: push text, get (is_thinking, text) runs.
#[derive(Debug, Default)]
pub struct ThinkSplitter {
    held: String,
    thinking: bool,
}

impl ThinkSplitter {
    /// Adds text; returns the runs that are settled.
    pub fn push(&mut self, text: &str) -> Vec<(bool, String)> {
        self.held.push_str(text);
        let mut out = Vec::new();
        loop {
            let tag = if self.thinking { CLOSE } else { OPEN };
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
        let mut s = ThinkSplitter::default();
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
}
