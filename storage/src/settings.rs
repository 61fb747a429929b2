//! Settings: key → JSON value. The storage keeps any key; which keys exist and their types
//! are the server's business (it validates before writing).

use serde_json::{Map, Value};

use crate::{now, Get, Result, Storage, StorageError};

impl Storage {
    /// Every stored setting.
    pub async fn settings(&self) -> Result<Map<String, Value>> {
        let sql = "SELECT key, value FROM settings ORDER BY key";
        let rows: Vec<(String, String)> = on_pool!(self, |p| sqlx::query(sql)
            .fetch_all(p)
            .await?
            .iter()
            .map(|r| Ok((r.text("key")?, r.text("value")?)))
            .collect::<Result<_>>())?;
        rows.into_iter()
            .map(|(k, v)| {
                let v = serde_json::from_str(&v)
                    .map_err(|e| StorageError::Corrupt(format!("setting {k}: {e}")))?;
                Ok((k, v))
            })
            .collect()
    }

    /// Writes settings in one transaction: each `Some` value is stored, each `None` removed;
    /// with `replace`, every key not named is removed too.
    pub async fn write_settings(
        &self,
        changes: &[(String, Option<Value>)],
        replace: bool,
    ) -> Result<()> {
        let at = now();
        let upsert = "INSERT INTO settings (key, value, updated_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at";
        let delete = "DELETE FROM settings WHERE key = $1";
        on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            if replace {
                sqlx::query("DELETE FROM settings")
                    .execute(&mut *tx)
                    .await?;
            }
            for (k, v) in changes {
                match v {
                    Some(v) => {
                        sqlx::query(upsert)
                            .bind(k)
                            .bind(v.to_string())
                            .bind(at)
                            .execute(&mut *tx)
                            .await?
                    }
                    None => sqlx::query(delete).bind(k).execute(&mut *tx).await?,
                };
            }
            tx.commit().await?;
            Ok(())
        })
    }

    /// The newest change time of any setting (0 when none): replicas poll this to notice
    /// changes made elsewhere. Replacing with fewer keys also counts, through the count.
    pub async fn settings_stamp(&self) -> Result<(i64, i64)> {
        let sql = "SELECT COALESCE(MAX(updated_at), 0) AS t, COUNT(*) AS n FROM settings";
        on_pool!(self, |p| {
            let r = sqlx::query(sql).fetch_one(p).await?;
            Ok((r.int("t")?, r.int("n")?))
        })
    }
}
