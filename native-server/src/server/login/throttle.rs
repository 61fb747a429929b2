//! Backoff on failed sign-ins, per user name and per client address: the first few failures
//! are free (people mistype), then each one doubles the wait before the next try is even
//! checked, up to a cap. A try during the wait gets 429 with `Retry-After`, whatever the
//! password, so guessing costs time, not just argon2 work.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// Failures before the first wait, per name and per address.
const FREE_PER_NAME: u32 = 4;
const FREE_PER_ADDRESS: u32 = 20;
/// The first wait, doubled by each further failure, and its cap.
const FIRST: Duration = Duration::from_secs(30);
const CAP: Duration = Duration::from_secs(15 * 60);
/// Entries kept at most (old ones are dropped first), so failures cannot grow memory.
const MAX: usize = 10_000;

#[derive(Clone, Copy, Debug)]
struct Entry {
    failures: u32,
    until: Option<Instant>,
    last: Instant,
}

static FAILURES: LazyLock<Mutex<HashMap<String, Entry>>> = LazyLock::new(Default::default);

/// The keys a try counts against: its user name and its address.
pub fn keys(name: &str, address: Option<std::net::IpAddr>) -> Vec<(String, u32)> {
    let mut k = vec![(format!("name:{}", name.to_lowercase()), FREE_PER_NAME)];
    if let Some(a) = address {
        k.push((format!("addr:{a}"), FREE_PER_ADDRESS));
    }
    k
}

/// Seconds to wait before another try, if any.
pub fn wait(keys: &[(String, u32)]) -> Option<u64> {
    let m = FAILURES.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    keys.iter()
        .filter_map(|(k, _)| m.get(k)?.until)
        .filter(|u| *u > now)
        .map(|u| (u - now).as_secs().max(1))
        .max()
}

/// Counts a failed try.
pub fn fail(keys: &[(String, u32)]) {
    let mut m = FAILURES.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    if m.len() >= MAX {
        let cutoff = now.checked_sub(CAP).unwrap_or(now);
        m.retain(|_, e| e.last > cutoff);
        while m.len() >= MAX {
            let Some(old) = m.iter().min_by_key(|(_, e)| e.last).map(|(k, _)| k.clone()) else {
                break;
            };
            m.remove(&old);
        }
    }
    for (k, free) in keys {
        let e = m.entry(k.clone()).or_insert(Entry {
            failures: 0,
            until: None,
            last: now,
        });
        e.failures += 1;
        e.last = now;
        if e.failures > *free {
            let doublings = (e.failures - *free - 1).min(16);
            e.until = Some(now + (FIRST * (1u32 << doublings)).min(CAP));
        }
    }
}

/// Forgets a name's failures after it signed in (the address keeps its count).
pub fn succeed(keys: &[(String, u32)]) {
    let mut m = FAILURES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, _)) = keys.first() {
        m.remove(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_start_after_the_free_failures_and_grow() {
        let k = keys("Throttle-Test", None);
        for _ in 0..FREE_PER_NAME {
            assert_eq!(wait(&k), None);
            fail(&k);
        }
        assert_eq!(wait(&k), None);
        fail(&k);
        let first = wait(&k).expect("a wait");
        assert!(first > 1 && first <= FIRST.as_secs());
        fail(&k);
        assert!(wait(&k).unwrap() > first);
        // Names are compared without case.
        assert!(wait(&keys("throttle-test", None)).is_some());
        succeed(&k);
        assert_eq!(wait(&k), None);
    }
}
