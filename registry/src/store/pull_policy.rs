//! Where a pull may go. A pull fetches a URL someone else chose (any key allowed to pull, or,
//! in open mode, whoever reaches the server), so by default it may not reach this machine or
//! its network: every address a host name resolves to is checked when the connection is made
//! (not before, so a name that changes its answer cannot slip past), and private, loopback,
//! link-local and other non-public addresses are refused unless the operator allows them
//! (`--pull-allow-private`, or the host in `--pull-allow-host`). Redirects stay on the same
//! scheme, host and port, except to the hosts `--pull-redirect-host` names (by default the
//! Hugging Face hub's own, whose downloads redirect to its CDN over https).
//!
//! Every connection failure, and every refusal by this policy, reads the same
//! ([`unreachable`]), so a pull cannot be used to tell an open port from a closed one; the
//! cause goes to the server's log. URLs are stored, logged and shown only through [`redact`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// Hosts (with their subdomains) a redirect may reach by default: the Hugging Face hub sends
/// downloads to its CDN.
pub const DEFAULT_REDIRECT_HOSTS: &[&str] = &["huggingface.co", "hf.co"];

/// Where pulls may connect and redirect.
#[derive(Clone, Debug)]
pub struct PullPolicy {
    /// Private, loopback and link-local destinations allowed (`--pull-allow-private`).
    pub allow_private: bool,
    /// Hosts allowed whatever they resolve to (`--pull-allow-host`; exact names or IPs).
    pub allow_hosts: Vec<String>,
    /// Hosts (and their subdomains) a redirect may go to over https besides the same
    /// scheme, host and port (`--pull-redirect-host`; `*` for any).
    pub redirect_hosts: Vec<String>,
}

impl Default for PullPolicy {
    fn default() -> Self {
        PullPolicy::strict()
    }
}

impl PullPolicy {
    /// Public destinations only; redirects to the same origin or the hub's CDN.
    pub fn strict() -> Self {
        PullPolicy {
            allow_private: false,
            allow_hosts: Vec::new(),
            redirect_hosts: DEFAULT_REDIRECT_HOSTS
                .iter()
                .map(|h| h.to_string())
                .collect(),
        }
    }

    /// Anything the user at the terminal asks for (`weft pull`: nobody else picks its URL).
    pub fn trusting() -> Self {
        PullPolicy {
            allow_private: true,
            allow_hosts: Vec::new(),
            redirect_hosts: vec!["*".into()],
        }
    }

    /// The strict policy, but private destinations allowed (tests against a loopback hub).
    pub fn allowing_private() -> Self {
        PullPolicy {
            allow_private: true,
            ..PullPolicy::strict()
        }
    }

    fn host_listed(&self, host: &str) -> bool {
        let host = bare_host(host);
        self.allow_hosts
            .iter()
            .any(|h| bare_host(h).eq_ignore_ascii_case(host))
    }

    /// Whether connecting to `ip` for `host` is allowed.
    pub fn may_connect(&self, host: &str, ip: IpAddr) -> bool {
        self.allow_private || self.host_listed(host) || !is_private(ip)
    }

    /// Whether a redirect from `from` to `to` may be followed.
    pub fn may_redirect(&self, from: &str, to: &str) -> bool {
        let (Some(a), Some(b)) = (origin(from), origin(to)) else {
            return false;
        };
        if a == b {
            return true;
        }
        let (scheme, host, _) = &b;
        scheme == "https"
            && self.redirect_hosts.iter().any(|h| {
                h == "*" || host.eq_ignore_ascii_case(h) || {
                    let h = h.to_ascii_lowercase();
                    host.to_ascii_lowercase().ends_with(&format!(".{h}"))
                }
            })
    }

    /// An HTTP agent whose every connection obeys this policy.
    pub(super) fn agent(&self, config: ureq::config::Config) -> ureq::Agent {
        ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::default(),
            Guarded {
                policy: Arc::new(self.clone()),
                inner: DefaultResolver::default(),
            },
        )
    }
}

/// A host without IPv6 brackets.
fn bare_host(h: &str) -> &str {
    h.trim_start_matches('[').trim_end_matches(']')
}

/// Scheme, host (lowercase) and port of a URL.
fn origin(url: &str) -> Option<(String, String, u16)> {
    let u: Uri = url.parse().ok()?;
    let scheme = u.scheme_str()?.to_ascii_lowercase();
    let host = bare_host(u.host()?).to_ascii_lowercase();
    let port = u
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    Some((scheme, host, port))
}

/// The one message for a destination that cannot be reached or may not be: the same for a
/// closed port, an open port that does not speak HTTP, a timeout, an unknown host and a
/// refused address.
pub fn unreachable(url: &str) -> String {
    format!(
        "cannot pull from {}: the server could not be reached, did not answer over HTTP, or is \
         not allowed (private, loopback and link-local addresses need --pull-allow-private or \
         --pull-allow-host)",
        redact(url)
    )
}

/// Whether an address is not a public unicast one: loopback, private, link-local, shared
/// (carrier-grade NAT), unspecified, multicast, broadcast or reserved, in IPv4 or IPv6
/// (addresses embedding an IPv4 one are judged by it).
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => private_v6(v6),
    }
}

fn private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0 // "this network", 0.0.0.0
        || a == 10
        || (a == 100 && (64..128).contains(&b)) // shared address space
        || a == 127
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 224 // multicast, reserved, broadcast
}

fn private_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return private_v4(v4);
    }
    // ::a.b.c.d (IPv4-compatible; :: and ::1 among them).
    if s[..6] == [0; 6] {
        return ip.is_unspecified() || ip.is_loopback() || private_v4(embedded(s[6], s[7]));
    }
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) reach the IPv4 address they embed.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return private_v4(embedded(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return private_v4(embedded(s[1], s[2]));
    }
    (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated) fec0::/10
        || (s[0] & 0xff00) == 0xff00 // multicast
}

fn embedded(hi: u16, lo: u16) -> Ipv4Addr {
    Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8)
}

/// Names of query parameters whose values are credentials.
fn secret_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "token",
        "key",
        "secret",
        "password",
        "passwd",
        "pwd",
        "auth",
        "signature",
        "sig",
        "credential",
        "session",
        "code",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// A URL without its credentials: no `user:password@`, and the values of query parameters
/// that carry secrets (`token`, `access_token`, `api_key`, `X-Amz-Signature`, ...) replaced.
pub fn redact(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let rest = &url[start..];
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(auth_end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (path, fragment) = match tail.find('#') {
        Some(i) => tail.split_at(i),
        None => (tail, ""),
    };
    let tail = match path.split_once('?') {
        Some((p, q)) => {
            let q: Vec<String> = q
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) if secret_param(k) => format!("{k}=REDACTED"),
                    _ => pair.to_string(),
                })
                .collect();
            format!("{p}?{}{fragment}", q.join("&"))
        }
        None => format!("{path}{fragment}"),
    };
    format!("{}{host}{tail}", &url[..start])
}

/// The error a refused address gives inside the HTTP client (mapped to [`unreachable`]).
const REFUSED: &str = "destination refused by the pull policy";

/// Resolves as usual, then refuses the whole answer when any address is not allowed (a name
/// that answers with one public and one private address is refused, not narrowed).
#[derive(Debug)]
struct Guarded {
    policy: Arc<PullPolicy>,
    inner: DefaultResolver,
}

impl Resolver for Guarded {
    fn resolve(
        &self,
        uri: &Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addrs = self.inner.resolve(uri, config, timeout)?;
        let host = uri.host().unwrap_or("");
        // A proxy the operator configured is theirs to choose.
        let is_proxy = config
            .proxy()
            .is_some_and(|p| bare_host(p.host()).eq_ignore_ascii_case(bare_host(host)));
        if !is_proxy {
            if let Some(a) = addrs
                .iter()
                .find(|a| !self.policy.may_connect(host, a.ip()))
            {
                tracing::info!(host, address = %a.ip(), "pull refused: not a public address");
                return Err(ureq::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    REFUSED,
                )));
            }
        }
        Ok(addrs)
    }
}

/// Refuses a URL whose host is an address literal the policy does not allow (a check before
/// any connection, which also holds when a proxy resolves names instead of this machine).
pub(super) fn check_literal(policy: &PullPolicy, url: &str) -> Result<(), ()> {
    let Ok(u) = url.parse::<Uri>() else {
        return Ok(());
    };
    let Some(host) = u.host() else {
        return Ok(());
    };
    let ip = match bare_host(host).parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) if bare_host(host).eq_ignore_ascii_case("localhost") => {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        }
        Err(_) => return Ok(()),
    };
    if policy.may_connect(host, ip) {
        Ok(())
    } else {
        tracing::info!(host, "pull refused: not a public address");
        Err(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private(s: &str) -> bool {
        is_private(s.parse().unwrap())
    }

    #[test]
    fn classifies_addresses_without_connecting() {
        for a in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.5.6.7",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "192.0.0.8",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
        ] {
            assert!(private(a), "{a} should be private");
        }
        for a in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.0.1",
            "172.32.0.1",
            "169.253.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::",
        ] {
            assert!(!private(a), "{a} should be public");
        }
    }

    #[test]
    fn allow_lists_and_flags() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let strict = PullPolicy::strict();
        assert!(!strict.may_connect("127.0.0.1", ip));
        assert!(PullPolicy::allowing_private().may_connect("127.0.0.1", ip));
        let listed = PullPolicy {
            allow_hosts: vec!["mirror.lan".into(), "[::1]".into()],
            ..PullPolicy::strict()
        };
        assert!(listed.may_connect("MIRROR.lan", ip));
        assert!(listed.may_connect("[::1]", "::1".parse().unwrap()));
        assert!(!listed.may_connect("other.lan", ip));
        assert!(check_literal(&strict, "http://localhost:1/x").is_err());
        assert!(check_literal(&strict, "http://[::ffff:7f00:1]:1/x").is_err());
        assert!(check_literal(&strict, "http://8.8.8.8/x").is_ok());
        assert!(check_literal(&strict, "https://example.com/x").is_ok());
    }

    #[test]
    fn redirects_stay_on_their_origin() {
        let p = PullPolicy::strict();
        assert!(p.may_redirect("http://h:1/a", "http://h:1/b"));
        assert!(p.may_redirect("https://h/a", "https://H:443/b"));
        assert!(!p.may_redirect("http://h:1/a", "http://h:2/a"));
        assert!(!p.may_redirect("http://h:1/a", "https://h:1/a"));
        assert!(!p.may_redirect("https://h/a", "https://other/a"));
        assert!(p.may_redirect(
            "https://huggingface.co/a",
            "https://cdn-lfs.huggingface.co/b"
        ));
        assert!(p.may_redirect(
            "https://huggingface.co/a",
            "https://cas-bridge.xethub.hf.co/b"
        ));
        assert!(!p.may_redirect("https://huggingface.co/a", "http://cdn.huggingface.co/b"));
        assert!(!p.may_redirect("https://huggingface.co/a", "https://evilhf.co/b"));
        assert!(PullPolicy::trusting().may_redirect("http://h/a", "https://x:9/b"));
    }

    #[test]
    fn credentials_never_survive_redaction() {
        assert_eq!(
            redact("http://user:hunter2@h:8/m.gguf"),
            "http://h:8/m.gguf"
        );
        assert_eq!(
            redact("https://a:b@c@h/x?token=s3&name=m&X-Amz-Signature=abc#f"),
            "https://h/x?token=REDACTED&name=m&X-Amz-Signature=REDACTED#f"
        );
        assert_eq!(redact("hf.co/o/r:q4"), "hf.co/o/r:q4");
        assert_eq!(
            redact("http://h/p?api_key=1"),
            "http://h/p?api_key=REDACTED"
        );
        assert!(!unreachable("http://u:pw@h/").contains("pw"));
    }
}
