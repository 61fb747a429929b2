//! A model leased for one request: the registry's [`Lease`] bound to the [`RequestCtx`] it
//! serves.
//!
//! The only way to get one is [`Inference::lease`](super::inference::Inference::lease), which takes
//! the context and checks what the request may run on (tenant allow-list and quota, the key's
//! tokens per minute, A/B routing). Prompt building moderates the user's words with the
//! lease's context, and a generation is metered, filtered and counted for the request log with
//! it (`server::generate`): none of these can be reached for a request without its context.

use crate::registry::Lease;

use super::auth::context::RequestCtx;

pub struct Leased {
    lease: Lease,
    ctx: RequestCtx,
}

impl Leased {
    pub(super) fn new(lease: Lease, ctx: RequestCtx) -> Self {
        Leased { lease, ctx }
    }

    /// The request the model serves.
    pub fn ctx(&self) -> &RequestCtx {
        &self.ctx
    }
}

impl std::ops::Deref for Leased {
    type Target = Lease;
    fn deref(&self) -> &Lease {
        &self.lease
    }
}
