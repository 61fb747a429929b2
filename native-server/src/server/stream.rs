//! Streamed responses shared by the surfaces: an event stream turned into frames, sent as
//! Server-Sent Events or newline-delimited JSON.

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
pub fn frames<T, F>(rx: UnboundedReceiver<T>, f: F) -> impl Stream<Item = String> + Send + 'static
where
    T: Send + 'static,
    F: FnMut(Option<T>) -> (Vec<String>, bool) + Send + 'static,
{
    struct St<T, F> {
        rx: UnboundedReceiver<T>,
        f: F,
        queue: VecDeque<String>,
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

/// A newline-delimited JSON response, one line per string.
pub fn ndjson(frames: impl Stream<Item = String> + Send + 'static) -> Response {
    let body = Body::from_stream(frames.map(|s| Ok::<_, Infallible>(s + "\n")));
    ([("content-type", "application/x-ndjson")], body).into_response()
}

/// One frame as JSON text (response types always serialize).
pub fn json_frame(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
