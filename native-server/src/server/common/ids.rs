//! Identifiers for responses, completions and tool calls.

use std::sync::atomic::{AtomicU64, Ordering};

/// A random-looking id (time and a counter; ids only need to be unique per server).
pub fn unique() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!("{:x}{:04x}", t, N.fetch_add(1, Ordering::Relaxed) & 0xffff)
}
