//! Input moderation: the text a request's user wrote (user messages; a raw prompt), checked
//! before anything is generated. System prompts, tool results and earlier assistant turns are
//! not the user's words and are not checked (the output rules saw the assistant's).

use weft_core::chat::Message;

use super::Screened;
use crate::server::error::ApiError;

/// Checks the user messages of a conversation.
pub fn check_messages(ctx: &dyn Screened, messages: &[Message]) -> Result<(), ApiError> {
    if ctx.screen().is_none() {
        return Ok(());
    }
    for m in messages.iter().filter(|m| m.role == "user") {
        // Content that does not parse fails later, in the template, with its own message.
        if let Ok(Some(text)) = m.text() {
            check_text(ctx, &text)?;
        }
    }
    Ok(())
}

/// Checks one text the user sent (a raw prompt, or a message).
pub fn check_text(ctx: &dyn Screened, text: &str) -> Result<(), ApiError> {
    let Some(screen) = ctx.screen() else {
        return Ok(());
    };
    let hits: Vec<_> = screen
        .rules
        .input_hits(text)
        .into_iter()
        .map(|h| h.rule)
        .collect();
    screen.act(ctx, &hits, "input").map_err(ApiError::policy)
}
