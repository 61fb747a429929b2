//! Token accounting: per-key tokens per minute and per-tenant token quotas.
//!
//! A generation's tokens (prompt + completion) are counted when it finishes, before its last
//! event reaches the handler, so a request sent after a response ended always sees them:
//!
//! - **tokens per minute** (per key): a bucket of `tpm` tokens refilled at `tpm / 60` per
//!   second. A request is let in while the bucket holds anything; its tokens are then taken
//!   out, which may leave the bucket in debt, and the wait a refused request is told
//!   (`Retry-After`) is how long the refill takes to clear the debt. In this process's
//!   memory, like the requests-per-minute limit: each replica counts on its own.
//! - **tenant quotas**: usage is added to the tenant's row in the database (shared by
//!   replicas), and the sequence's last event is held back until that write has landed.
//!   The database is then the only count, read by every check: an earlier design also kept
//!   the not-yet-written tokens here and added them to what the database said, but a check
//!   could read the row before the write and the in-memory count after it was settled, and
//!   so miss the tokens altogether (a request let in after another was refused).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use weft_storage::Storage;

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Refills for the time since the last look.
    fn refill(&mut self, tpm: f64, now: Instant) {
        let per_sec = tpm / 60.0;
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * per_sec).min(tpm);
        self.at = now;
    }
}

/// The counters of one server process.
#[derive(Default)]
pub struct Usage {
    /// Tokens-per-minute buckets by key id.
    buckets: Mutex<HashMap<String, Bucket>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Usage {
    /// Whether `key` may start a request under `tpm`: `Err(seconds)` until its bucket holds
    /// a token again.
    pub fn check_tpm(&self, key: &str, tpm: u32) -> Result<(), u32> {
        let tpm = f64::from(tpm.max(1));
        let now = Instant::now();
        let mut all = lock(&self.buckets);
        let b = all.entry(key.to_string()).or_insert(Bucket {
            tokens: tpm,
            at: now,
        });
        b.refill(tpm, now);
        if b.tokens > 0.0 {
            Ok(())
        } else {
            // The whole seconds after which the debt is cleared and a token more is in.
            Err((-b.tokens / (tpm / 60.0)).floor() as u32 + 1)
        }
    }

    /// Takes `tokens` a request used out of `key`'s bucket.
    pub fn spend_tpm(&self, key: &str, tpm: u32, tokens: u64) {
        let tpm = f64::from(tpm.max(1));
        let now = Instant::now();
        let mut all = lock(&self.buckets);
        let b = all.entry(key.to_string()).or_insert(Bucket {
            tokens: tpm,
            at: now,
        });
        b.refill(tpm, now);
        b.tokens -= tokens as f64;
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
    /// last event on): at once when only the in-memory bucket changes, after the database
    /// write when a tenant's usage does. `then` runs even when the write fails (logged), so a
    /// database error never leaves a response hanging.
    pub fn record(&self, tokens: u64, then: impl FnOnce() + Send + 'static) {
        if let Some((key, tpm)) = &self.key {
            if tokens > 0 {
                self.usage.spend_tpm(key, *tpm, tokens);
            }
        }
        let Some(t) = self.tenant.clone().filter(|_| tokens > 0) else {
            return then();
        };
        let n = i64::try_from(tokens).unwrap_or(i64::MAX);
        let storage = self.storage.clone();
        self.runtime.spawn(async move {
            if let Err(e) = storage.add_tenant_tokens(&t, n).await {
                tracing::error!(error = %e, tenant = %t, "recording a tenant's token use");
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
        let u = Usage::default();
        assert!(u.check_tpm("k", 600).is_ok());
        // 600 per minute is 10 a second: 650 used leaves a debt of 50, about 5 s.
        u.spend_tpm("k", 600, 650);
        let wait = u.check_tpm("k", 600).unwrap_err();
        assert!((5..=6).contains(&wait), "{wait}");
        // Another key has its own bucket.
        assert!(u.check_tpm("other", 600).is_ok());
    }
}
