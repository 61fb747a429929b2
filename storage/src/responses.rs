//! Stored responses of the Responses API: the response object and the input it answered (as
//! JSON text: the storage does not interpret them), with their owner. Every read and delete
//! names the owner, so another principal's id is exactly as absent as an id never made.
//!
//! The table is bounded per owner: past [`ResponseBound::count`] responses or
//! [`ResponseBound::bytes`] bytes, the owner's oldest go first (the newest one always stays),
//! in the same transaction as the insert.

use crate::{Get, Result, Storage};

/// One stored response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResponse {
    pub id: String,
    pub owner: String,
    /// Unix seconds.
    pub created_at: i64,
    /// The response object (JSON).
    pub response: String,
    /// The input items it answered (a JSON array).
    pub input: String,
}

/// How much one owner may keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseBound {
    pub count: i64,
    pub bytes: i64,
}

/// Microseconds since the Unix epoch: the order responses are dropped in (seconds tie).
fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl Storage {
    /// Stores (or replaces) a response, then drops the owner's oldest past `bound`.
    pub async fn put_response(&self, r: &StoredResponse, bound: ResponseBound) -> Result<()> {
        let bytes = (r.response.len() + r.input.len()) as i64;
        let insert = "INSERT INTO responses (id, owner, created_at, stored_at, bytes, response, input) \
            VALUES ($1, $2, $3, $4, $5, $6, $7) \
            ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, created_at = excluded.created_at, \
            stored_at = excluded.stored_at, bytes = excluded.bytes, response = excluded.response, \
            input = excluded.input";
        // Running totals from the newest back; everything past the bound goes, except the
        // newest row (a single response larger than the byte bound is still kept, alone).
        let trim = "DELETE FROM responses WHERE id IN (SELECT id FROM (\
            SELECT id, ROW_NUMBER() OVER (ORDER BY stored_at DESC, id DESC) AS n, \
            CAST(SUM(bytes) OVER (ORDER BY stored_at DESC, id DESC) AS BIGINT) AS total \
            FROM responses WHERE owner = $1) ranked \
            WHERE n > 1 AND (n > $2 OR total > $3))";
        on_pool!(self, |p| {
            let mut tx = p.begin().await?;
            sqlx::query(insert)
                .bind(&r.id)
                .bind(&r.owner)
                .bind(r.created_at)
                .bind(now_micros())
                .bind(bytes)
                .bind(&r.response)
                .bind(&r.input)
                .execute(&mut *tx)
                .await?;
            sqlx::query(trim)
                .bind(&r.owner)
                .bind(bound.count)
                .bind(bound.bytes)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    /// The response `id` when `owner` stored it; None otherwise (missing or someone else's).
    pub async fn get_response(&self, id: &str, owner: &str) -> Result<Option<StoredResponse>> {
        let sql = "SELECT id, owner, created_at, response, input FROM responses \
            WHERE id = $1 AND owner = $2";
        on_pool!(self, |p| {
            let row = sqlx::query(sql)
                .bind(id)
                .bind(owner)
                .fetch_optional(p)
                .await?;
            row.map(|r| {
                Ok(StoredResponse {
                    id: r.text("id")?,
                    owner: r.text("owner")?,
                    created_at: r.int("created_at")?,
                    response: r.text("response")?,
                    input: r.text("input")?,
                })
            })
            .transpose()
        })
    }

    /// Deletes the response `id` when `owner` stored it; false otherwise.
    pub async fn delete_response(&self, id: &str, owner: &str) -> Result<bool> {
        let sql = "DELETE FROM responses WHERE id = $1 AND owner = $2";
        on_pool!(self, |p| {
            let r = sqlx::query(sql).bind(id).bind(owner).execute(p).await?;
            Ok(r.rows_affected() == 1)
        })
    }

    /// How many responses `owner` has stored, and their bytes.
    pub async fn response_usage(&self, owner: &str) -> Result<(i64, i64)> {
        let sql = "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS b \
            FROM responses WHERE owner = $1";
        on_pool!(self, |p| {
            let r = sqlx::query(sql).bind(owner).fetch_one(p).await?;
            Ok((r.int("n")?, r.int("b")?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(id: &str, owner: &str, text: &str) -> StoredResponse {
        StoredResponse {
            id: id.into(),
            owner: owner.into(),
            created_at: 1,
            response: format!("{{\"id\":\"{id}\",\"t\":\"{text}\"}}"),
            input: "[]".into(),
        }
    }

    /// A fresh database in a folder of its own under the system's temp dir.
    struct Temp(std::path::PathBuf);
    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    async fn open() -> (Temp, Storage) {
        let dir = std::env::temp_dir().join(crate::new_id("weft-responses-test"));
        let s = Storage::sqlite(&dir.join("w.db")).await.unwrap();
        (Temp(dir), s)
    }

    #[tokio::test]
    async fn only_the_owner_reads_or_deletes() {
        let (_d, s) = open().await;
        let big = ResponseBound {
            count: 100,
            bytes: 1 << 20,
        };
        s.put_response(&resp("r1", "a", "x"), big).await.unwrap();
        assert!(s.get_response("r1", "b").await.unwrap().is_none());
        assert!(!s.delete_response("r1", "b").await.unwrap());
        assert_eq!(
            s.get_response("r1", "a").await.unwrap().unwrap(),
            resp("r1", "a", "x")
        );
        assert!(s.delete_response("r1", "a").await.unwrap());
        assert!(s.get_response("r1", "a").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_oldest_go_past_the_bound_per_owner() {
        let (_d, s) = open().await;
        let two = ResponseBound {
            count: 2,
            bytes: 1 << 20,
        };
        for id in ["a1", "a2", "a3"] {
            s.put_response(&resp(id, "a", "x"), two).await.unwrap();
        }
        s.put_response(&resp("b1", "b", "x"), two).await.unwrap();
        assert!(s.get_response("a1", "a").await.unwrap().is_none());
        assert!(s.get_response("a2", "a").await.unwrap().is_some());
        assert!(s.get_response("a3", "a").await.unwrap().is_some());
        assert!(s.get_response("b1", "b").await.unwrap().is_some());

        let one = (resp("x1", "c", "x").response.len() + 2) as i64;
        let bytes = ResponseBound {
            count: 100,
            bytes: 2 * one + one / 2,
        };
        for id in ["x1", "x2", "x3"] {
            s.put_response(&resp(id, "c", "x"), bytes).await.unwrap();
        }
        assert_eq!(s.response_usage("c").await.unwrap(), (2, 2 * one));
        assert!(s.get_response("x1", "c").await.unwrap().is_none());
        // One response over the whole bound is kept, alone.
        let huge = resp("x4", "c", &"w".repeat(4 * one as usize));
        s.put_response(&huge, bytes).await.unwrap();
        assert_eq!(s.response_usage("c").await.unwrap().0, 1);
        assert!(s.get_response("x4", "c").await.unwrap().is_some());
    }
}
