//! A/B tests between two served models, and votes on them.
//!
//! Routing is a deterministic smooth split, not a random draw: the test keeps one counter of
//! routed requests in the database, and request `n` (1-based) goes to B exactly when
//! `⌊n·share⌋` grows at `n`. After any `n` requests B has had `⌊n·share⌋` of them, so the split
//! is exact to within one request, and replicas sharing the database share the counter (it is
//! bumped and read in one `UPDATE … RETURNING`).

use serde::Serialize;

use crate::{new_id, now, Get, Result, Storage, StorageError};

/// Basis points in a whole (shares are stored as integers so both backends divide alike).
pub const WHOLE: i64 = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    A,
    B,
}

impl Variant {
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::A => "a",
            Variant::B => "b",
        }
    }

    pub fn parse(s: &str) -> Option<Variant> {
        match s.trim().to_ascii_lowercase().as_str() {
            "a" => Some(Variant::A),
            "b" => Some(Variant::B),
            _ => None,
        }
    }

    /// The arm request number `n` (1-based) of a test with `share_b` basis points goes to.
    pub fn for_request(n: i64, share_b: i64) -> Variant {
        if n >= 1 && (n * share_b) / WHOLE > ((n - 1) * share_b) / WHOLE {
            Variant::B
        } else {
            Variant::A
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct AbTest {
    pub id: String,
    pub name: String,
    pub model_a: String,
    pub model_b: String,
    /// B's share in basis points.
    pub share_b: i64,
    /// Requests routed so far (both arms).
    pub routed: i64,
    pub created_at: i64,
}

impl AbTest {
    /// Requests routed to B so far (A had the rest).
    pub fn routed_b(&self) -> i64 {
        (self.routed * self.share_b) / WHOLE
    }

    pub fn model(&self, v: Variant) -> &str {
        match v {
            Variant::A => &self.model_a,
            Variant::B => &self.model_b,
        }
    }
}

#[derive(Clone, Debug)]
pub struct NewAbTest {
    pub name: String,
    pub model_a: String,
    pub model_b: String,
    pub share_b: i64,
}

#[derive(Clone, Debug, Serialize)]
pub struct AbVote {
    pub id: String,
    pub test_id: String,
    pub variant: Variant,
    pub request_id: Option<String>,
    pub comment: Option<String>,
    pub actor: String,
    pub created_at: i64,
}

#[derive(Clone, Debug)]
pub struct NewAbVote {
    pub test_id: String,
    pub variant: Variant,
    pub request_id: Option<String>,
    pub comment: Option<String>,
    pub actor: String,
}

/// The selected columns, as a literal so queries can be `concat!`ed into `&\'static str`.
macro_rules! columns {
    () => {
        "id, name, model_a, model_b, share_b, routed, created_at"
    };
}

fn row(r: &impl Get) -> Result<AbTest> {
    Ok(AbTest {
        id: r.text("id")?,
        name: r.text("name")?,
        model_a: r.text("model_a")?,
        model_b: r.text("model_b")?,
        share_b: r.int("share_b")?,
        routed: r.int("routed")?,
        created_at: r.int("created_at")?,
    })
}

fn missing(id: &str) -> StorageError {
    StorageError::NotFound(format!("A/B test {id}"))
}

impl Storage {
    pub async fn create_ab_test(&self, t: NewAbTest) -> Result<AbTest> {
        let (id, at) = (new_id("ab"), now());
        let sql = "INSERT INTO ab_tests (id, name, model_a, model_b, share_b, routed, created_at) VALUES ($1, $2, $3, $4, $5, 0, $6)";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(&id)
            .bind(&t.name)
            .bind(&t.model_a)
            .bind(&t.model_b)
            .bind(t.share_b)
            .bind(at)
            .execute(p)
            .await
            .map(drop))
        .map_err(|e| match StorageError::from(e) {
            StorageError::Conflict(_) => {
                StorageError::Conflict(format!("an A/B test named {:?} already exists", t.name))
            }
            e => e,
        })?;
        Ok(AbTest {
            id,
            name: t.name,
            model_a: t.model_a,
            model_b: t.model_b,
            share_b: t.share_b,
            routed: 0,
            created_at: at,
        })
    }

    pub async fn list_ab_tests(&self) -> Result<Vec<AbTest>> {
        let sql = concat!(
            "SELECT ",
            columns!(),
            " FROM ab_tests ORDER BY created_at, id"
        );
        on_pool!(self, |p| sqlx::query(sql)
            .fetch_all(p)
            .await?
            .iter()
            .map(row)
            .collect())
    }

    pub async fn get_ab_test(&self, id: &str) -> Result<AbTest> {
        let sql = concat!("SELECT ", columns!(), " FROM ab_tests WHERE id = $1");
        let found = on_pool!(self, |p| sqlx::query(sql)
            .bind(id)
            .fetch_optional(p)
            .await?
            .as_ref()
            .map(row)
            .transpose())?;
        found.ok_or_else(|| missing(id))
    }

    /// Deletes a test and its votes; returns it as it was.
    pub async fn delete_ab_test(&self, id: &str) -> Result<AbTest> {
        let t = self.get_ab_test(id).await?;
        // Votes first: the cascade needs SQLite's foreign keys on, and this does not.
        on_pool!(self, |p| sqlx::query(
            "DELETE FROM ab_votes WHERE test_id = $1"
        )
        .bind(id)
        .execute(p)
        .await
        .map(drop))?;
        let n = on_pool!(self, |p| sqlx::query("DELETE FROM ab_tests WHERE id = $1")
            .bind(id)
            .execute(p)
            .await?
            .rows_affected());
        if n == 0 {
            return Err(missing(id));
        }
        Ok(t)
    }

    /// Routes one request: bumps the test's counter and says which arm the request gets.
    pub async fn route_ab(&self, id: &str) -> Result<(AbTest, Variant)> {
        let sql = concat!(
            "UPDATE ab_tests SET routed = routed + 1 WHERE id = $1 RETURNING ",
            columns!(),
            ""
        );
        let found = on_pool!(self, |p| sqlx::query(sql)
            .bind(id)
            .fetch_optional(p)
            .await?
            .as_ref()
            .map(row)
            .transpose())?;
        let t = found.ok_or_else(|| missing(id))?;
        let v = Variant::for_request(t.routed, t.share_b);
        Ok((t, v))
    }

    pub async fn add_ab_vote(&self, v: NewAbVote) -> Result<AbVote> {
        let (id, at) = (new_id("vote"), now());
        let sql = "INSERT INTO ab_votes (id, test_id, variant, request_id, comment, actor, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(&id)
            .bind(&v.test_id)
            .bind(v.variant.as_str())
            .bind(&v.request_id)
            .bind(&v.comment)
            .bind(&v.actor)
            .bind(at)
            .execute(p)
            .await
            .map(drop))
        .map_err(|e| match StorageError::from(e) {
            // The test was deleted between the caller's check and this insert.
            StorageError::Conflict(_) => missing(&v.test_id),
            e => e,
        })?;
        Ok(AbVote {
            id,
            test_id: v.test_id,
            variant: v.variant,
            request_id: v.request_id,
            comment: v.comment,
            actor: v.actor,
            created_at: at,
        })
    }

    /// Votes for (A, B) in a test.
    pub async fn ab_tally(&self, id: &str) -> Result<(i64, i64)> {
        let sql = "SELECT COALESCE(SUM(CASE WHEN variant = 'a' THEN 1 ELSE 0 END), 0) AS a, COALESCE(SUM(CASE WHEN variant = 'b' THEN 1 ELSE 0 END), 0) AS b FROM ab_votes WHERE test_id = $1";
        on_pool!(self, |p| {
            let r = sqlx::query(sql).bind(id).fetch_one(p).await?;
            Ok((r.int("a")?, r.int("b")?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_is_exact_within_one_request() {
        for share in [0, 1, 2500, 3000, 3333, 5000, 9999, WHOLE] {
            let mut b = 0;
            for n in 1..=1000 {
                if Variant::for_request(n, share) == Variant::B {
                    b += 1;
                }
                assert_eq!(b, n * share / WHOLE, "share {share}, n {n}");
            }
        }
    }
}
