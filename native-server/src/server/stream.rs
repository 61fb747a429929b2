//! Streamed responses shared by the surfaces: an event stream turned into frames, sent as
//! Server-Sent Events (plain `data:` frames, or typed ones with an `event:` line) or
//! newline-delimited JSON.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::body::Body;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use serde::Serialize;
use tokio::sync::mpsc::UnboundedReceiver;

/// Turns an event stream (the scheduler's events, or a tool loop's steps) into frames: `f` gets
/// each event (and `None` once the stream ends) and returns the frames to send and whether the
/// response is complete.
pub fn frames<E, F, T>(rx: UnboundedReceiver<E>, f: F) -> impl Stream<Item = T> + Send + 'static
where
    E: Send + 'static,
    F: FnMut(Option<E>) -> (Vec<T>, bool) + Send + 'static,
    T: Send + 'static,
{
    struct St<E, F, T> {
        rx: UnboundedReceiver<E>,
        f: F,
        queue: VecDeque<T>,
        ended: bool,
    }
    let st = St {
        rx,
        f,
        queue: VecDeque::new(),
        ended: false,
    };
    stream::unfold(st, |mut st| async move {
        loop {
            if let Some(s) = st.queue.pop_front() {
                return Some((s, st));
            }
            if st.ended {
                return None;
            }
            let ev = st.rx.recv().await;
            let closed = ev.is_none();
            let (out, end) = (st.f)(ev);
            st.queue.extend(out);
            st.ended = end || closed;
        }
    })
}

/// A Server-Sent Events response, one `data:` frame per string.
pub fn sse(frames: impl Stream<Item = String> + Send + 'static) -> Response {
    Sse::new(frames.map(|s| Ok::<_, Infallible>(SseEvent::default().data(s))))
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A Server-Sent Events response of typed frames: `(event name, data)` each, the name sent as
/// the `event:` line (as OpenAI's Responses API streams).
pub fn sse_typed(frames: impl Stream<Item = (String, String)> + Send + 'static) -> Response {
    let ev = |(name, data): (String, String)| SseEvent::default().event(name).data(data);
    Sse::new(frames.map(move |f| Ok::<_, Infallible>(ev(f))))
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A newline-delimited JSON response, one line per string.
pub fn ndjson(frames: impl Stream<Item = String> + Send + 'static) -> Response {
    let body = Body::from_stream(frames.map(|s| Ok::<_, Infallible>(s + "\n")));
    ([("content-type", "application/x-ndjson")], body).into_response()
}

/// One frame as JSON text (response types always serialize).
pub fn json_frame(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
