//! A reply as it streams, taken apart: reasoning (models that write it), answer text, and the
//! tool calls held back from the answer. Every chat surface reads generated text through this.

use weft_core::chat::ReasoningSplitter;

use super::tools::{ToolCall, ToolStream};

/// Generated text into reasoning, answer text and tool calls.
pub struct ReplyParts {
    split: ReasoningSplitter,
    /// The tool-call parser, when the reply may call tools.
    tools: Option<ToolStream>,
    /// False when the request switched reasoning off: whatever the model still writes is
    /// dropped rather than mixed into the answer.
    keep_reasoning: bool,
    /// Blank lines templates put after `</think>` are not part of the answer: leading
    /// whitespace is dropped until the answer's first character, for models that reason.
    trim_start: bool,
}

impl ReplyParts {
    pub fn new(reasoning: Reasoning, tools: Option<Vec<String>>, keep_reasoning: bool) -> Self {
        ReplyParts {
            split: reasoning.splitter(),
            tools: tools.map(ToolStream::new),
            keep_reasoning,
            trim_start: reasoning != Reasoning::Absent,
        }
    }

    /// Reasoning and answer text settled after `text` (either may be empty).
    pub fn push(&mut self, text: &str) -> (String, String) {
        let runs = self.split.push(text);
        self.route(runs)
    }

    /// What was held back: reasoning, answer text, and the calls.
    pub fn finish(&mut self) -> (String, String, Vec<ToolCall>) {
        let runs = self.split.finish();
        let (reasoning, mut text) = self.route(runs);
        let (tail, calls) = self
            .tools
            .as_mut()
            .map(ToolStream::finish)
            .unwrap_or_default();
        text.push_str(&self.answer(tail));
        (reasoning, text, calls)
    }

    /// A whole reply at once.
    pub fn whole(mut self, text: &str) -> (String, String, Vec<ToolCall>) {
        let (mut reasoning, mut answer) = self.push(text);
        let (r, a, calls) = self.finish();
        reasoning.push_str(&r);
        answer.push_str(&a);
        (reasoning, answer, calls)
    }

    fn route(&mut self, runs: Vec<(bool, String)>) -> (String, String) {
        let (mut reasoning, mut text) = (String::new(), String::new());
        for (is_reasoning, t) in runs {
            if is_reasoning {
                if self.keep_reasoning {
                    reasoning.push_str(&t);
                }
                continue;
            }
            let t = match self.tools.as_mut() {
                Some(ts) => ts.push(&t),
                None => t,
            };
            text.push_str(&self.answer(t));
        }
        (reasoning, text)
    }

    fn answer(&mut self, t: String) -> String {
        if !self.trim_start {
            return t;
        }
        let rest = t.trim_start();
        if !rest.is_empty() {
            self.trim_start = false;
        }
        rest.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_answer_and_calls_come_apart() {
        let names = Some(vec!["get_weather".to_string()]);
        let mut p = ReplyParts::new(Reasoning::Open, names, true);
        let mut reasoning = String::new();
        let mut answer = String::new();
        let call =
            r#" <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#;
        for piece in ["Paris is in France", ".</th", "ink>\n\nLet me check.", call] {
            let (r, a) = p.push(piece);
            reasoning.push_str(&r);
            answer.push_str(&a);
        }
        let (r, a, calls) = p.finish();
        reasoning.push_str(&r);
        answer.push_str(&a);
        assert_eq!(reasoning, "Paris is in France.");
        assert_eq!(answer.trim_end(), "Let me check.");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "get_weather");
    }

    #[test]
    fn switched_off_reasoning_is_dropped_and_plain_models_pass_through() {
        let (r, a, _) =
            ReplyParts::new(Reasoning::Closed, None, false).whole("<think>hmm</think>\n\n42");
        assert_eq!((r.as_str(), a.as_str()), ("", "42"));
        let (r, a, _) = ReplyParts::new(Reasoning::Absent, None, true).whole("  <think>x</think>");
        assert_eq!((r.as_str(), a.as_str()), ("", "  <think>x</think>"));
    }
}

/// How a reply's reasoning is told apart from its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reasoning {
    /// The model writes none (its template does not mark it): the reply is all answer.
    Absent,
    /// The reply may open a `<think>` block.
    Closed,
    /// The prompt opened the block: the reply starts as reasoning.
    Open,
}

impl Reasoning {
    /// A splitter for the reply (one that passes everything as answer for models that write
    /// no reasoning).
    pub fn splitter(self) -> ReasoningSplitter {
        match self {
            Reasoning::Absent => ReasoningSplitter::none(),
            Reasoning::Closed => ReasoningSplitter::new(false),
            Reasoning::Open => ReasoningSplitter::new(true),
        }
    }
}
