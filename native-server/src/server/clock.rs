//! Times as the APIs show them, and how often replicas sharing a database look for each
//! other's changes.

use std::time::{Duration, SystemTime};

/// How often a replica looks for settings and model names changed by another.
pub const POLL: Duration = Duration::from_secs(2);

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    unix(SystemTime::now())
}

/// Seconds since the Unix epoch of a time.
pub fn unix(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// RFC 3339 UTC time.
pub fn rfc3339(t: SystemTime) -> String {
    weft_core::chat::strftime("%Y-%m-%dT%H:%M:%SZ", unix(t) as i64).unwrap_or_default()
}
