//! The request-log bus: one [`LogEvent`] per finished request, broadcast to the subscribers of
//! `GET /api/v1/logs/stream`. A bounded `tokio::sync::broadcast` channel: sending never waits,
//! so a slow subscriber loses the oldest events (it is told how many) instead of slowing
//! requests down.

use serde::Serialize;
use tokio::sync::broadcast;
use utoipa::ToSchema;

/// Events kept for a subscriber that has not read them yet.
const CAPACITY: usize = 1024;

/// One finished request. Never the key itself: only its id.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct LogEvent {
    /// Unix seconds when the request finished.
    pub at: u64,
    /// The `x-request-id` (the client's, or one the server made).
    pub request_id: String,
    /// The key's id; `env` (WEFT_ADMIN_KEY), `open` (no keys exist), or null when none was
    /// accepted.
    pub key_id: Option<String>,
    pub method: String,
    pub route: String,
    /// The model that generated, for inference requests.
    pub model: Option<String>,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// From the request's arrival to the end of its body (the whole stream, when streamed).
    pub latency_ms: u64,
    /// The HTTP status (a stream that ends with an error event still answered 200).
    pub status: u16,
}

/// The broadcast channel's sending side.
pub struct LogBus {
    tx: broadcast::Sender<LogEvent>,
}

impl Default for LogBus {
    fn default() -> Self {
        LogBus {
            tx: broadcast::channel(CAPACITY).0,
        }
    }
}

impl LogBus {
    /// Sends to the current subscribers (none: dropped).
    pub fn send(&self, ev: LogEvent) {
        let _ = self.tx.send(ev);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<LogEvent> {
        self.tx.subscribe()
    }
}
