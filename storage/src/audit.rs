//! The audit log: who changed what, when and from where. Rows are appended, never changed;
//! callers put no secrets in `details`.

use serde::Serialize;
use serde_json::Value;

use crate::{now, Get, Result, Storage, StorageError};

/// What an audit row records.
#[derive(Clone, Debug)]
pub struct NewAudit {
    /// A key id, or `open` / `env` when no stored key was used.
    pub actor: String,
    pub method: String,
    pub route: String,
    pub status: u16,
    pub remote: Option<String>,
    pub details: Option<Value>,
}

#[derive(Clone, Debug, Serialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    pub actor: String,
    pub method: String,
    pub route: String,
    pub status: i64,
    pub remote: Option<String>,
    pub details: Option<Value>,
}

impl Storage {
    pub async fn append_audit(&self, a: NewAudit) -> Result<()> {
        let sql = "INSERT INTO audit (at, actor, method, route, status, remote, details) VALUES ($1, $2, $3, $4, $5, $6, $7)";
        let details = a.details.as_ref().map(Value::to_string);
        on_pool!(self, |p| sqlx::query(sql)
            .bind(now())
            .bind(&a.actor)
            .bind(&a.method)
            .bind(&a.route)
            .bind(a.status as i64)
            .bind(&a.remote)
            .bind(&details)
            .execute(p)
            .await
            .map(drop))?;
        Ok(())
    }

    /// The newest `limit` rows, newest first.
    pub async fn recent_audit(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        let sql = "SELECT id, at, actor, method, route, status, remote, details FROM audit ORDER BY id DESC LIMIT $1";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(limit)
            .fetch_all(p)
            .await?
            .iter()
            .map(|r| {
                let details = r
                    .text_opt("details")?
                    .map(|d| serde_json::from_str(&d))
                    .transpose()
                    .map_err(|e| StorageError::Corrupt(format!("audit.details: {e}")))?;
                Ok(AuditEntry {
                    id: r.int("id")?,
                    at: r.int("at")?,
                    actor: r.text("actor")?,
                    method: r.text("method")?,
                    route: r.text("route")?,
                    status: r.int("status")?,
                    remote: r.text_opt("remote")?,
                    details,
                })
            })
            .collect())
    }
}
