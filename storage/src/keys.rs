//! API keys: only a hash of each key is stored (the caller hashes; see the server's auth
//! module for why SHA-256 suffices), with its role, owner tenant, limits and lifetime.

use serde::Serialize;

use crate::{new_id, now, Get, Result, Storage, StorageError};

/// A stored key, as listed (never the key or its hash).
#[derive(Clone, Debug, Serialize)]
pub struct ApiKey {
    pub id: String,
    pub name: String,
    pub role: String,
    /// The key's first characters, so an operator can tell keys apart.
    pub prefix: String,
    pub tenant: Option<String>,
    pub rate_limit_rpm: Option<i64>,
    /// Tokens (prompt + completion) per minute this key may use.
    pub tokens_per_minute: Option<i64>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub last_used_at: Option<i64>,
}

/// What creating a key stores.
#[derive(Clone, Debug)]
pub struct NewKey {
    pub name: String,
    pub role: String,
    /// Hex SHA-256 of the key.
    pub hash: String,
    pub prefix: String,
    pub tenant: Option<String>,
    pub rate_limit_rpm: Option<i64>,
    pub tokens_per_minute: Option<i64>,
    pub expires_at: Option<i64>,
}

/// The listed columns, as a literal so queries can be `concat!`ed into `&'static str`.
macro_rules! columns {
    () => {
        "id, name, role, prefix, tenant, rate_limit_rpm, tokens_per_minute, created_at, expires_at, revoked_at, last_used_at"
    };
}

fn row(r: &impl Get) -> Result<ApiKey> {
    Ok(ApiKey {
        id: r.text("id")?,
        name: r.text("name")?,
        role: r.text("role")?,
        prefix: r.text("prefix")?,
        tenant: r.text_opt("tenant")?,
        rate_limit_rpm: r.int_opt("rate_limit_rpm")?,
        tokens_per_minute: r.int_opt("tokens_per_minute")?,
        created_at: r.int("created_at")?,
        expires_at: r.int_opt("expires_at")?,
        revoked_at: r.int_opt("revoked_at")?,
        last_used_at: r.int_opt("last_used_at")?,
    })
}

impl Storage {
    /// Stores a new key; a taken name is a [`StorageError::Conflict`].
    pub async fn create_key(&self, k: NewKey) -> Result<ApiKey> {
        let id = new_id("key");
        let at = now();
        let sql = "INSERT INTO api_keys (id, name, role, hash, prefix, tenant, rate_limit_rpm, tokens_per_minute, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(&id)
            .bind(&k.name)
            .bind(&k.role)
            .bind(&k.hash)
            .bind(&k.prefix)
            .bind(&k.tenant)
            .bind(k.rate_limit_rpm)
            .bind(k.tokens_per_minute)
            .bind(at)
            .bind(k.expires_at)
            .execute(p)
            .await
            .map(drop))
        .map_err(|e| match StorageError::from(e) {
            StorageError::Conflict(_) if k.tenant.is_some() => StorageError::Conflict(format!(
                "a key named {:?} exists, or tenant {:?} does not",
                k.name,
                k.tenant.as_deref().unwrap_or("")
            )),
            StorageError::Conflict(_) => {
                StorageError::Conflict(format!("a key named {:?} already exists", k.name))
            }
            e => e,
        })?;
        Ok(ApiKey {
            id,
            name: k.name,
            role: k.role,
            prefix: k.prefix,
            tenant: k.tenant,
            rate_limit_rpm: k.rate_limit_rpm,
            tokens_per_minute: k.tokens_per_minute,
            created_at: at,
            expires_at: k.expires_at,
            revoked_at: None,
            last_used_at: None,
        })
    }

    /// Every key, oldest first (revoked and expired ones included).
    pub async fn list_keys(&self) -> Result<Vec<ApiKey>> {
        let sql = concat!(
            "SELECT ",
            columns!(),
            " FROM api_keys ORDER BY created_at, id"
        );
        on_pool!(self, |p| sqlx::query(sql)
            .fetch_all(p)
            .await?
            .iter()
            .map(row)
            .collect())
    }

    /// The key whose hash is `hash`, whatever its state (the caller checks expiry and
    /// revocation, to say which).
    pub async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>> {
        let sql = concat!("SELECT ", columns!(), " FROM api_keys WHERE hash = $1");
        on_pool!(self, |p| sqlx::query(sql)
            .bind(hash)
            .fetch_optional(p)
            .await?
            .as_ref()
            .map(row)
            .transpose())
    }

    /// Revokes a key (it stays listed, marked); revoking twice keeps the first time.
    pub async fn revoke_key(&self, id: &str) -> Result<ApiKey> {
        let sql = "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(now())
            .bind(id)
            .execute(p)
            .await?
            .rows_affected());
        if n == 0 {
            return Err(StorageError::NotFound(format!("key {id}")));
        }
        self.list_keys()
            .await?
            .into_iter()
            .find(|k| k.id == id)
            .ok_or_else(|| StorageError::NotFound(format!("key {id}")))
    }

    /// Records a use of a key.
    pub async fn touch_key(&self, id: &str) -> Result<()> {
        let sql = "UPDATE api_keys SET last_used_at = $1 WHERE id = $2";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(now())
            .bind(id)
            .execute(p)
            .await
            .map(drop))?;
        Ok(())
    }

    /// How many keys were ever created (revoked ones included): once there is one, the
    /// server requires keys even on loopback.
    pub async fn key_count(&self) -> Result<i64> {
        let sql = "SELECT COUNT(*) AS n FROM api_keys";
        on_pool!(self, |p| sqlx::query(sql).fetch_one(p).await?.int("n"))
    }

    /// Keys usable now (not revoked, not expired).
    pub async fn active_key_count(&self) -> Result<i64> {
        let sql = "SELECT COUNT(*) AS n FROM api_keys WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1)";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(now())
            .fetch_one(p)
            .await?
            .int("n"))
    }
}
