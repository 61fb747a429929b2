//! Moderation rules: a pattern (keyword or regex), what it applies to (input, output, both) and
//! what a match does (block, flag). The storage keeps the strings; the server validates and
//! compiles them.

use serde::Serialize;

use crate::{new_id, now, Get, Result, Storage, StorageError};

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModerationRule {
    pub id: String,
    pub pattern: String,
    pub kind: String,
    pub action: String,
    pub applies_to: String,
    pub created_at: i64,
}

#[derive(Clone, Debug)]
pub struct NewRule {
    pub pattern: String,
    pub kind: String,
    pub action: String,
    pub applies_to: String,
}

fn row(r: &impl Get) -> Result<ModerationRule> {
    Ok(ModerationRule {
        id: r.text("id")?,
        pattern: r.text("pattern")?,
        kind: r.text("kind")?,
        action: r.text("action")?,
        applies_to: r.text("applies_to")?,
        created_at: r.int("created_at")?,
    })
}

impl Storage {
    pub async fn create_rule(&self, n: NewRule) -> Result<ModerationRule> {
        let (id, at) = (new_id("rule"), now());
        let sql = "INSERT INTO moderation_rules (id, pattern, kind, action, applies_to, created_at) VALUES ($1, $2, $3, $4, $5, $6)";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(&id)
            .bind(&n.pattern)
            .bind(&n.kind)
            .bind(&n.action)
            .bind(&n.applies_to)
            .bind(at)
            .execute(p)
            .await
            .map(drop))?;
        Ok(ModerationRule {
            id,
            pattern: n.pattern,
            kind: n.kind,
            action: n.action,
            applies_to: n.applies_to,
            created_at: at,
        })
    }

    /// Every rule, oldest first.
    pub async fn list_rules(&self) -> Result<Vec<ModerationRule>> {
        let sql = "SELECT id, pattern, kind, action, applies_to, created_at FROM moderation_rules ORDER BY created_at, id";
        on_pool!(self, |p| sqlx::query(sql)
            .fetch_all(p)
            .await?
            .iter()
            .map(row)
            .collect())
    }

    pub async fn delete_rule(&self, id: &str) -> Result<()> {
        let sql = "DELETE FROM moderation_rules WHERE id = $1";
        let n = on_pool!(self, |p| sqlx::query(sql)
            .bind(id)
            .execute(p)
            .await?
            .rows_affected());
        if n == 0 {
            return Err(StorageError::NotFound(format!("moderation rule {id}")));
        }
        Ok(())
    }
}
