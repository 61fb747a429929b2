//! Users: a name, a role, an optional tenant and an argon2id password hash (made by the
//! caller; the hash never leaves the storage in listings).

use serde::Serialize;

use crate::{new_id, now, Get, Result, Storage, StorageError};

/// A stored user, as listed (no password hash).
#[derive(Clone, Debug, Serialize)]
pub struct User {
    pub id: String,
    pub name: String,
    pub role: String,
    pub tenant: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What creating a user stores.
#[derive(Clone, Debug)]
pub struct NewUser {
    pub name: String,
    pub role: String,
    pub password_hash: String,
    pub tenant: Option<String>,
}

/// Fields a PATCH may change (`None`: unchanged; `tenant: Some(None)`: cleared).
#[derive(Clone, Debug, Default)]
pub struct UserPatch {
    pub role: Option<String>,
    pub password_hash: Option<String>,
    pub tenant: Option<Option<String>>,
}

fn row(r: &impl Get) -> Result<User> {
    Ok(User {
        id: r.text("id")?,
        name: r.text("name")?,
        role: r.text("role")?,
        tenant: r.text_opt("tenant")?,
        created_at: r.int("created_at")?,
        updated_at: r.int("updated_at")?,
    })
}

fn conflict(e: sqlx::Error, name: &str) -> StorageError {
    match StorageError::from(e) {
        StorageError::Conflict(m) if m.contains("does not exist") => {
            StorageError::Conflict("the tenant does not exist".into())
        }
        StorageError::Conflict(_) => {
            StorageError::Conflict(format!("a user named {name:?} already exists"))
        }
        e => e,
    }
}

impl Storage {
    pub async fn create_user(&self, u: NewUser) -> Result<User> {
        let (id, at) = (new_id("user"), now());
        let sql = "INSERT INTO users (id, name, role, password_hash, tenant, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(&id)
            .bind(&u.name)
            .bind(&u.role)
            .bind(&u.password_hash)
            .bind(&u.tenant)
            .bind(at)
            .bind(at)
            .execute(p)
            .await
            .map(drop))
        .map_err(|e| conflict(e, &u.name))?;
        Ok(User {
            id,
            name: u.name,
            role: u.role,
            tenant: u.tenant,
            created_at: at,
            updated_at: at,
        })
    }

    pub async fn list_users(&self) -> Result<Vec<User>> {
        let sql = "SELECT id, name, role, tenant, created_at, updated_at FROM users ORDER BY created_at, id";
        on_pool!(self, |p| sqlx::query(sql)
            .fetch_all(p)
            .await?
            .iter()
            .map(row)
            .collect())
    }

    pub async fn get_user(&self, id: &str) -> Result<User> {
        let sql = "SELECT id, name, role, tenant, created_at, updated_at FROM users WHERE id = $1";
        let found = on_pool!(self, |p| sqlx::query(sql)
            .bind(id)
            .fetch_optional(p)
            .await?
            .as_ref()
            .map(row)
            .transpose())?;
        found.ok_or_else(|| StorageError::NotFound(format!("user {id}")))
    }

    /// Applies the fields that are set; the user must exist.
    pub async fn update_user(&self, id: &str, patch: UserPatch) -> Result<User> {
        let current = self.get_user(id).await?;
        let role = patch.role.unwrap_or(current.role);
        let tenant = patch.tenant.unwrap_or(current.tenant);
        let sql = "UPDATE users SET role = $1, tenant = $2, password_hash = COALESCE($3, password_hash), updated_at = $4 WHERE id = $5";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(&role)
            .bind(&tenant)
            .bind(&patch.password_hash)
            .bind(now())
            .bind(id)
            .execute(p)
            .await
            .map(drop))
        .map_err(|e| conflict(e, &current.name))?;
        self.get_user(id).await
    }

    pub async fn delete_user(&self, id: &str) -> Result<()> {
        let sql = "DELETE FROM users WHERE id = $1";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(id)
            .execute(p)
            .await?
            .rows_affected());
        if n == 0 {
            return Err(StorageError::NotFound(format!("user {id}")));
        }
        Ok(())
    }

    /// The stored password hash of a user (for a login check).
    pub async fn user_password_hash(&self, name: &str) -> Result<Option<String>> {
        let sql = "SELECT password_hash FROM users WHERE name = $1";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(name)
            .fetch_optional(p)
            .await?
            .map(|r| r.text("password_hash"))
            .transpose())
    }
}
