//! Where chat-UI sessions live: the admin storage (SQLite or Postgres), so a session survives a
//! restart and another replica can continue it.
//!
//! A finished turn is recorded from inside the reply's stream, which cannot wait for the
//! database; so writes go through one writer task, in order, and until a session's writes have
//! landed this replica answers reads of it from memory (`pending`). A reply's next turn on the
//! same replica therefore always sees it; another replica sees it once written (milliseconds).
//!
//! Every session has an owner (the principal that made it) and every call names the caller:
//! another owner's session is answered as missing, in memory as in the database.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use weft_core::chat::Message;
use weft_storage::Storage;

use sha2::{Digest, Sha256};

use crate::server::error::ApiError;

/// A session as the store keys it: (owner, id).
type Key = (String, String);

fn key(owner: &str, id: &str) -> Key {
    (owner.to_string(), id.to_string())
}

/// What the writer task does, in arrival order.
enum Write {
    Create(Key, oneshot::Sender<Result<bool, String>>),
    /// The conversation; whether a missing session is made (the default session's first turn).
    Save(Key, Vec<Message>, bool),
    Delete(Key, oneshot::Sender<Result<bool, String>>),
    /// Answers once every earlier write has landed.
    Flush(oneshot::Sender<()>),
}

/// A session's newest conversation while writes of it are queued.
struct Pending {
    writes: usize,
    messages: Vec<Message>,
}

/// The chat-UI sessions (see the module comment).
pub struct Sessions {
    storage: Storage,
    pending: Arc<Mutex<HashMap<Key, Pending>>>,
    writer: OnceLock<mpsc::UnboundedSender<Write>>,
}

impl Sessions {
    pub fn new(storage: Storage) -> Self {
        Sessions {
            storage,
            pending: Arc::default(),
            writer: OnceLock::new(),
        }
    }

    /// Starts a new, empty session of `owner`.
    pub async fn create(&self, owner: &str, id: &str) -> Result<(), ApiError> {
        let (tx, rx) = oneshot::channel();
        self.send(Write::Create(key(owner, id), tx));
        match rx.await {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => Err(ApiError::internal(format!("session id {id} exists"))),
            Ok(Err(e)) => Err(ApiError::internal(format!("storing the session: {e}"))),
            Err(_) => Err(ApiError::internal("the session writer stopped")),
        }
    }

    /// The conversation of `owner`'s session, or None when `owner` has no such session.
    pub async fn get(&self, owner: &str, id: &str) -> Result<Option<Vec<Message>>, ApiError> {
        if let Some(p) = self.lock().get(&key(owner, id)) {
            return Ok(Some(p.messages.clone()));
        }
        let stored = self
            .storage
            .session_messages(id, owner)
            .await
            .map_err(|e| ApiError::internal(format!("reading session {id}: {e}")))?;
        stored
            .map(|ms| {
                ms.into_iter()
                    .map(|m| {
                        serde_json::from_value(m).map_err(|e| {
                            ApiError::internal(format!("a stored message of session {id}: {e}"))
                        })
                    })
                    .collect()
            })
            .transpose()
    }

    /// Whether `owner` has a session `id` (without reading its conversation).
    pub async fn exists(&self, owner: &str, id: &str) -> Result<bool, ApiError> {
        if self.lock().contains_key(&key(owner, id)) {
            return Ok(true);
        }
        self.storage
            .session_exists(id, owner)
            .await
            .map_err(|e| ApiError::internal(format!("reading session {id}: {e}")))
    }

    /// Records the conversation of `owner`'s session without waiting; a missing session is
    /// made only with `create` (else a reply that ends after its session was deleted would
    /// bring it back).
    pub fn save(&self, owner: &str, id: &str, messages: Vec<Message>, create: bool) {
        {
            let mut p = self.lock();
            let e = p.entry(key(owner, id)).or_insert(Pending {
                writes: 0,
                messages: Vec::new(),
            });
            e.writes += 1;
            e.messages = messages.clone();
        }
        self.send(Write::Save(key(owner, id), messages, create));
    }

    /// Deletes `owner`'s session; false when `owner` has none of that id.
    pub async fn delete(&self, owner: &str, id: &str) -> Result<bool, ApiError> {
        let (tx, rx) = oneshot::channel();
        self.send(Write::Delete(key(owner, id), tx));
        match rx.await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(e)) => Err(ApiError::internal(format!("deleting session {id}: {e}"))),
            Err(_) => Err(ApiError::internal("the session writer stopped")),
        }
    }

    /// Waits for every queued write to land (at shutdown, so no finished turn is lost).
    pub async fn flush(&self) {
        if self.writer.get().is_none() {
            return;
        }
        let (tx, rx) = oneshot::channel();
        self.send(Write::Flush(tx));
        let _ = rx.await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a write, starting the writer task on first use (always from inside the runtime).
    fn send(&self, w: Write) {
        let tx = self.writer.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(write_all(self.storage.clone(), self.pending.clone(), rx));
            tx
        });
        // The receiver lives as long as the runtime; a send after shutdown has nobody to tell.
        let _ = tx.send(w);
    }
}

/// The writer task: applies writes in order.
async fn write_all(
    storage: Storage,
    pending: Arc<Mutex<HashMap<Key, Pending>>>,
    mut rx: mpsc::UnboundedReceiver<Write>,
) {
    while let Some(w) = rx.recv().await {
        match w {
            Write::Create((owner, id), done) => {
                let r = storage.create_session(&id, &owner).await;
                let _ = done.send(r.map_err(|e| e.to_string()));
            }
            Write::Save(k, messages, create) => {
                let json: Vec<Value> = messages
                    .iter()
                    .filter_map(|m| serde_json::to_value(m).ok())
                    .collect();
                let (owner, id) = &k;
                if let Err(e) = storage.write_session(id, owner, &json, create).await {
                    tracing::error!(session = %id, "storing the chat session failed: {e}");
                }
                let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(e) = p.get_mut(&k) {
                    e.writes -= 1;
                    if e.writes == 0 {
                        p.remove(&k);
                    }
                }
            }
            Write::Flush(done) => {
                let _ = done.send(());
            }
            Write::Delete(k, done) => {
                let r = storage.delete_session(&k.1, &k.0).await;
                pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&k);
                let _ = done.send(r.map_err(|e| e.to_string()));
            }
        }
    }
}

/// The session of `owner`'s requests that name none: derived from the owner, so each
/// principal has its own (its history, uploads and sandbox workspace), never a shared one.
pub fn default_session(owner: &str) -> String {
    let h = Sha256::digest(format!("weft chat-ui default session\0{owner}").as_bytes());
    let hex: String = h[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("default-{hex}")
}

/// The 404 of a session the caller does not have (missing or another principal's alike).
pub fn unknown(id: &str) -> ApiError {
    ApiError::not_found(format!(
        "unknown session {id:?}; create one with POST /api/sessions"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_owner_has_its_own_default_session() {
        assert_eq!(default_session("key_a"), default_session("key_a"));
        assert_ne!(default_session("key_a"), default_session("key_b"));
        assert_ne!(default_session("open"), default_session("env"));
    }
}
