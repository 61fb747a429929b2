//! Ollama's `keep_alive`: how long a model stays loaded after its last request.
//!
//! Accepted as Ollama accepts it: a number of seconds, or a duration string of numbers with
//! units (`"5m"`, `"1h30m"`, `"90s"`, `"500ms"`, a bare `"300"` as seconds). Zero unloads the
//! model as soon as its requests end; any negative value keeps it loaded until evicted.

use std::time::Duration;

use serde_json::Value;

use super::error::RegistryError;

/// How long to keep a model after it goes idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeepAlive {
    /// Unload when idle for this long (zero: as soon as idle).
    For(Duration),
    /// Never unload for idleness (only to make room).
    Forever,
}

impl KeepAlive {
    /// Parses a request's `keep_alive` field (a JSON number or string).
    pub fn from_json(v: &Value) -> Result<Self, RegistryError> {
        match v {
            Value::Number(n) => {
                let secs = n.as_f64().unwrap_or(0.0);
                Ok(Self::from_secs(secs))
            }
            Value::String(s) => Self::parse(s),
            other => Err(bad(&other.to_string())),
        }
    }

    /// Parses a duration string such as `5m`, `1h30m`, `-1`, `0`.
    pub fn parse(s: &str) -> Result<Self, RegistryError> {
        let t = s.trim();
        if let Ok(secs) = t.parse::<f64>() {
            if secs.is_finite() {
                return Ok(Self::from_secs(secs));
            }
            return Err(bad(s));
        }
        let (neg, body) = match t.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        let mut total = 0.0f64;
        let mut rest = body;
        if rest.is_empty() {
            return Err(bad(s));
        }
        while !rest.is_empty() {
            let num_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| bad(s))?;
            let num: f64 = rest[..num_len].parse().map_err(|_| bad(s))?;
            rest = &rest[num_len..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let scale = match &rest[..unit_len] {
                "ns" => 1e-9,
                "us" | "µs" => 1e-6,
                "ms" => 1e-3,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return Err(bad(s)),
            };
            total += num * scale;
            rest = &rest[unit_len..];
        }
        Ok(Self::from_secs(if neg { -total } else { total }))
    }

    fn from_secs(secs: f64) -> Self {
        if secs < 0.0 {
            KeepAlive::Forever
        } else {
            // Capped at 100 years: a larger number is "forever" in all but name.
            KeepAlive::For(Duration::from_secs_f64(secs.min(3.2e9)))
        }
    }

    /// Whether the model should go as soon as it is idle.
    pub fn is_zero(self) -> bool {
        self == KeepAlive::For(Duration::ZERO)
    }
}

fn bad(s: &str) -> RegistryError {
    RegistryError::invalid(format!(
        "invalid keep_alive {s:?}: use seconds (300), a duration (\"5m\", \"1h30m\"), 0 to unload \
         when idle, or a negative value to keep the model loaded"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secs(s: u64) -> KeepAlive {
        KeepAlive::For(Duration::from_secs(s))
    }

    #[test]
    fn parses_what_ollama_accepts() {
        assert_eq!(KeepAlive::parse("5m").unwrap(), secs(300));
        assert_eq!(KeepAlive::parse("1h30m").unwrap(), secs(5400));
        assert_eq!(KeepAlive::parse("90s").unwrap(), secs(90));
        assert_eq!(KeepAlive::parse("300").unwrap(), secs(300));
        assert_eq!(KeepAlive::parse("0").unwrap(), secs(0));
        assert_eq!(KeepAlive::parse("-1").unwrap(), KeepAlive::Forever);
        assert_eq!(KeepAlive::parse("-5m").unwrap(), KeepAlive::Forever);
        assert_eq!(
            KeepAlive::parse("500ms").unwrap(),
            KeepAlive::For(Duration::from_millis(500))
        );
        assert_eq!(KeepAlive::from_json(&json!(0)).unwrap(), secs(0));
        assert_eq!(
            KeepAlive::from_json(&json!(-1)).unwrap(),
            KeepAlive::Forever
        );
        assert_eq!(KeepAlive::from_json(&json!("10m")).unwrap(), secs(600));
        assert!(KeepAlive::from_json(&json!(0)).unwrap().is_zero());
    }

    #[test]
    fn refuses_garbage() {
        for g in ["", "soon", "5x", "m5", "1.2.3s", "5 m", "nan"] {
            assert!(KeepAlive::parse(g).is_err(), "{g:?} accepted");
        }
        assert!(KeepAlive::from_json(&json!(true)).is_err());
        assert!(KeepAlive::from_json(&json!({"a": 1})).is_err());
    }
}
