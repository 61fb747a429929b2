//! JSON Schema `format` values enforced during decoding, each written as an anchored pattern
//! in the [`regex`](super::regex) subset, so it runs on the same automaton as `pattern` (and a
//! string with both gets their intersection).
//!
//! Every grammar here accepts only valid values of its format, and sometimes fewer: decoding
//! may restrict what it produces, never widen it. Where the grammar is narrower than the RFC
//! it says so, and why.

/// The formats enforced, for error messages and docs.
pub(crate) const FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Longest hostname (RFC 1123), also imposed as a `maxLength`.
pub(crate) const HOSTNAME_MAX: u32 = 253;

/// RFC 3339 `full-date`. Months 01–12 and days 01–31 only: no calendar check (so `02-31`
/// passes), which a finite automaton could do but at the cost of a large, opaque pattern.
const DATE: &str = r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])";

/// RFC 3339 `full-time` with an upper-case `Z` or a numeric offset. Narrower than the RFC:
/// no leap second `:60` and at most 6 fraction digits, because Python's `datetime` (pydantic)
/// and most parsers reject those.
const TIME: &str =
    r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)";

/// A DNS label: letters, digits, inner hyphens, at most 63 characters.
const LABEL: &str = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";

const IPV4_OCTET: &str = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)";

/// RFC 3986 `IPv6address`: eight 16-bit groups, `::` once for a run of zero groups, and an
/// IPv4 tail in place of the last two.
fn ipv6() -> String {
    let h16 = "[0-9A-Fa-f]{1,4}";
    let ipv4 = format!(r"{o}(?:\.{o}){{3}}", o = IPV4_OCTET);
    let ls32 = format!("(?:{h16}:{h16}|{ipv4})");
    // `n` groups followed by ":" each.
    let groups = |n: usize| format!("(?:{h16}:){{{n}}}");
    // Up to `n` groups before `::`, the last without its ":".
    let before = |n: usize| {
        if n == 0 {
            String::new()
        } else {
            format!("(?:(?:{h16}:){{0,{}}}{h16})?", n - 1)
        }
    };
    let mut alts = vec![format!("{}{ls32}", groups(6))];
    alts.push(format!("::{}{ls32}", groups(5)));
    for k in 1..=5usize {
        // RFC 3986: [ *(k-1)( h16 ":" ) h16 ] "::" (5-k)( h16 ":" ) ls32
        alts.push(format!("{}::{}{ls32}", before(k), groups(5 - k)));
    }
    alts.push(format!("{}::{h16}", before(6)));
    alts.push(format!("{}::", before(7)));
    format!("(?:{})", alts.join("|"))
}

/// The anchored pattern of `format`, or None when it is not enforced.
pub(crate) fn pattern(format: &str) -> Option<String> {
    let body = match format {
        "date" => DATE.to_string(),
        "time" => TIME.to_string(),
        // Upper-case `T` only (RFC 3339 allows `t`; ISO 8601 and most emitters use `T`).
        "date-time" => format!("{DATE}T{TIME}"),
        // RFC 3339 appendix A `duration`: P followed by date parts [T time parts], or weeks.
        // Counts have at most 6 digits, far beyond a real duration, so parsers do not overflow.
        "duration" => {
            let n = r"\d{1,6}";
            let time = format!("T(?:{n}H(?:{n}M(?:{n}S)?)?|{n}M(?:{n}S)?|{n}S)");
            let date = format!("(?:{n}D|{n}M(?:{n}D)?|{n}Y(?:{n}M(?:{n}D)?)?)");
            format!("P(?:{date}(?:{time})?|{time}|{n}W)")
        }
        // A practical subset of RFC 5321: dot-atom local part, a domain of DNS labels ending
        // in an alphabetic top-level label (what mail validators such as pydantic's require).
        "email" => {
            let atom = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
            format!(r"{atom}(?:\.{atom})*@(?:{LABEL}\.)+[A-Za-z]{{2,63}}")
        }
        // RFC 1123 host name: dot-separated labels (253 characters at most, imposed as a
        // length bound).
        "hostname" => format!(r"{LABEL}(?:\.{LABEL})*"),
        "ipv4" => format!(r"{o}(?:\.{o}){{3}}", o = IPV4_OCTET),
        "ipv6" => ipv6(),
        "uuid" => {
            let h = "[0-9a-fA-F]";
            format!("{h}{{8}}-{h}{{4}}-{h}{{4}}-{h}{{4}}-{h}{{12}}")
        }
        _ => return None,
    };
    Some(format!("^{body}$"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::regex;

    fn check(format: &str, good: &[&str], bad: &[&str]) {
        let a = regex::compile(&pattern(format).unwrap()).unwrap();
        for s in good {
            assert!(a.matches(s), "{format}: {s} should match");
        }
        for s in bad {
            assert!(!a.matches(s), "{format}: {s} should not match");
        }
    }

    #[test]
    fn every_listed_format_compiles_and_others_do_not() {
        for f in FORMATS {
            regex::compile(&pattern(f).unwrap()).unwrap();
        }
        assert!(pattern("iri").is_none());
    }

    #[test]
    fn dates_and_times() {
        check(
            "date-time",
            &[
                "2024-01-31T23:59:59Z",
                "1999-12-01T00:00:00.123+05:30",
                "2024-02-31T10:00:00-08:00",
            ],
            &[
                "2024-13-01T00:00:00Z",
                "2024-01-32T00:00:00Z",
                "2024-01-01T24:00:00Z",
                "2024-01-01 00:00:00Z",
                "2024-01-01T00:00:00",
                "2024-01-01T00:00:60Z",
                "2024-1-01T00:00:00Z",
            ],
        );
        check(
            "date",
            &["2024-01-01", "0001-12-31"],
            &["2024-00-10", "2024-01-00", "24-01-01"],
        );
        check(
            "time",
            &["08:30:00Z", "23:59:59.5-01:00"],
            &["8:30:00Z", "08:30Z", "08:30:00+1:00"],
        );
        check(
            "duration",
            &["P1D", "PT1H30M", "P1Y2M3DT4H5M6S", "P2W", "PT0S"],
            &["P", "PT", "P1H", "1D", "P1DT", "PT1S2M"],
        );
    }

    #[test]
    fn addresses_and_names() {
        check(
            "ipv4",
            &["0.0.0.0", "255.255.255.255", "192.168.1.10"],
            &["256.1.1.1", "1.2.3", "01.2.3.4", "1.2.3.4.5"],
        );
        check(
            "ipv6",
            &[
                "::",
                "::1",
                "2001:db8::8a2e:370:7334",
                "1:2:3:4:5:6:7:8",
                "::ffff:192.0.2.1",
                "fe80::",
                "1::2:3:4:5:6:7",
            ],
            &[
                "1:2:3:4:5:6:7:8:9",
                "1::2::3",
                "12345::",
                ":1",
                "1:2:3:4:5:6:7",
            ],
        );
        check(
            "email",
            &["a@example.com", "john.doe+x@mail.example.org"],
            &[
                "a@b",
                "@example.com",
                "a..b@example.com",
                "a@-x.com",
                "a b@example.com",
                "a@example.c0m",
            ],
        );
        check(
            "hostname",
            &["localhost", "a-b.example.com", "x1"],
            &["-a.com", "a_b.com", "a..b", ""],
        );
        check(
            "uuid",
            &["123e4567-e89b-12d3-a456-426614174000"],
            &[
                "123e4567e89b12d3a456426614174000",
                "123e4567-e89b-12d3-a456-42661417400g",
            ],
        );
    }
}
