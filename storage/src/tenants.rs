//! Tenants: a name, the models its keys may use (none listed: all), a token quota and the
//! tokens its keys have used since the usage was last reset (the quota is a total, not a
//! period: an admin resets it).

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
    /// Prompt + completion tokens used since the last reset.
    pub tokens_used: i64,
    pub created_at: i64,
}

#[derive(Clone, Debug)]
pub struct NewTenant {
    pub name: String,
    pub models: Option<Vec<String>>,
    pub token_quota: Option<i64>,
}

/// A partial update: `None` leaves a field as it is; `Some(None)` clears a nullable one.
#[derive(Clone, Debug, Default)]
pub struct TenantPatch {
    pub name: Option<String>,
    pub models: Option<Option<Vec<String>>>,
    pub token_quota: Option<Option<i64>>,
    /// Sets `tokens_used` back to 0.
    pub reset_usage: bool,
}

/// The selected columns, as a literal so queries can be `concat!`ed into `&\'static str`.
macro_rules! columns {
    () => {
        "id, name, models, token_quota, tokens_used, created_at"
    };
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
        tokens_used: r.int("tokens_used")?,
        created_at: r.int("created_at")?,
    })
}

fn models_json(models: &Option<Vec<String>>) -> Option<String> {
    models
        .as_ref()
        .map(|m| serde_json::to_string(m).unwrap_or_default())
}

fn name_taken(name: &str) -> impl FnOnce(StorageError) -> StorageError + '_ {
    move |e| match e {
        StorageError::Conflict(_) => {
            StorageError::Conflict(format!("a tenant named {name:?} already exists"))
        }
        e => e,
    }
}

impl Storage {
    pub async fn create_tenant(&self, t: NewTenant) -> Result<Tenant> {
        let (id, at) = (new_id("tenant"), now());
        let sql = "INSERT INTO tenants (id, name, models, token_quota, created_at) VALUES ($1, $2, $3, $4, $5)";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(&id)
            .bind(&t.name)
            .bind(models_json(&t.models))
            .bind(t.token_quota)
            .bind(at)
            .execute(p)
            .await
            .map(drop))
        .map_err(|e| name_taken(&t.name)(StorageError::from(e)))?;
        Ok(Tenant {
            id,
            name: t.name,
            models: t.models,
            token_quota: t.token_quota,
            tokens_used: 0,
            created_at: at,
        })
    }

    pub async fn list_tenants(&self) -> Result<Vec<Tenant>> {
        let sql = concat!(
            "SELECT ",
            columns!(),
            " FROM tenants ORDER BY created_at, id"
        );
        on_pool!(self, |p| sqlx::query(sql)
            .fetch_all(p)
            .await?
            .iter()
            .map(row)
            .collect())
    }

    pub async fn get_tenant(&self, id: &str) -> Result<Tenant> {
        let sql = concat!("SELECT ", columns!(), " FROM tenants WHERE id = $1");
        let found = on_pool!(self, |p| sqlx::query(sql)
            .bind(id)
            .fetch_optional(p)
            .await?
            .as_ref()
            .map(row)
            .transpose())?;
        found.ok_or_else(|| StorageError::NotFound(format!("tenant {id}")))
    }

    /// Applies `patch`. Usage is reset in the same statement, and otherwise never written
    /// from the read, so tokens counted meanwhile by any replica are not lost.
    pub async fn patch_tenant(&self, id: &str, patch: TenantPatch) -> Result<Tenant> {
        let cur = self.get_tenant(id).await?;
        let name = patch.name.unwrap_or(cur.name);
        let models = patch.models.unwrap_or(cur.models);
        let quota = patch.token_quota.unwrap_or(cur.token_quota);
        let sql = "UPDATE tenants SET name = $1, models = $2, token_quota = $3, tokens_used = CASE WHEN $4 = 1 THEN 0 ELSE tokens_used END WHERE id = $5";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(&name)
            .bind(models_json(&models))
            .bind(quota)
            .bind(i64::from(patch.reset_usage))
            .bind(id)
            .execute(p)
            .await
            .map(drop))
        .map_err(|e| name_taken(&name)(StorageError::from(e)))?;
        self.get_tenant(id).await
    }

    /// Adds `tokens` to a tenant's usage (one statement, so replicas adding at once add up).
    pub async fn add_tenant_tokens(&self, id: &str, tokens: i64) -> Result<()> {
        let sql = "UPDATE tenants SET tokens_used = tokens_used + $1 WHERE id = $2";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(tokens)
            .bind(id)
            .execute(p)
            .await
            .map(drop))?;
        Ok(())
    }
}
