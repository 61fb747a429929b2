//! Which `Host` names the server answers: loopback names always, the address it is bound to
//! when that is one address (not 0.0.0.0 / ::), and the names given with `--allowed-host`.
//!
//! Why: a page on `http://attacker.example` whose name the attacker later points at
//! 127.0.0.1 (DNS rebinding) talks to this server as its own origin; the browser still sends
//! `Host: attacker.example`, so refusing unknown names is what stops it.

use std::net::IpAddr;

/// The allowed names, normalised (lower case, no trailing dot, IPv6 without brackets).
#[derive(Clone, Debug, Default)]
pub struct AllowedHosts {
    /// `--allowed-host '*'`: any name.
    any: bool,
    /// (name, port): an entry without a port matches every port.
    names: Vec<(String, Option<u16>)>,
}

impl AllowedHosts {
    /// From the `--allowed-host` values and the listening address.
    pub fn new(given: &[String], bind: Option<IpAddr>) -> Result<AllowedHosts, String> {
        let mut out = AllowedHosts::default();
        for g in given {
            let g = g.trim();
            if g == "*" {
                out.any = true;
                continue;
            }
            let (name, port) = split(g).filter(|(n, _)| valid_name(n)).ok_or_else(|| {
                format!("--allowed-host {g:?}: not a host name, address or NAME:PORT")
            })?;
            out.names.push((name, port));
        }
        if let Some(ip) = bind.filter(|ip| !ip.is_unspecified()) {
            out.names.push((ip.to_string(), None));
        }
        Ok(out)
    }

    /// Whether a `Host` value (`name`, `name:port`, `[v6]:port`) is one this server answers.
    pub fn allows(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let Some((name, port)) = split(host) else {
            return false;
        };
        if is_loopback(&name) {
            return true;
        }
        self.names
            .iter()
            .any(|(n, p)| *n == name && p.is_none_or(|p| Some(p) == port))
    }
}

/// `localhost`, 127.0.0.0/8 and ::1 (also as an IPv4-mapped IPv6 address).
fn is_loopback(name: &str) -> bool {
    name == "localhost"
        || name
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// Letters, digits, `-`, `.`, and `:` inside IPv6 addresses.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && (name.parse::<IpAddr>().is_ok()
            || name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'))
}

/// A `Host` value as (normalised name, port). None when it is malformed (an empty name, a
/// port that is not a number, an unclosed `[`).
pub fn split(host: &str) -> Option<(String, Option<u16>)> {
    let host = host.trim();
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (v6, port)
    } else if host.matches(':').count() > 1 {
        // A bare IPv6 address (never valid in a Host header, but harmless to read).
        (host, None)
    } else {
        match host.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (host, None),
        }
    };
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    (!name.is_empty()).then_some((name, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(given: &[&str], bind: Option<&str>) -> AllowedHosts {
        let given: Vec<String> = given.iter().map(|s| s.to_string()).collect();
        AllowedHosts::new(&given, bind.map(|b| b.parse().unwrap())).unwrap()
    }

    #[test]
    fn loopback_names_pass_with_any_port() {
        let h = hosts(&[], Some("127.0.0.1"));
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.:1",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:9",
            "[::1]",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
    }

    #[test]
    fn other_names_are_refused() {
        let h = hosts(&[], Some("127.0.0.1"));
        for bad in [
            "attacker.example",
            "attacker.example:8080",
            "localhost.attacker.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:8080",
            "[::2]:80",
            "",
            "localhost:port",
            "[::1",
            "2130706433",
        ] {
            assert!(!h.allows(bad), "{bad}");
        }
    }

    #[test]
    fn allowed_hosts_and_the_bound_address_pass() {
        let h = hosts(&["weft.lan", "box.example:9000"], Some("192.168.1.5"));
        assert!(h.allows("weft.lan:8080"));
        assert!(h.allows("WEFT.LAN"));
        assert!(h.allows("box.example:9000"));
        assert!(!h.allows("box.example:9001"));
        assert!(h.allows("192.168.1.5:8080"));
        assert!(!h.allows("192.168.1.6:8080"));
        // A wildcard bind names no address.
        let h = hosts(&[], Some("0.0.0.0"));
        assert!(!h.allows("0.0.0.0:8080"));
        assert!(hosts(&["*"], None).allows("anything.example"));
    }

    #[test]
    fn malformed_flag_values_are_errors() {
        for bad in ["", "a b", "http://x", "x:y", "[::1"] {
            assert!(
                AllowedHosts::new(&[bad.to_string()], None).is_err(),
                "{bad}"
            );
        }
    }
}
