//! The audit log: who changed what, when and from where. Rows are appended, never changed;
//! callers put no secrets in `details`. [`Storage::prune_audit`] removes the rows past the
//! retention (the server runs it with the `audit_retention_*` settings).

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

    /// Removes rows older than `max_age_secs` and all but the newest `max_rows`; returns how
    /// many went.
    pub async fn prune_audit(
        &self,
        max_age_secs: Option<i64>,
        max_rows: Option<i64>,
    ) -> Result<u64> {
        let mut gone = 0;
        if let Some(age) = max_age_secs {
            let before = now().saturating_sub(age.max(0));
            gone += on_pool!(self, |p| sqlx::query("DELETE FROM audit WHERE at < $1")
                .bind(before)
                .execute(p)
                .await
                .map(|r| r.rows_affected()))?;
        }
        if let Some(rows) = max_rows {
            // The id of the newest row to drop: everything at or below it goes.
            let sql = "DELETE FROM audit WHERE id <= \
                       (SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET $1)";
            gone += on_pool!(self, |p| sqlx::query(sql)
                .bind(rows.max(0))
                .execute(p)
                .await
                .map(|r| r.rows_affected()))?;
        }
        Ok(gone)
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
