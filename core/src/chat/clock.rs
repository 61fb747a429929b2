//! `strftime_now(format)` for chat templates (Llama 3.x templates print today's date).
//!
//! Times are UTC: the engine has no time-zone database, and a server's prompt should not depend
//! on the host's zone. The formatting covers the strftime directives templates use; an
//! unsupported directive is an error rather than silently different text.

use std::fmt::Write;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Seconds since the Unix epoch now, or an error where the platform has no clock
/// (`wasm32-unknown-unknown`: the caller must supply the time with `ChatTemplate::with_now`).
pub fn unix_now() -> Result<i64, String> {
    #[cfg(all(target_arch = "wasm32", not(target_os = "wasi")))]
    {
        Err(
            "strftime_now: no system clock on this platform; set the time with \
             ChatTemplate::with_now"
                .into(),
        )
    }
    #[cfg(not(all(target_arch = "wasm32", not(target_os = "wasi"))))]
    {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| format!("strftime_now: system clock before 1970: {e}"))?;
        Ok(d.as_secs() as i64)
    }
}

/// A broken-down UTC time.
struct Civil {
    year: i64,
    month: u32, // 1..=12
    day: u32,   // 1..=31
    yday: u32,  // 1..=366
    wday: u32,  // 0 = Monday
    hour: u32,
    min: u32,
    sec: u32,
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn civil(secs: i64) -> Civil {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    // 1970-01-01 was a Thursday (index 3 with Monday = 0).
    let wday = (days + 3).rem_euclid(7) as u32;
    // Walk years in 400-year eras (146097 days each), then single years, then months.
    let mut year = 1970 + 400 * days.div_euclid(146_097);
    let mut d = days.rem_euclid(146_097);
    loop {
        let len = if is_leap(year) { 366 } else { 365 };
        if d < len {
            break;
        }
        d -= len;
        year += 1;
    }
    let yday = d as u32 + 1;
    let month_len = |m: u32| match m {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    let mut month = 1;
    let mut d = d as u32;
    while d >= month_len(month) {
        d -= month_len(month);
        month += 1;
    }
    Civil {
        year,
        month,
        day: d + 1,
        yday,
        wday,
        hour: rem / 3600,
        min: rem / 60 % 60,
        sec: rem % 60,
    }
}

/// Formats a Unix time (UTC) like C/Python `strftime`. `%-d` style (no padding) is accepted, as
/// glibc does.
pub fn strftime(format: &str, unix_secs: i64) -> Result<String, String> {
    let t = civil(unix_secs);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = chars
            .next()
            .ok_or_else(|| "strftime_now: format ends with a lone '%'".to_string())?;
        let pad = if spec == '-' {
            spec = chars
                .next()
                .ok_or_else(|| "strftime_now: format ends with '%-'".to_string())?;
            false
        } else {
            true
        };
        let num = |out: &mut String, v: u32, width: usize| {
            let _ = if pad {
                write!(out, "{v:0width$}")
            } else {
                write!(out, "{v}")
            };
        };
        let hour12 = if t.hour.is_multiple_of(12) {
            12
        } else {
            t.hour % 12
        };
        match spec {
            'Y' => {
                let _ = write!(out, "{}", t.year);
            }
            'y' => num(&mut out, t.year.rem_euclid(100) as u32, 2),
            'm' => num(&mut out, t.month, 2),
            'd' => num(&mut out, t.day, 2),
            'e' => {
                let _ = write!(out, "{:>2}", t.day);
            }
            'j' => num(&mut out, t.yday, 3),
            'H' => num(&mut out, t.hour, 2),
            'I' => num(&mut out, hour12, 2),
            'M' => num(&mut out, t.min, 2),
            'S' => num(&mut out, t.sec, 2),
            'p' => out.push_str(if t.hour < 12 { "AM" } else { "PM" }),
            'B' => out.push_str(MONTHS[t.month as usize - 1]),
            'b' | 'h' => out.push_str(&MONTHS[t.month as usize - 1][..3]),
            'A' => out.push_str(DAYS[t.wday as usize]),
            'a' => out.push_str(&DAYS[t.wday as usize][..3]),
            'u' => num(&mut out, t.wday + 1, 1),
            'w' => num(&mut out, (t.wday + 1) % 7, 1),
            'F' => {
                let _ = write!(out, "{}-{:02}-{:02}", t.year, t.month, t.day);
            }
            'D' => {
                let y = t.year.rem_euclid(100);
                let _ = write!(out, "{:02}/{:02}/{y:02}", t.month, t.day);
            }
            'T' => {
                let _ = write!(out, "{:02}:{:02}:{:02}", t.hour, t.min, t.sec);
            }
            'R' => {
                let _ = write!(out, "{:02}:{:02}", t.hour, t.min);
            }
            'Z' => out.push_str("UTC"),
            'z' => out.push_str("+0000"),
            'n' => out.push('\n'),
            't' => out.push('\t'),
            '%' => out.push('%'),
            other => return Err(format!("strftime_now: unsupported directive %{other}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        // 2024-02-29 13:05:09 UTC, a Thursday, day 60 of a leap year.
        let t = 1_709_211_909;
        assert_eq!(
            strftime("%Y-%m-%d %H:%M:%S %a %A %b %B %j %p %I %y %-d %u %w", t).unwrap(),
            "2024-02-29 13:05:09 Thu Thursday Feb February 060 PM 01 24 29 4 4"
        );
        assert_eq!(strftime("%d %b %Y", 0).unwrap(), "01 Jan 1970");
        assert_eq!(strftime("%F %T", -1).unwrap(), "1969-12-31 23:59:59");
        assert_eq!(strftime("%F", 4_102_444_800).unwrap(), "2100-01-01");
        assert!(strftime("%Q", 0).is_err());
        assert!(strftime("100%", 0).is_err());
    }
}
