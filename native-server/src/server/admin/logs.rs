//! `GET /api/v1/logs/stream`: Server-Sent Events of structured request logs, one `log` event
//! per finished request ([`LogEvent`]: request id, key id — never the key —, route, model,
//! tokens, latency, status). A subscriber too slow to keep up gets a `lagged` event saying how
//! many it missed; requests never wait for it.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::server::admin::AdminState;
use crate::server::auth::RouterState;
use crate::server::error::PlainErrorBody;
use crate::server::request_log::LogEvent;
use axum::extract::FromRef;

pub fn routes<S: RouterState>() -> OpenApiRouter<S>
where
    AdminState: FromRef<S>,
{
    OpenApiRouter::new().routes(routes!(logs_stream))
}

/// Request logs as they happen (`event: log`, data a [`LogEvent`]; `event: lagged`, data
/// `{"dropped": N}` when this subscriber fell behind).
#[utoipa::path(get, path = "/logs/stream", tag = "admin",
    responses((status = 200, description = "text/event-stream of `log` events", body = LogEvent,
               content_type = "text/event-stream"),
              (status = 403, body = PlainErrorBody)))]
async fn logs_stream(State(st): State<AdminState>) -> Response {
    let rx = st.logs.subscribe();
    let events = stream::unfold(rx, |mut rx| async move {
        let ev = match rx.recv().await {
            Ok(e) => Event::default()
                .event("log")
                .data(serde_json::to_string(&e).unwrap_or_default()),
            Err(RecvError::Lagged(n)) => Event::default()
                .event("lagged")
                .data(json!({"dropped": n}).to_string()),
            Err(RecvError::Closed) => return None,
        };
        Some((Ok::<_, Infallible>(ev), rx))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}
