//! Chat-UI sessions: an id, its owner and its conversation, one row per message (as JSON: the
//! storage does not interpret messages). A conversation is written whole, in one transaction,
//! so a reader sees either the old turn or the new one.
//!
//! Every read and write names the owner (the principal that made the session) and matches it
//! in SQL: another owner's session is indistinguishable from a missing one.

use serde_json::Value;

use crate::{now, Get, Result, Storage, StorageError};

impl Storage {
    /// Records a new, empty session of `owner`; false when the id exists already.
    pub async fn create_session(&self, id: &str, owner: &str) -> Result<bool> {
        let at = now();
        let sql = "INSERT INTO chat_sessions (id, owner, created_at, updated_at) \
            VALUES ($1, $2, $3, $3) ON CONFLICT (id) DO NOTHING";
        on_pool!(self, |p| {
            let r = sqlx::query(sql)
                .bind(id)
                .bind(owner)
                .bind(at)
                .execute(p)
                .await?;
            Ok(r.rows_affected() == 1)
        })
    }

    /// Whether `owner` has a session `id`.
    pub async fn session_exists(&self, id: &str, owner: &str) -> Result<bool> {
        let sql = "SELECT 1 AS one FROM chat_sessions WHERE id = $1 AND owner = $2";
        on_pool!(self, |p| Ok(sqlx::query(sql)
            .bind(id)
            .bind(owner)
            .fetch_optional(p)
            .await?
            .is_some()))
    }

    /// A session's conversation, oldest message first; None when `owner` has no such session.
    pub async fn session_messages(&self, id: &str, owner: &str) -> Result<Option<Vec<Value>>> {
        if !self.session_exists(id, owner).await? {
            return Ok(None);
        }
        let sql = "SELECT message FROM chat_messages WHERE session_id = $1 ORDER BY seq";
        let rows: Vec<String> = on_pool!(self, |p| {
            sqlx::query(sql)
                .bind(id)
                .fetch_all(p)
                .await?
                .iter()
                .map(|r| r.text("message"))
                .collect::<Result<Vec<String>>>()
        })?;
        rows.iter()
            .map(|m| {
                serde_json::from_str(m)
                    .map_err(|e| StorageError::Corrupt(format!("session {id}: {e}")))
            })
            .collect::<Result<Vec<Value>>>()
            .map(Some)
    }

    /// Replaces the conversation of `owner`'s session; with `create`, a missing session is
    /// made, else nothing is written for it (a reply that ended after its session was deleted).
    /// A session of another owner is never written. Returns whether it wrote.
    pub async fn write_session(
        &self,
        id: &str,
        owner: &str,
        messages: &[Value],
        create: bool,
    ) -> Result<bool> {
        let at = now();
        let upsert = "INSERT INTO chat_sessions (id, owner, created_at, updated_at) \
            VALUES ($1, $3, $2, $2) ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at \
            WHERE chat_sessions.owner = excluded.owner";
        let touch = "UPDATE chat_sessions SET updated_at = $2 WHERE id = $1 AND owner = $3";
        let clear = "DELETE FROM chat_messages WHERE session_id = $1";
        let insert = "INSERT INTO chat_messages (session_id, seq, message) VALUES ($1, $2, $3)";
        on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            let r = sqlx::query(if create { upsert } else { touch })
                .bind(id)
                .bind(at)
                .bind(owner)
                .execute(&mut *tx)
                .await?;
            if r.rows_affected() == 0 {
                return Ok(false);
            }
            sqlx::query(clear).bind(id).execute(&mut *tx).await?;
            for (seq, m) in messages.iter().enumerate() {
                sqlx::query(insert)
                    .bind(id)
                    .bind(seq as i64)
                    .bind(m.to_string())
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(true)
        })
    }

    /// Deletes `owner`'s session and its messages; false when there was none.
    pub async fn delete_session(&self, id: &str, owner: &str) -> Result<bool> {
        let find = "SELECT 1 AS one FROM chat_sessions WHERE id = $1 AND owner = $2";
        let sql = "DELETE FROM chat_sessions WHERE id = $1 AND owner = $2";
        on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            if sqlx::query(find)
                .bind(id)
                .bind(owner)
                .fetch_optional(&mut *tx)
                .await?
                .is_none()
            {
                return Ok(false);
            }
            // Postgres cascades too; deleting the messages first keeps SQLite files that were
            // opened without foreign keys consistent as well.
            sqlx::query("DELETE FROM chat_messages WHERE session_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            let r = sqlx::query(sql)
                .bind(id)
                .bind(owner)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(r.rows_affected() == 1)
        })
    }
}
