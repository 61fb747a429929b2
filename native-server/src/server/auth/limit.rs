//! Requests per minute per key: a token bucket per key (the algorithm and its arithmetic are
//! in `weft_storage::rate_limits`).
//!
//! Where the buckets live depends on the database:
//! - **Postgres**: in the database (`rate_limits`), one atomic statement per request, so every
//!   replica on it counts against the same bucket and a key gets its limit once in all;
//! - **SQLite**: in this process's memory, with the same arithmetic. One server owns a SQLite
//!   file, so memory is as exact, and a limited request does not wait for a write on
//!   SQLite's single writer; the buckets start full after a restart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use weft_storage::rate_limits::{self, Verdict};
use weft_storage::{Storage, StorageError};

/// Whether limits are counted in the database (shared by replicas) rather than in memory.
pub fn shared(storage: &Storage) -> bool {
    storage.backend() == "postgres"
}

/// Buckets in this process's memory: when each key's is full again, in microseconds since
/// `origin` (a monotonic clock).
pub struct Local {
    full_at: Mutex<HashMap<String, i64>>,
    origin: Instant,
}

impl Default for Local {
    fn default() -> Local {
        Local {
            full_at: Mutex::default(),
            origin: Instant::now(),
        }
    }
}

impl Local {
    pub fn now(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_micros()).unwrap_or(i64::MAX)
    }

    /// Adds `cost` to `key`'s bucket at `now` if a request needing `need` fits it (nothing
    /// is added when refused).
    pub fn take(&self, key: &str, need: i64, cost: i64, now: i64) -> Verdict {
        let mut all = self.full_at.lock().unwrap_or_else(|p| p.into_inner());
        let full_at = all.get(key).copied().unwrap_or(now);
        rate_limits::fits(rate_limits::backlog(full_at, now), need)?;
        all.insert(key.to_string(), rate_limits::after(full_at, now, cost));
        Ok(())
    }

    /// Adds `cost` to `key`'s bucket at `now` whatever it holds (tokens used are owed).
    pub fn spend(&self, key: &str, cost: i64, now: i64) {
        let mut all = self.full_at.lock().unwrap_or_else(|p| p.into_inner());
        let full_at = all.get(key).copied().unwrap_or(now);
        all.insert(key.to_string(), rate_limits::after(full_at, now, cost));
    }

    /// Whether a request needing `need` fits `key`'s bucket at `now`, taking nothing.
    pub fn check(&self, key: &str, need: i64, now: i64) -> Verdict {
        let all = self.full_at.lock().unwrap_or_else(|p| p.into_inner());
        let full_at = all.get(key).copied().unwrap_or(now);
        rate_limits::fits(rate_limits::backlog(full_at, now), need)
    }
}

/// The requests-per-minute buckets.
#[derive(Default)]
pub struct Limiter {
    local: Local,
}

impl Limiter {
    /// Takes one request from `key`'s bucket of `rpm` per minute: `Ok(Ok(()))`, or
    /// `Ok(Err(seconds))` until one is available.
    pub async fn take(
        &self,
        storage: &Storage,
        key: &str,
        rpm: u32,
    ) -> Result<Verdict, StorageError> {
        if shared(storage) {
            return storage.take_request(key, rpm, None).await;
        }
        let cost = rate_limits::cost_us(rpm, 1);
        Ok(self.local.take(key, cost, cost, self.local.now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_empties_then_says_when() {
        let l = Local::default();
        let cost = rate_limits::cost_us(3, 1);
        for _ in 0..3 {
            assert!(l.take("k", cost, cost, 0).is_ok());
        }
        assert_eq!(l.take("k", cost, cost, 0), Err(20));
        // Refused requests take nothing: 20 s later one fits again.
        assert_eq!(l.take("k", cost, cost, 20_000_000), Ok(()));
        // Another key has its own bucket.
        assert!(l.take("other", cost, cost, 0).is_ok());
    }
}
