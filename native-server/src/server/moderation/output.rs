//! Output moderation, on each sequence's text as it streams and before any surface sees it.
//!
//! A match can span token deltas, so the filter keeps the output so far and holds back its
//! last bytes that could still be the start of a match: the longest output keyword's length
//! (a regex rule holds back [`REGEX_HOLD`](super::rules::REGEX_HOLD)). Held text is released
//! as the output moves past it, and all of it at the end. On a blocking match the text before
//! the match is delivered, the rest never is, and the sequence ends with
//! `Failure::Blocked` (each surface's error: a 400, or its stream's error event).

use weft_core::scheduler::TokenInfo;

use super::rules::floor_char;
use super::Screened;

/// What to do with a piece of output.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Deliver this text (possibly empty: all held back) and these tokens.
    Pass(String, Vec<TokenInfo>),
    /// Deliver this text, then end the sequence with this error.
    Block(String, String),
}

/// One sequence's output filter.
pub struct OutputFilter {
    ctx: Box<dyn Screened>,
    /// The output so far (bounded by the request's max tokens).
    text: String,
    /// Bytes of `text` delivered.
    sent: usize,
    /// Tokens of text not yet wholly delivered (released with the last of their text, so
    /// logprobs never reveal held-back text).
    tokens: Vec<TokenInfo>,
}

impl OutputFilter {
    /// A filter for the current request, when its rules check output.
    pub fn for_request<C: Screened + Clone + 'static>(ctx: &C) -> Option<OutputFilter> {
        let screen = ctx.screen()?;
        screen.rules.has_output().then(|| OutputFilter {
            ctx: Box::new(ctx.clone()),
            text: String::new(),
            sent: 0,
            tokens: Vec::new(),
        })
    }

    /// New output text.
    pub fn push(&mut self, text: &str, tokens: Vec<TokenInfo>) -> Step {
        let new_from = self.text.len();
        self.text.push_str(text);
        self.tokens.extend(tokens);
        self.check(new_from, false)
    }

    /// The sequence ended: release what was held.
    pub fn finish(&mut self) -> Step {
        self.check(self.text.len(), true)
    }

    fn check(&mut self, new_from: usize, end: bool) -> Step {
        let Some(screen) = self.ctx.screen() else {
            return Step::Pass(
                self.release(self.text.len()),
                std::mem::take(&mut self.tokens),
            );
        };
        let hits = screen.rules.output_hits(&self.text, new_from);
        let rules: Vec<_> = hits.iter().map(|h| h.rule).collect();
        if let Err(msg) = screen.act(self.ctx.as_ref(), &rules, "output") {
            let at = hits
                .iter()
                .filter(|h| h.rule.action == super::rules::Action::Block)
                .map(|h| h.start)
                .min()
                .unwrap_or(self.sent)
                .max(self.sent);
            self.tokens.clear();
            return Step::Block(self.release(at), msg);
        }
        let upto = if end {
            self.text.len()
        } else {
            floor_char(
                &self.text,
                self.text.len().saturating_sub(screen.rules.hold()),
            )
        };
        let text = self.release(upto.max(self.sent));
        let tokens = if self.sent == self.text.len() {
            std::mem::take(&mut self.tokens)
        } else {
            Vec::new()
        };
        Step::Pass(text, tokens)
    }

    /// Marks `text[sent..upto]` delivered and returns it.
    fn release(&mut self, upto: usize) -> String {
        let out = self.text[self.sent..upto].to_string();
        self.sent = upto;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::moderation::{Moderation, Screen};

    /// A request for the filter: its rules and nothing else.
    #[derive(Clone)]
    struct Req(std::sync::Arc<Option<Screen>>);

    impl Screened for Req {
        fn screen(&self) -> Option<&Screen> {
            self.0.as_ref().as_ref()
        }
        fn actor(&self) -> Option<String> {
            None
        }
        fn method(&self) -> &str {
            "POST"
        }
        fn route(&self) -> &str {
            "/"
        }
        fn request_id(&self) -> &str {
            "r"
        }
    }

    fn rule(pattern: &str, action: &str) -> weft_storage::NewRule {
        weft_storage::NewRule {
            pattern: pattern.into(),
            kind: "keyword".into(),
            action: action.into(),
            applies_to: "output".into(),
        }
    }

    /// Output streamed in `pieces` through a filter with a block rule on "blue": what is
    /// delivered, and whether it was blocked.
    #[tokio::test]
    async fn a_keyword_split_across_deltas_is_held_back_and_blocked() {
        let path = std::env::temp_dir().join(format!("weft-mod-{}.db", std::process::id()));
        let storage = weft_storage::Storage::sqlite(&path).await.unwrap();
        storage.create_rule(rule("blue", "block")).await.unwrap();
        let m = Moderation::new(storage);
        m.reload().await.unwrap();
        let run = |pieces: &[&str]| {
            let ctx = Req(std::sync::Arc::new(m.screen()));
            let mut f = OutputFilter::for_request(&ctx).unwrap();
            let mut out = String::new();
            for p in pieces {
                match f.push(p, Vec::new()) {
                    Step::Pass(t, _) => out.push_str(&t),
                    Step::Block(t, _) => return (out + &t, true),
                }
            }
            match f.finish() {
                Step::Pass(t, _) => (out + &t, false),
                Step::Block(t, _) => (out + &t, true),
            }
        };
        assert_eq!(
            run(&["The sky is ", "b", "l", "ue", " today"]),
            ("The sky is ".to_string(), true)
        );
        assert_eq!(run(&["BLUE"]), (String::new(), true));
        // Held text is released as the output moves on, and all of it at the end.
        assert_eq!(
            run(&["a bl", "ack cat, bl"]),
            ("a black cat, bl".to_string(), false)
        );
        // Multi-byte text is cut on character boundaries.
        assert_eq!(run(&["ééé", "é blé"]), ("éééé blé".to_string(), false));
        for ext in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
        }
    }
}
