//! JSON request bodies whose rejection is the API's own error: 413 over the body limit, 400 for
//! bad JSON, a non-object body or a wrong field type (the message names the field). Handlers take
//! [`OpenAiJson`] on `/v1` and [`ApiJson`] elsewhere, so a malformed request never falls through
//! to axum's plain-text rejections.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::{ApiError, OpenAiError, PlainError};

/// Reads and parses a JSON object body.
async fn read<T: DeserializeOwned, S: Send + Sync>(req: Request, state: &S) -> Result<T, ApiError> {
    let bytes = Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large("the request body is larger than the server accepts (--body-limit)")
        } else {
            ApiError::invalid(e.body_text())
        }
    })?;
    parse(&bytes)
}

/// Parses bytes as a JSON object of type `T`.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::invalid(format!("the body is not valid JSON: {e}")))?;
    from_value(value)
}

/// Converts an already-parsed JSON object body into `T`.
pub fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    if !value.is_object() {
        return Err(ApiError::invalid("the body must be a JSON object"));
    }
    serde_json::from_value(value).map_err(|e| ApiError::invalid(format!("invalid request: {e}")))
}

/// A JSON body on an OpenAI (`/v1`) route.
pub struct OpenAiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for OpenAiJson<T> {
    type Rejection = OpenAiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Ok(OpenAiJson(read(req, state).await?))
    }
}

/// A JSON body on an `/api` (Ollama, chat UI, admin) route.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = PlainError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Ok(ApiJson(read(req, state).await?))
    }
}
