//! Request bodies and response streams shared by the adapters.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use weft_core::scheduler::Event;

use super::error::ApiError;
use super::generate::EventStream;

/// Parses a JSON body: 413 when over the size limit, 400 for bad JSON or wrong field types
/// (the message says which field).
pub fn parse<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let bytes = body.map_err(|e| {
        let status = e.status();
        let mut err = ApiError::invalid(e.body_text());
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            err.status = status;
            err.code = Some("request_too_large");
            err.message =
                "the request body is larger than the server accepts (--body-limit)".into();
        }
        err
    })?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::invalid("the body must be a JSON object"));
    }
    serde_json::from_value(value).map_err(|e| ApiError::invalid(format!("invalid request: {e}")))
}

/// A string or a list of strings (OpenAI `stop`).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// Turns an event stream into frames: `f` gets each event (and `None` once the stream ends)
/// and returns the frames to send and whether the response is complete.
pub fn frames<F>(rx: EventStream, f: F) -> impl Stream<Item = String> + Send + 'static
where
    F: FnMut(Option<(usize, Event)>) -> (Vec<String>, bool) + Send + 'static,
{
    struct St<F> {
        rx: EventStream,
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
