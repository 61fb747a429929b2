//! Requests per minute per key: a token bucket per key, in this process's memory. Each
//! replica counts on its own, so N replicas behind a balancer allow up to N times the limit;
//! a shared limit would need the database or a cache on every request.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Buckets by key id.
#[derive(Default)]
pub struct Limiter {
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl Limiter {
    /// Takes one request from `key`'s bucket of `rpm` per minute: `Ok`, or `Err(seconds)`
    /// until one is available.
    pub fn take(&self, key: &str, rpm: u32) -> Result<(), u32> {
        let rpm = f64::from(rpm.max(1));
        let per_sec = rpm / 60.0;
        let now = Instant::now();
        let mut all = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let b = all.entry(key.to_string()).or_insert(Bucket {
            tokens: rpm,
            at: now,
        });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * per_sec).min(rpm);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - b.tokens) / per_sec).ceil() as u32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_empties_then_says_when() {
        let l = Limiter::default();
        for _ in 0..3 {
            assert!(l.take("k", 3).is_ok());
        }
        let wait = l.take("k", 3).unwrap_err();
        assert!((1..=20).contains(&wait), "{wait}");
        // Another key has its own bucket.
        assert!(l.take("other", 3).is_ok());
    }
}
