//! Requests whose prompt holds embedding rows (images): their prompt is evaluated through
//! [`Engine::prefill_prompt`](crate::engine::Engine::prefill_prompt) in one go when their step
//! comes, rather than in token chunks shared with other sequences (an image's rows attend to
//! each other and are evaluated together). The rest of their life — decoding, stop strings,
//! cancellation, preemption, prefix reuse by cache keys — is every request's.

use std::sync::atomic::Ordering::Relaxed;

use super::super::request::{Event, Failure, Request};
use super::Scheduler;
use crate::engine::{EngineError, PromptPiece};

/// The token id of each prompt position (the placeholder at embedding rows): what the
/// penalties' history and the prompt checks read.
pub(super) fn ids(req: &Request) -> std::borrow::Cow<'_, [u32]> {
    match &req.media {
        Some(m) => m.ids().into(),
        None => req.prompt.as_slice().into(),
    }
}

impl Scheduler {
    /// Evaluates what is left of the prompt of every running media sequence that is still
    /// prefilling (after a preemption: the prompt and the tokens generated before it), and
    /// samples its first token when the prompt's end gives it.
    pub(super) fn prefill_media(&mut self) {
        let mut i = 0;
        while i < self.active.len() {
            let s = &self.active[i];
            let Some(media) = s.req.media.clone().filter(|_| s.prefilling()) else {
                i += 1;
                continue;
            };
            let mut prompt = media.prompt.clone();
            if s.feed.len() > prompt.len() {
                prompt
                    .pieces
                    .push(PromptPiece::Tokens(s.feed[prompt.len()..].to_vec()));
            }
            let (slot, fed) = (s.slot, s.fed);
            let result = self.engine.prefill_prompt(slot as u32, &prompt.from(fed));
            let logits = match result {
                Ok(l) => l,
                Err(e) => {
                    self.fail_media(i, e);
                    continue;
                }
            };
            let s = &mut self.active[i];
            let n = s.feed.len() - fed;
            self.slots[slot].cached.extend_from_slice(&s.feed[fed..]);
            s.fed = s.feed.len();
            self.stats.steps.fetch_add(1, Relaxed);
            if !s.feed_wants_logits() {
                i += 1;
                continue;
            }
            self.stats.prompt_tokens.fetch_add(n as u64, Relaxed);
            match self.take_logits(i, logits) {
                Some(f) => self.end(i, f),
                None => i += 1,
            }
        }
    }

    /// A media prompt the engine refused (`Invalid`: the request's to fix) or failed on; its
    /// slot starts empty next time.
    fn fail_media(&mut self, i: usize, e: EngineError) {
        let mut s = self.active.swap_remove(i);
        let _ = self.engine.truncate(s.slot as u32, 0);
        self.slots[s.slot].cached.clear();
        self.slots[s.slot].busy = false;
        self.stats.requests_failed.fetch_add(1, Relaxed);
        let failure = match e {
            EngineError::Invalid(msg) => Failure::Rejected(msg),
            other => Failure::Engine(other.to_string()),
        };
        s.req.sink.send(Event::Failed(failure));
    }
}
