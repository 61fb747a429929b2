//! One error type for every surface, rendered in each API's own error shape: OpenAI's
//! `{"error": {"message", "type", "param", "code"}}` on `/v1`, `{"error": "..."}` on `/api` and
//! the other routes. Failures typed in core (scheduler, registry) are mapped to a status here,
//! once.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use weft_core::scheduler::{Failure, SubmitError};

use crate::registry::RegistryError;

/// A request that cannot be served, with the HTTP status it maps to.
#[derive(Clone, Debug)]
pub struct ApiError {
    pub status: StatusCode,
    /// OpenAI `error.type` (`invalid_request_error`, `not_found_error`, ...).
    pub kind: &'static str,
    /// OpenAI `error.code` (a short machine-readable reason), if any.
    pub code: Option<&'static str>,
    pub message: String,
    /// Seconds for a `Retry-After` header (queue full).
    pub retry_after: Option<u32>,
}

/// OpenAI's error body.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiErrorBody {
    pub error: OpenAiErrorDetail,
}

/// OpenAI's `error` object.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiErrorDetail {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub param: Option<String>,
    pub code: Option<String>,
}

/// The error body of `/api` and the other routes.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlainErrorBody {
    pub error: String,
}

impl ApiError {
    fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        msg: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            kind,
            code: Some(code),
            message: msg.into(),
            retry_after: None,
        }
    }

    /// 400: the request is malformed or a field is out of range.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_request",
            msg,
        )
    }

    /// 400 `content_policy_violation`: a moderation rule blocked the request or its output.
    pub fn policy(msg: impl Into<String>) -> Self {
        Self::invalid_code("content_policy_violation", msg)
    }

    /// 400 with a specific code (e.g. `context_length_exceeded`).
    pub fn invalid_code(code: &'static str, msg: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", code, msg)
    }

    /// 404: an unknown model; the message lists the known names.
    pub fn unknown_model(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            msg,
        )
    }

    /// 409: the request conflicts with what exists (a name already taken).
    pub fn conflict(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            "conflict",
            msg,
        )
    }

    /// 404 with a specific code (e.g. `previous_response_not_found`).
    pub fn not_found_code(code: &'static str, msg: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "invalid_request_error", code, msg)
    }

    /// 404: any other missing thing.
    pub fn not_found(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found_error", "not_found", msg)
    }

    /// 413: the body is larger than the server accepts.
    pub fn too_large(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "request_too_large",
            msg,
        )
    }

    /// 429: the queue is full.
    pub fn busy(msg: impl Into<String>) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "queue_full",
            msg,
        );
        e.retry_after = Some(1);
        e
    }

    /// 401: no key, or one that is unknown, expired or revoked (OpenAI's `invalid_api_key`).
    pub fn unauthorized(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "invalid_api_key",
            msg,
        )
    }

    /// 403: the key is valid but its role may not use this route.
    pub fn forbidden(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "invalid_request_error",
            "insufficient_permissions",
            msg,
        )
    }

    /// 403: the key's tenant may not use the model asked for.
    pub fn model_forbidden(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "invalid_request_error",
            "model_not_allowed",
            msg,
        )
    }

    /// 429: the key's tenant used up its token quota (no `Retry-After`: it lasts until an
    /// admin resets or raises it).
    pub fn quota_exceeded(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "insufficient_quota",
            "insufficient_quota",
            msg,
        )
    }

    /// 429: the key used up its requests per minute; retry after `secs`.
    pub fn rate_limited(msg: impl Into<String>, secs: u32) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "rate_limit_exceeded",
            msg,
        );
        e.retry_after = Some(secs.max(1));
        e
    }

    /// The error in the shape of the API that serves `path` (OpenAI's under `/v1`).
    pub fn for_path(self, path: &str) -> Response {
        if path == "/v1" || path.starts_with("/v1/") {
            self.openai()
        } else {
            self.plain()
        }
    }

    /// 501: an OpenAI route this server does not implement.
    pub fn not_implemented(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::NOT_IMPLEMENTED,
            "not_implemented_error",
            "not_implemented",
            msg,
        )
    }

    /// 503: the model is not loaded yet, or the server is shutting down.
    pub fn unavailable(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "unavailable",
            msg,
        )
    }

    /// 500: an inference failure (never caused by client input).
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "internal_error",
            msg,
        )
    }

    fn with_headers(&self, mut r: Response) -> Response {
        if let Some(s) = self.retry_after {
            r.headers_mut().insert("retry-after", HeaderValue::from(s));
        }
        r
    }

    /// The message as the client sees it: for a 5xx, with anything that looks like a
    /// file-system path replaced by `<path>` (the full message goes to the log). A last
    /// resort: handlers should not put paths in messages in the first place.
    pub fn public_message(&self) -> String {
        if !self.status.is_server_error() {
            return self.message.clone();
        }
        let scrubbed = scrub_paths(&self.message);
        if scrubbed != self.message {
            tracing::error!(status = self.status.as_u16(), error = %self.message,
                "internal error (paths removed from the response)");
        }
        scrubbed
    }

    /// OpenAI's body for this error.
    pub fn openai_body(&self) -> OpenAiErrorBody {
        OpenAiErrorBody {
            error: OpenAiErrorDetail {
                message: self.public_message(),
                kind: self.kind.to_string(),
                param: None,
                code: self.code.map(str::to_string),
            },
        }
    }

    /// `{"error": {"message", "type", "param", "code"}}` (OpenAI).
    pub fn openai(self) -> Response {
        let body = self.openai_body();
        self.with_headers((self.status, Json(body)).into_response())
    }

    /// `{"error": "..."}` (Ollama and the other `/api` routes).
    pub fn plain(self) -> Response {
        let body = PlainErrorBody {
            error: self.public_message(),
        };
        self.with_headers((self.status, Json(body)).into_response())
    }
}

/// Whether `c` may come right before a path in a message.
fn starts_path(prev: Option<char>) -> bool {
    prev.is_none_or(|c| c.is_whitespace() || "\"'`([{=,;:<".contains(c))
}

/// Replaces absolute paths (`/a/b`, `~/a`, `C:\a`, `\\server\share`) with `<path>`. A path
/// runs until whitespace, a quote or a closing bracket; a `:` followed by a space (as in
/// "`/x/y: no such file`") ends it too.
pub fn scrub_paths(msg: &str) -> String {
    let chars: Vec<char> = msg.chars().collect();
    let mut out = String::with_capacity(msg.len());
    let mut i = 0;
    while i < chars.len() {
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let at = |k: usize| chars.get(i + k).copied();
        let name =
            |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || "._-~$@+".contains(c));
        let starts = starts_path(prev)
            && ((at(0) == Some('/') && name(at(1)))
                || (at(0) == Some('~') && at(1) == Some('/'))
                || (at(0).is_some_and(|c| c.is_ascii_alphabetic())
                    && at(1) == Some(':')
                    && matches!(at(2), Some('\\') | Some('/'))
                    && prev != Some(':'))
                || (at(0) == Some('\\') && at(1) == Some('\\')));
        if !starts {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len() {
            let c = chars[j];
            let ends = c.is_whitespace()
                || "\"'`)]}>,;".contains(c)
                || (c == ':' && j > i + 1 && chars.get(j + 1).is_none_or(|n| n.is_whitespace()));
            if ends {
                break;
            }
            j += 1;
        }
        out.push_str("<path>");
        i = j;
    }
    out
}

impl From<Failure> for ApiError {
    fn from(f: Failure) -> Self {
        let msg = f.to_string();
        match f {
            Failure::ShuttingDown => ApiError::unavailable(msg),
            Failure::Rejected(_) => ApiError::invalid(msg),
            Failure::Engine(_) => ApiError::internal(msg),
            Failure::Blocked(_) => ApiError::policy(msg),
        }
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        let msg = e.to_string();
        match e {
            RegistryError::UnknownModel { .. } => ApiError::unknown_model(msg),
            RegistryError::Invalid(_) => ApiError::invalid(msg),
            RegistryError::Conflict(_) => ApiError::conflict(msg),
            RegistryError::Unavailable(_) => ApiError::unavailable(msg),
            RegistryError::Io(_) => ApiError::internal(msg),
        }
    }
}

impl From<RegistryError> for OpenAiError {
    fn from(e: RegistryError) -> Self {
        OpenAiError(e.into())
    }
}

impl From<RegistryError> for PlainError {
    fn from(e: RegistryError) -> Self {
        PlainError(e.into())
    }
}

impl From<weft_storage::StorageError> for ApiError {
    fn from(e: weft_storage::StorageError) -> Self {
        use weft_storage::StorageError as E;
        let msg = e.to_string();
        match e {
            E::NotFound(_) => ApiError::not_found(msg),
            E::Conflict(_) => ApiError::conflict(msg),
            // Data given to load (a backup) that does not fit the schema.
            E::Invalid(_) => ApiError {
                status: StatusCode::UNPROCESSABLE_ENTITY,
                ..ApiError::invalid(msg)
            },
            _ => {
                tracing::error!(error = %msg, "storage failure");
                ApiError::internal(msg)
            }
        }
    }
}

impl From<weft_storage::StorageError> for PlainError {
    fn from(e: weft_storage::StorageError) -> Self {
        PlainError(e.into())
    }
}

impl From<SubmitError> for ApiError {
    fn from(e: SubmitError) -> Self {
        let msg = e.to_string();
        match e {
            SubmitError::QueueFull(_) => ApiError::busy(msg),
            SubmitError::ShuttingDown => ApiError::unavailable(msg),
        }
    }
}

impl From<weft_sandbox::Error> for ApiError {
    fn from(e: weft_sandbox::Error) -> Self {
        use weft_sandbox::Error as E;
        let msg = e.to_string();
        match e {
            E::NotFound(_) => ApiError::not_found(msg),
            E::SkillExists(_) => ApiError::conflict(msg),
            _ if e.is_caller_fault() => ApiError::invalid(msg),
            _ => ApiError::internal(msg),
        }
    }
}

impl From<weft_sandbox::Error> for PlainError {
    fn from(e: weft_sandbox::Error) -> Self {
        PlainError(e.into())
    }
}

impl From<weft_sandbox::Error> for OpenAiError {
    fn from(e: weft_sandbox::Error) -> Self {
        OpenAiError(e.into())
    }
}

/// An error on a `/v1` route.
pub struct OpenAiError(pub ApiError);

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        self.0.openai()
    }
}

impl From<ApiError> for OpenAiError {
    fn from(e: ApiError) -> Self {
        OpenAiError(e)
    }
}

/// An error on an `/api` route.
pub struct PlainError(pub ApiError);

impl IntoResponse for PlainError {
    fn into_response(self) -> Response {
        self.0.plain()
    }
}

impl From<ApiError> for PlainError {
    fn from(e: ApiError) -> Self {
        PlainError(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_carry_no_paths() {
        for (msg, want) in [
            (
                "creating /home/me/.weft/skills/.install-x/a: Not a directory (os error 20)",
                "creating <path>: Not a directory (os error 20)",
            ),
            (
                "writing \"/srv/weft/db\" failed",
                "writing \"<path>\" failed",
            ),
            ("open ~/models/x.gguf: denied", "open <path>: denied"),
            ("at C:\\Users\\me\\x.db (locked)", "at <path> (locked)"),
            (
                "1/2 done, http://host/x is fine",
                "1/2 done, http://host/x is fine",
            ),
            ("no path here", "no path here"),
        ] {
            assert_eq!(scrub_paths(msg), want, "{msg}");
        }
        let e = ApiError::internal("reading /var/lib/weft/x: gone");
        assert_eq!(e.public_message(), "reading <path>: gone");
        // 4xx messages are the handlers' own words, left alone.
        let e = ApiError::invalid("the URL /v1/x");
        assert_eq!(e.public_message(), "the URL /v1/x");
    }
}
