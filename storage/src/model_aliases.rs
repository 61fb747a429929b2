//! Model names clients made and overrides set on model files' own names (the registry's
//! catalog decides what they mean; here they are rows). Replicas on one database share them:
//! each writes its changes as they happen and re-reads the whole table on a poll.

use serde::{Deserialize, Serialize};

use crate::{now, Get, Result, Storage};

/// One stored name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelAlias {
    pub name: String,
    /// `file` (target is a GGUF path) or `alias` (target is another name).
    pub target_kind: String,
    pub target: String,
    /// A JSON object (system, template, parameters).
    pub overrides: String,
    /// `created` by a client, or `command_line` / `directory` for overrides on a file's name.
    pub origin: String,
    pub updated_at: i64,
}

fn row(r: &impl Get) -> Result<ModelAlias> {
    Ok(ModelAlias {
        name: r.text("name")?,
        target_kind: r.text("target_kind")?,
        target: r.text("target")?,
        overrides: r.text("overrides")?,
        origin: r.text("origin")?,
        updated_at: r.int("updated_at")?,
    })
}

const UPSERT: &str = "INSERT INTO model_aliases (name, target_kind, target, overrides, origin, updated_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO UPDATE SET target_kind = excluded.target_kind, target = excluded.target, overrides = excluded.overrides, origin = excluded.origin, updated_at = excluded.updated_at";

const INSERT_NEW: &str = "INSERT INTO model_aliases (name, target_kind, target, overrides, origin, updated_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING";

impl Storage {
    /// Every stored name, by name.
    pub async fn model_aliases(&self) -> Result<Vec<ModelAlias>> {
        let sql = "SELECT name, target_kind, target, overrides, origin, updated_at FROM model_aliases ORDER BY name";
        on_pool!(self, |p| sqlx::query(sql)
            .fetch_all(p)
            .await?
            .iter()
            .map(row)
            .collect())
    }

    /// Stores `put` (replacing rows of the same names) and removes `remove`, in one
    /// transaction. `updated_at` is set to now.
    pub async fn write_model_aliases(&self, put: &[ModelAlias], remove: &[String]) -> Result<()> {
        self.write_aliases(UPSERT, put, remove).await
    }

    /// Adds the rows whose names are not stored yet (a one-time import: what another replica
    /// already stored wins). Returns how many were added.
    pub async fn import_model_aliases(&self, rows: &[ModelAlias]) -> Result<usize> {
        let before = self.model_aliases().await?.len();
        self.write_aliases(INSERT_NEW, rows, &[]).await?;
        Ok(self.model_aliases().await?.len().saturating_sub(before))
    }

    async fn write_aliases(
        &self,
        sql: &'static str,
        put: &[ModelAlias],
        remove: &[String],
    ) -> Result<()> {
        let at = now();
        on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            for a in put {
                sqlx::query(sql)
                    .bind(&a.name)
                    .bind(&a.target_kind)
                    .bind(&a.target)
                    .bind(&a.overrides)
                    .bind(&a.origin)
                    .bind(at)
                    .execute(&mut *tx)
                    .await?;
            }
            for n in remove {
                sqlx::query("DELETE FROM model_aliases WHERE name = $1")
                    .bind(n)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }
}
