//! Token accounting: per-key tokens per minute and per-tenant token quotas.
//!
//! A generation's tokens (prompt + completion) are counted when it finishes, before its last
//! event reaches the handler, so a request sent after a response ended always sees them:
//!
//! - **tokens per minute** (per key): a bucket of `tpm` tokens refilled at `tpm / 60` per
//!   second. A request is let in while the bucket holds anything; its tokens are then taken
//!   out, which may leave the bucket in debt, and the wait a refused request is told
//!   (`Retry-After`) is how long the refill takes to clear the debt. Like the
//!   requests-per-minute limit ([`super::limit`]), the bucket is in the database on Postgres
//!   (shared by replicas; the sequence's last event waits for the write) and in this
//!   process's memory on SQLite; the arithmetic is `weft_storage::rate_limits`.
//! - **tenant quotas**: usage is added to the tenant's row in the database (shared by
//!   replicas), and the sequence's last event is held back until that write has landed.
//!   The database is then the only count, read by every check: an earlier design also kept
//!   the not-yet-written tokens here and added them to what the database said, but a check
//!   could read the row before the write and the in-memory count after it was settled, and
//!   so miss the tokens altogether (a request let in after another was refused).

use std::sync::Arc;

use weft_storage::rate_limits::{self, Verdict, ANY_US};
use weft_storage::{Storage, StorageError};

use super::limit::{shared, Local};

/// The counters of one server process.
#[derive(Default)]
pub struct Usage {
    /// Tokens-per-minute buckets by key id, when they are kept in memory (SQLite).
    local: Local,
}

impl Usage {
    /// Whether `key` may start a request under its tokens-per-minute limit: `Ok(Err(seconds))`
    /// until its bucket holds a token again.
    pub async fn check_tpm(&self, storage: &Storage, key: &str) -> Result<Verdict, StorageError> {
        if shared(storage) {
            return storage.check_tokens(key, None).await;
        }
        Ok(self.local.check(key, ANY_US, self.local.now()))
    }

    /// Takes `tokens` a request used out of `key`'s in-memory bucket.
    fn spend_local(&self, key: &str, tpm: u32, tokens: u64) {
        let cost = rate_limits::cost_us(tpm, tokens);
        self.local.spend(key, cost, self.local.now());
    }
}

/// Who a generation's tokens are counted against (made when it starts, on the request's task,
/// and called from the scheduler's thread when it ends).
pub struct Meter {
    pub usage: Arc<Usage>,
    pub storage: Storage,
    pub runtime: tokio::runtime::Handle,
    /// The key and its tokens-per-minute limit.
    pub key: Option<(String, u32)>,
    pub tenant: Option<String>,
}

impl Meter {
    /// Counts a finished generation's tokens, then calls `then` (which passes the sequence's
    /// last event on): at once when only memory changes, after the database writes when the
    /// key's bucket is shared (Postgres) or a tenant's usage changes. `then` runs even when a
    /// write fails (logged), so a database error never leaves a response hanging.
    pub fn record(&self, tokens: u64, then: impl FnOnce() + Send + 'static) {
        let mut key = self.key.clone().filter(|_| tokens > 0);
        if !shared(&self.storage) {
            if let Some((k, tpm)) = key.take() {
                self.usage.spend_local(&k, tpm, tokens);
            }
        }
        let tenant = self.tenant.clone().filter(|_| tokens > 0);
        if key.is_none() && tenant.is_none() {
            return then();
        }
        let n = i64::try_from(tokens).unwrap_or(i64::MAX);
        let storage = self.storage.clone();
        self.runtime.spawn(async move {
            if let Some((k, tpm)) = key {
                if let Err(e) = storage.spend_tokens(&k, tpm, tokens, None).await {
                    tracing::error!(error = %e, key = %k, "recording a key's tokens per minute");
                }
            }
            if let Some(t) = tenant {
                if let Err(e) = storage.add_tenant_tokens(&t, n).await {
                    tracing::error!(error = %e, tenant = %t, "recording a tenant's token use");
                }
            }
            then();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_in_debt_refuses_until_the_refill_clears_it() {
        let l = Local::default();
        assert!(l.check("k", ANY_US, 0).is_ok());
        // 600 per minute is 10 a second: 650 used leaves a debt of 50, 5 s.
        l.spend("k", rate_limits::cost_us(600, 650), 0);
        assert_eq!(l.check("k", ANY_US, 0), Err(6));
        assert_eq!(l.check("k", ANY_US, 5_000_001), Ok(()));
        // Another key has its own bucket.
        assert!(l.check("other", ANY_US, 0).is_ok());
    }
}
