//! LoRA adapters registered against a base model: metadata (name, base model, file, scale).

use serde::Serialize;

use crate::{new_id, now, Get, Result, Storage, StorageError};

#[derive(Clone, Debug, Serialize)]
pub struct Adapter {
    pub id: String,
    pub name: String,
    pub base_model: String,
    /// Absolute path of the adapter's GGUF inside the models store.
    pub path: String,
    pub scale: f64,
    pub created_at: i64,
}

#[derive(Clone, Debug)]
pub struct NewAdapter {
    pub name: String,
    pub base_model: String,
    pub path: String,
    pub scale: f64,
}

/// The selected columns, as a literal so queries can be `concat!`ed into `&\'static str`.
macro_rules! columns {
    () => {
        "id, name, base_model, path, scale, created_at"
    };
}

fn row(r: &impl Get) -> Result<Adapter> {
    Ok(Adapter {
        id: r.text("id")?,
        name: r.text("name")?,
        base_model: r.text("base_model")?,
        path: r.text("path")?,
        scale: r.real("scale")?,
        created_at: r.int("created_at")?,
    })
}

impl Storage {
    pub async fn create_adapter(&self, a: NewAdapter) -> Result<Adapter> {
        let (id, at) = (new_id("adapter"), now());
        let sql = "INSERT INTO adapters (id, name, base_model, path, scale, created_at) VALUES ($1, $2, $3, $4, $5, $6)";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(&id)
            .bind(&a.name)
            .bind(&a.base_model)
            .bind(&a.path)
            .bind(a.scale)
            .bind(at)
            .execute(p)
            .await
            .map(drop))
        .map_err(|e| match StorageError::from(e) {
            StorageError::Conflict(_) => {
                StorageError::Conflict(format!("an adapter named {:?} already exists", a.name))
            }
            e => e,
        })?;
        Ok(Adapter {
            id,
            name: a.name,
            base_model: a.base_model,
            path: a.path,
            scale: a.scale,
            created_at: at,
        })
    }

    pub async fn list_adapters(&self) -> Result<Vec<Adapter>> {
        let sql = concat!(
            "SELECT ",
            columns!(),
            " FROM adapters ORDER BY created_at, id"
        );
        on_pool!(self, |p| sqlx::query(sql)
            .fetch_all(p)
            .await?
            .iter()
            .map(row)
            .collect())
    }

    /// The adapter whose id or name is `id_or_name`, if any.
    pub async fn find_adapter(&self, id_or_name: &str) -> Result<Option<Adapter>> {
        let sql = concat!(
            "SELECT ",
            columns!(),
            " FROM adapters WHERE id = $1 OR name = $1"
        );
        on_pool!(self, |p| sqlx::query(sql)
            .bind(id_or_name)
            .fetch_optional(p)
            .await?
            .as_ref()
            .map(row)
            .transpose())
    }

    pub async fn get_adapter(&self, id: &str) -> Result<Adapter> {
        let sql = concat!("SELECT ", columns!(), " FROM adapters WHERE id = $1");
        let found = on_pool!(self, |p| sqlx::query(sql)
            .bind(id)
            .fetch_optional(p)
            .await?
            .as_ref()
            .map(row)
            .transpose())?;
        found.ok_or_else(|| StorageError::NotFound(format!("adapter {id}")))
    }

    /// Deletes an adapter's record (never its file); returns it as it was.
    pub async fn delete_adapter(&self, id: &str) -> Result<Adapter> {
        let a = self.get_adapter(id).await?;
        let n = on_pool!(self, |p| sqlx::query("DELETE FROM adapters WHERE id = $1")
            .bind(id)
            .execute(p)
            .await?
            .rows_affected());
        if n == 0 {
            return Err(StorageError::NotFound(format!("adapter {id}")));
        }
        Ok(a)
    }
}
