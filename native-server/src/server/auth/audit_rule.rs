//! Which requests leave an audit row, and what of the request the row keeps.
//!
//! Only admin actions that were let through are recorded: a refused request (no key, a bad
//! key, a role too low) is counted as a metric ([`crate::server::auth::denials`]) instead, so
//! an anonymous caller cannot grow the audit table. The route is cut to [`ROUTE_MAX`] bytes,
//! so a row stays small whatever path was asked for.

/// Longest route an audit row keeps, in bytes (longer ones end with `…`).
pub const ROUTE_MAX: usize = 256;

/// Whether to write an audit row for a request the policy audits (`audited`) whose
/// authorization `allowed` it (or not) and that ended with `status`; a refusal is counted.
pub fn decide(audited: bool, allowed: bool, status: u16) -> bool {
    if !allowed {
        crate::server::auth::denials::count(status);
    }
    audited && allowed
}

/// The route as an audit row keeps it.
pub fn route(path: &str) -> String {
    if path.len() <= ROUTE_MAX {
        return path.to_string();
    }
    let mut end = ROUTE_MAX;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &path[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_not_rows_and_routes_are_short() {
        assert!(decide(true, true, 201));
        assert!(!decide(true, false, 401));
        assert!(!decide(true, false, 403));
        assert!(!decide(false, true, 200));
        let long = format!("/api/v1/{}", "é".repeat(4000));
        let r = route(&long);
        assert!(r.len() <= ROUTE_MAX + '…'.len_utf8(), "{}", r.len());
        assert!(r.ends_with('…'));
        assert_eq!(route("/api/v1/keys"), "/api/v1/keys");
    }
}
