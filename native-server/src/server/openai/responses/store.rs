//! Where responses created with `store: true` are kept, for `GET /v1/responses/{id}`, its
//! `input_items`, and `previous_response_id`: the database (`weft_storage`'s `responses`
//! table), so they survive a restart and every replica sees them. Each carries its owner
//! (`Caller::owner`); every read and delete names the caller as owner, so another principal's
//! response is exactly as absent as one never made (the same 404).
//!
//! A response is written before it is answered (the last event of a stream waits for the
//! write), so a response a client received is never missing afterwards.

use serde_json::Value;
use weft_storage::{ResponseBound, Storage, StoredResponse};

use super::input;
use super::types::{Item, ResponseObject};
use crate::server::error::ApiError;

/// At most this many responses are kept per owner...
pub const MAX_RESPONSES: i64 = 1024;
/// ...holding at most this many bytes (their JSON size) together; the owner's oldest go
/// first. Every stored response repeats its whole conversation, so a long chat continued
/// turn by turn takes room quadratic in its length: the byte bound keeps that in check.
pub const MAX_BYTES: i64 = 64 << 20;

/// One stored response and the conversation it answered.
#[derive(Clone, Debug)]
pub struct Stored {
    /// The response object as it was answered.
    pub response: Value,
    /// The input it answered: the earlier responses' input and output (when it continued one),
    /// then its own request's items. Instructions are not items: they are not carried over.
    pub input: Vec<Item>,
}

impl Stored {
    /// The conversation a follow-up continues: the input, then this response's output.
    pub fn conversation(&self) -> Result<Vec<Item>, ApiError> {
        let output = match self.response.get("output") {
            Some(Value::Array(items)) => input::items(items, "output")?,
            _ => Vec::new(),
        };
        Ok(self.input.iter().cloned().chain(output).collect())
    }
}

/// The stored responses, per owner, in the database.
pub struct ResponseStore {
    storage: Storage,
    bound: ResponseBound,
}

impl ResponseStore {
    pub fn new(storage: Storage) -> Self {
        ResponseStore::with_bound(storage, MAX_RESPONSES, MAX_BYTES)
    }

    pub fn with_bound(storage: Storage, count: i64, bytes: i64) -> Self {
        ResponseStore {
            storage,
            bound: ResponseBound { count, bytes },
        }
    }

    /// Stores `response` (answering `input`) as `owner`'s.
    pub async fn put(
        &self,
        owner: &str,
        response: &ResponseObject,
        input: &[Item],
    ) -> Result<(), ApiError> {
        let row = StoredResponse {
            id: response.id.clone(),
            owner: owner.to_string(),
            created_at: i64::try_from(response.created_at).unwrap_or(i64::MAX),
            response: json_text(response)?,
            input: json_text(&input)?,
        };
        Ok(self.storage.put_response(&row, self.bound).await?)
    }

    /// `owner`'s response `id`; None when there is none or it is someone else's.
    pub async fn get(&self, owner: &str, id: &str) -> Result<Option<Stored>, ApiError> {
        let Some(row) = self.storage.get_response(id, owner).await? else {
            return Ok(None);
        };
        let corrupt = |e: serde_json::Error| {
            tracing::error!(id, error = %e, "a stored response is not valid JSON");
            ApiError::internal(format!("stored response {id} cannot be read"))
        };
        let response: Value = serde_json::from_str(&row.response).map_err(corrupt)?;
        let input: Vec<Value> = serde_json::from_str(&row.input).map_err(corrupt)?;
        Ok(Some(Stored {
            response,
            input: input::items(&input, "input")?,
        }))
    }

    /// Deletes `owner`'s response `id`; false when there is none or it is someone else's.
    pub async fn delete(&self, owner: &str, id: &str) -> Result<bool, ApiError> {
        Ok(self.storage.delete_response(id, owner).await?)
    }
}

fn json_text(v: &impl serde::Serialize) -> Result<String, ApiError> {
    serde_json::to_string(v).map_err(|e| ApiError::internal(format!("serializing: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conversation_is_the_input_then_the_output() {
        let mut r = super::super::create::sample_draft();
        let answer = input::message("assistant", vec![input::output_text("answer")]);
        r.output = vec![answer.clone()];
        let s = Stored {
            response: serde_json::to_value(&r).unwrap(),
            input: input::parse(Some(&serde_json::json!("question"))).unwrap(),
        };
        let c = s.conversation().unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0], s.input[0]);
        // Read back from its JSON, the output item keeps its id and text.
        assert_eq!(c[1], answer);
    }
}
