//! Requests the auth layer turned away, counted instead of written to the audit log (an
//! unauthenticated caller must not be able to grow the database): `weft:auth_denied_total`
//! with a `status` label (401 no or bad key, 403 role too low).

use std::sync::atomic::{AtomicU64, Ordering};

static UNAUTHORIZED: AtomicU64 = AtomicU64::new(0);
static FORBIDDEN: AtomicU64 = AtomicU64::new(0);

/// Counts a denied request by its status (others are ignored).
pub fn count(status: u16) {
    match status {
        401 => UNAUTHORIZED.fetch_add(1, Ordering::Relaxed),
        403 => FORBIDDEN.fetch_add(1, Ordering::Relaxed),
        _ => 0,
    };
}

/// The counter in Prometheus text.
pub fn render(out: &mut String) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "# HELP weft:auth_denied_total Requests refused by authentication (401) or \
         authorization (403).\n# TYPE weft:auth_denied_total counter\n\
         weft:auth_denied_total{{status=\"401\"}} {}\n\
         weft:auth_denied_total{{status=\"403\"}} {}",
        UNAUTHORIZED.load(Ordering::Relaxed),
        FORBIDDEN.load(Ordering::Relaxed)
    );
}
