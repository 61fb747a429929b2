//! Tenants: a name, the models its keys may use (none listed: all) and a token quota.

use serde::Serialize;

use crate::{new_id, now, Get, Result, Storage, StorageError};

#[derive(Clone, Debug, Serialize)]
pub struct Tenant {
    pub id: String,
    pub name: String,
    /// Models the tenant may use; `None`: every model.
    pub models: Option<Vec<String>>,
    /// Tokens the tenant may use; `None`: unlimited.
    pub token_quota: Option<i64>,
    pub created_at: i64,
}

#[derive(Clone, Debug)]
pub struct NewTenant {
    pub name: String,
    pub models: Option<Vec<String>>,
    pub token_quota: Option<i64>,
}

fn row(r: &impl Get) -> Result<Tenant> {
    let models = r
        .text_opt("models")?
        .map(|m| serde_json::from_str(&m))
        .transpose()
        .map_err(|e| StorageError::Corrupt(format!("tenants.models: {e}")))?;
    Ok(Tenant {
        id: r.text("id")?,
        name: r.text("name")?,
        models,
        token_quota: r.int_opt("token_quota")?,
        created_at: r.int("created_at")?,
    })
}

impl Storage {
    pub async fn create_tenant(&self, t: NewTenant) -> Result<Tenant> {
        let (id, at) = (new_id("tenant"), now());
        let models = t
            .models
            .as_ref()
            .map(|m| serde_json::to_string(m).unwrap_or_default());
        let sql = "INSERT INTO tenants (id, name, models, token_quota, created_at) VALUES ($1, $2, $3, $4, $5)";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(&id)
            .bind(&t.name)
            .bind(&models)
            .bind(t.token_quota)
            .bind(at)
            .execute(p)
            .await
            .map(drop))
        .map_err(|e| match StorageError::from(e) {
            StorageError::Conflict(_) => {
                StorageError::Conflict(format!("a tenant named {:?} already exists", t.name))
            }
            e => e,
        })?;
        Ok(Tenant {
            id,
            name: t.name,
            models: t.models,
            token_quota: t.token_quota,
            created_at: at,
        })
    }

    pub async fn list_tenants(&self) -> Result<Vec<Tenant>> {
        let sql =
            "SELECT id, name, models, token_quota, created_at FROM tenants ORDER BY created_at, id";
        on_pool!(self, |p| sqlx::query(sql)
            .fetch_all(p)
            .await?
            .iter()
            .map(row)
            .collect())
    }

    pub async fn get_tenant(&self, id: &str) -> Result<Tenant> {
        let sql = "SELECT id, name, models, token_quota, created_at FROM tenants WHERE id = $1";
        let found = on_pool!(self, |p| sqlx::query(sql)
            .bind(id)
            .fetch_optional(p)
            .await?
            .as_ref()
            .map(row)
            .transpose())?;
        found.ok_or_else(|| StorageError::NotFound(format!("tenant {id}")))
    }
}
