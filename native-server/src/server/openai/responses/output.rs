//! A response's output items and its finished form, the same whether streamed or not.

use weft_core::scheduler::{Finish, Summary};

use super::input::output_text;
use super::types::{
    FunctionCallItem, IncompleteDetails, InputTokensDetails, Item, MessageItem,
    OutputTokensDetails, ResponseObject, ResponseUsage,
};
use crate::server::common::ids;
use crate::server::common::tools::ToolCall;

/// Whether the reply was cut short (`max_output_tokens`, or the context filled up).
pub fn cut_short(s: &Summary) -> bool {
    s.finish == Finish::Length
}

/// A fresh message id (`msg_…`).
pub fn message_id() -> String {
    format!("msg_{}", ids::unique())
}

/// The output of a reply: the message (id `message_id`) when there is text or no call, then
/// one `function_call` item per call, with fresh ids.
pub fn items(message_id: &str, text: &str, calls: &[ToolCall], cut: bool) -> Vec<Item> {
    let mut out = Vec::with_capacity(calls.len() + 1);
    if !text.is_empty() || calls.is_empty() {
        out.push(Item::Message(MessageItem {
            id: message_id.to_string(),
            role: "assistant".into(),
            status: if cut { "incomplete" } else { "completed" },
            content: vec![output_text(text)],
        }));
    }
    out.extend(calls.iter().map(|c| {
        Item::FunctionCall(FunctionCallItem {
            id: format!("fc_{}", ids::unique()),
            call_id: format!("call_{}", ids::unique()),
            name: c.name.clone(),
            arguments: c.arguments.to_string(),
            status: "completed",
        })
    }));
    out
}

/// `draft` (the in-progress response) finished with `output`.
pub fn finished(draft: &ResponseObject, output: Vec<Item>, s: &Summary) -> ResponseObject {
    let cut = cut_short(s);
    ResponseObject {
        status: if cut { "incomplete" } else { "completed" },
        completed_at: (!cut).then(crate::server::clock::now_unix),
        incomplete_details: cut.then_some(IncompleteDetails {
            reason: "max_output_tokens",
        }),
        output,
        usage: Some(ResponseUsage {
            input_tokens: s.prompt_tokens,
            input_tokens_details: InputTokensDetails {
                cached_tokens: s.cached_tokens,
                cache_write_tokens: 0,
            },
            output_tokens: s.completion_tokens,
            output_tokens_details: OutputTokensDetails {
                reasoning_tokens: 0,
            },
            total_tokens: s.prompt_tokens + s.completion_tokens,
        }),
        ..draft.clone()
    }
}
