//! Numbers with bounds (`minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, numeric
//! or draft-4 boolean form) and `multipleOf`, enforced digit by digit.
//!
//! Values live on a decimal grid: integers, or for `number` multiples of 10^-[`FRAC_DIGITS`],
//! held exactly in `i128` (no float rounding in the checks). Bounds become inclusive grid
//! values (rounded inwards), `multipleOf` a grid step. The grammar is narrowed so that the set
//! of completions of any prefix is a small union of grid intervals: no exponent, at most
//! [`INT_DIGITS`] integer digits and `FRAC_DIGITS` fraction digits. A byte is taken only when
//! some completion of the new prefix lies within the bounds on the step — so a prefix never
//! dead-ends — e.g. with `minimum: 10, maximum: 12`, "1" may be followed only by 0, 1 or 2.

use serde_json::{Map, Number, Value};

/// Fraction digits a constrained `number` may have.
const FRAC_DIGITS: u32 = 12;
/// Integer digits a constrained `number` / `integer` may have.
const INT_DIGITS: u32 = 15;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NumberRule {
    /// Fraction digits on the grid (0 for `integer`).
    scale: u32,
    /// Inclusive bounds, in grid units.
    lo: i128,
    hi: i128,
    /// Grid step the value must be a multiple of (1 when unconstrained).
    step: i128,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
}

/// A number being read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct NumState {
    phase: Phase,
    neg: bool,
    int: i128,
    int_digits: u32,
    frac: i128,
    frac_digits: u32,
}

fn pow10(n: u32) -> i128 {
    10i128.pow(n)
}

/// Rounding of a bound onto the grid.
#[derive(Clone, Copy)]
enum Round {
    Down,
    Up,
}

/// `n` in grid units of 10^-scale, rounded as asked; whether it was exact. Values far beyond
/// the grammar's reach saturate at ±`limit`.
fn to_grid(n: &Number, scale: u32, round: Round, limit: i128) -> (i128, bool) {
    let text = n.to_string();
    let (neg, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text.as_str()),
    };
    let (mant, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], body[i + 1..].parse::<i64>().unwrap_or(0)),
        None => (body, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let digits: String = format!("{int}{frac}").trim_start_matches('0').to_string();
    let mut m: i128 = 0;
    let mut shift = exp - frac.len() as i64 + scale as i64;
    for (i, d) in digits.bytes().enumerate() {
        if i >= 30 {
            // Past 30 significant digits only the magnitude matters.
            shift += (digits.len() - i) as i64;
            break;
        }
        m = m * 10 + (d - b'0') as i128;
    }
    let sat = if neg { -limit } else { limit };
    if m == 0 {
        return (0, true);
    }
    let (q, exact) = if shift >= 0 {
        match (shift <= 38)
            .then(|| pow10(shift as u32))
            .and_then(|p| m.checked_mul(p))
        {
            Some(v) if v <= limit => (v, true),
            _ => return (sat, false),
        }
    } else if -shift > 38 {
        (0, false)
    } else {
        let p = pow10((-shift) as u32);
        (m / p, m % p == 0)
    };
    // q is |n| rounded toward zero.
    let v = if neg { -q } else { q };
    let v = match (round, exact, neg) {
        (_, true, _) => v,
        (Round::Up, false, false) => v + 1,
        (Round::Down, false, true) => v - 1,
        _ => v,
    };
    (v.clamp(-limit, limit), exact)
}

impl NumberRule {
    /// The rule for an `integer` / `number` schema object, or None when it has no numeric
    /// keyword. The error names the keyword it cannot enforce, or says that no value fits.
    pub(crate) fn new(
        integer: bool,
        obj: &Map<String, Value>,
        at: &str,
    ) -> Result<Option<NumberRule>, String> {
        const KEYS: [&str; 5] = [
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        ];
        if !KEYS.iter().any(|k| obj.contains_key(*k)) {
            return Ok(None);
        }
        let scale = if integer { 0 } else { FRAC_DIGITS };
        // One past the largest magnitude the grammar can write.
        let limit = pow10(INT_DIGITS + scale);
        let num = |k: &str| -> Result<Option<&Number>, String> {
            match obj.get(k) {
                None => Ok(None),
                Some(Value::Number(n)) => Ok(Some(n)),
                // Draft 4: a boolean that makes minimum / maximum exclusive.
                Some(Value::Bool(_)) if k.starts_with("exclusive") => Ok(None),
                Some(_) => Err(format!("{k} at {at} must be a number")),
            }
        };
        let draft4 = |k: &str| obj.get(k) == Some(&Value::Bool(true));
        let mut lo = -limit;
        let mut hi = limit;
        if let Some(n) = num("minimum")? {
            let (v, exact) = to_grid(n, scale, Round::Up, limit);
            lo = lo.max(if draft4("exclusiveMinimum") && exact {
                v + 1
            } else {
                v
            });
        }
        if let Some(n) = num("exclusiveMinimum")? {
            let (v, exact) = to_grid(n, scale, Round::Up, limit);
            lo = lo.max(if exact { v + 1 } else { v });
        }
        if let Some(n) = num("maximum")? {
            let (v, exact) = to_grid(n, scale, Round::Down, limit);
            hi = hi.min(if draft4("exclusiveMaximum") && exact {
                v - 1
            } else {
                v
            });
        }
        if let Some(n) = num("exclusiveMaximum")? {
            let (v, exact) = to_grid(n, scale, Round::Down, limit);
            hi = hi.min(if exact { v - 1 } else { v });
        }
        let step = match num("multipleOf")? {
            None => 1,
            Some(n) => {
                let (v, exact) = to_grid(n, scale, Round::Down, limit);
                if v <= 0 || !exact || v >= limit {
                    return Err(if integer {
                        format!("multipleOf {n} at {at}: on an integer only a positive integer multipleOf is supported")
                    } else {
                        format!("multipleOf {n} at {at}: only positive multiples with at most {FRAC_DIGITS} decimal places are supported")
                    });
                }
                v
            }
        };
        let rule = NumberRule {
            scale,
            lo,
            hi,
            step,
        };
        if rule.start(b'-').is_none() && (b'0'..=b'9').all(|d| rule.start(d).is_none()) {
            return Err(format!(
                "no {} at {at} satisfies its minimum / maximum / multipleOf (within {INT_DIGITS} integer digits)",
                if integer { "integer" } else { "number" }
            ));
        }
        Ok(Some(rule))
    }

    /// Whether some grid value in `a..=b` (or `-b..=-a` when `neg`) is allowed.
    fn meets(&self, neg: bool, a: i128, b: i128) -> bool {
        let (a, b) = if neg { (-b, -a) } else { (a, b) };
        let (a, b) = (a.max(self.lo), b.min(self.hi));
        a <= b && b.div_euclid(self.step) * self.step >= a
    }

    /// Whether some completion of `s` is allowed.
    fn feasible(&self, s: &NumState) -> bool {
        let one = pow10(self.scale);
        match s.phase {
            Phase::Minus => (b'0'..=b'9').any(|d| self.next(s, d).is_some()),
            Phase::Zero => self.meets(s.neg, 0, if self.scale == 0 { 0 } else { one - 1 }),
            Phase::Int => (0..=INT_DIGITS - s.int_digits).any(|k| {
                let p = pow10(k);
                self.meets(s.neg, s.int * p * one, (s.int + 1) * p * one - 1)
            }),
            Phase::Dot => self.meets(s.neg, s.int * one, (s.int + 1) * one - 1),
            Phase::Frac => {
                let unit = pow10(self.scale - s.frac_digits);
                let g = s.int * one + s.frac * unit;
                self.meets(s.neg, g, g + unit - 1)
            }
        }
    }

    /// The grammar's move on `b`, before the bounds.
    fn next(&self, s: &NumState, b: u8) -> Option<NumState> {
        let mut n = *s;
        let digit = b.is_ascii_digit().then(|| (b - b'0') as i128);
        match (s.phase, b) {
            // `-0` is an integer to JSON Schema but a float to many parsers: only as the
            // start of `-0.5`.
            (Phase::Minus, b'0') if self.scale > 0 => n.phase = Phase::Zero,
            (Phase::Minus, b'1'..=b'9') | (Phase::Int, b'0'..=b'9') => {
                if s.int_digits == INT_DIGITS {
                    return None;
                }
                n.phase = Phase::Int;
                n.int = s.int * 10 + digit?;
                n.int_digits += 1;
            }
            (Phase::Zero | Phase::Int, b'.') if self.scale > 0 => n.phase = Phase::Dot,
            (Phase::Dot | Phase::Frac, b'0'..=b'9') if s.frac_digits < self.scale => {
                n.phase = Phase::Frac;
                n.frac = s.frac * 10 + digit?;
                n.frac_digits += 1;
            }
            _ => return None,
        }
        self.feasible(&n).then_some(n)
    }

    /// The state after a number's first byte, when some completion is allowed.
    pub(crate) fn start(&self, b: u8) -> Option<NumState> {
        let s = NumState {
            phase: Phase::Minus,
            neg: true,
            int: 0,
            int_digits: 0,
            frac: 0,
            frac_digits: 0,
        };
        match b {
            b'-' => self.feasible(&s).then_some(s),
            b'0' => {
                let z = NumState {
                    phase: Phase::Zero,
                    neg: false,
                    ..s
                };
                self.feasible(&z).then_some(z)
            }
            b'1'..=b'9' => self.next(&NumState { neg: false, ..s }, b),
            _ => None,
        }
    }

    /// The state after `b`, when some completion is still allowed.
    pub(crate) fn byte(&self, s: &NumState, b: u8) -> Option<NumState> {
        self.next(s, b)
    }

    /// Whether the number may end here: complete and allowed.
    pub(crate) fn can_end(&self, s: &NumState) -> bool {
        let one = pow10(self.scale);
        let g = match s.phase {
            Phase::Zero => 0,
            Phase::Int => s.int * one,
            Phase::Frac => s.int * one + s.frac * pow10(self.scale - s.frac_digits),
            Phase::Minus | Phase::Dot => return false,
        };
        let v = if s.neg { -g } else { g };
        self.lo <= v && v <= self.hi && v.rem_euclid(self.step) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(integer: bool, s: Value) -> NumberRule {
        NumberRule::new(integer, s.as_object().unwrap(), "#")
            .unwrap()
            .unwrap()
    }

    /// How many bytes of `text` are taken, and whether the number may end after them.
    fn run(r: &NumberRule, text: &str) -> (usize, bool) {
        let b = text.as_bytes();
        let Some(mut s) = r.start(b[0]) else {
            return (0, false);
        };
        for (i, &c) in b.iter().enumerate().skip(1) {
            match r.byte(&s, c) {
                Some(n) => s = n,
                None => return (i, r.can_end(&s)),
            }
        }
        (b.len(), r.can_end(&s))
    }

    #[test]
    fn prefixes_are_taken_only_when_a_completion_fits() {
        let r = rule(true, json!({"minimum": 10, "maximum": 12}));
        assert_eq!(run(&r, "1"), (1, false));
        assert_eq!(run(&r, "12"), (2, true));
        assert_eq!(run(&r, "13"), (1, false));
        assert_eq!(run(&r, "2"), (0, false));
        assert_eq!(run(&r, "-"), (0, false), "no negatives");
        assert_eq!(run(&r, "0"), (0, false));
        assert_eq!(run(&r, "10.5"), (2, true), "integers have no fraction");
        let r = rule(true, json!({"minimum": -5, "maximum": 120}));
        assert_eq!(run(&r, "-5"), (2, true));
        assert_eq!(run(&r, "-6"), (1, false));
        assert_eq!(run(&r, "-0"), (1, false), "no -0 integer");
        assert_eq!(run(&r, "120"), (3, true));
        assert_eq!(run(&r, "1200"), (3, true));
        assert_eq!(run(&r, "00"), (1, true), "no leading zeros");
        // Large values stay reachable when only a lower bound is set.
        let r = rule(true, json!({"minimum": 1000}));
        assert_eq!(run(&r, "2"), (1, false));
        assert_eq!(run(&r, "2000"), (4, true));
    }

    #[test]
    fn exclusive_bounds_on_numbers() {
        let r = rule(
            false,
            json!({"exclusiveMinimum": 0.0, "exclusiveMaximum": 1.0}),
        );
        assert_eq!(run(&r, "0"), (1, false), "0 itself is out, 0.x is in");
        assert_eq!(run(&r, "0.0"), (3, false));
        assert_eq!(run(&r, "0.05"), (4, true));
        assert_eq!(run(&r, "1"), (0, false));
        assert_eq!(run(&r, "0.999"), (5, true));
        assert_eq!(run(&r, "-"), (0, false));
        assert_eq!(run(&r, "0.5e1"), (3, true), "no exponent");
        // Draft 4 booleans.
        let r = rule(
            false,
            json!({"minimum": 2.5, "exclusiveMinimum": true, "maximum": 3, "exclusiveMaximum": false}),
        );
        assert_eq!(run(&r, "2.5"), (3, false));
        assert_eq!(run(&r, "2.51"), (4, true));
        assert_eq!(run(&r, "3"), (1, true));
        assert_eq!(run(&r, "3.0"), (3, true));
        assert_eq!(run(&r, "3.01"), (3, true));
    }

    #[test]
    fn multiples() {
        let r = rule(true, json!({"multipleOf": 5, "minimum": 1, "maximum": 20}));
        assert_eq!(run(&r, "5"), (1, true));
        assert_eq!(run(&r, "1"), (1, false), "10 and 15 are ahead");
        assert_eq!(run(&r, "15"), (2, true));
        assert_eq!(run(&r, "16"), (1, false));
        assert_eq!(run(&r, "3"), (0, false));
        let r = rule(false, json!({"multipleOf": 0.25}));
        assert_eq!(run(&r, "1.75"), (4, true));
        assert_eq!(
            run(&r, "1.3"),
            (2, false),
            "no multiple of 0.25 starts with 1.3"
        );
        assert_eq!(run(&r, "-0.5"), (4, true));
        for (int, s) in [
            (true, json!({"multipleOf": 2.5})),
            (false, json!({"multipleOf": 0})),
            (false, json!({"multipleOf": 1e-20})),
            (true, json!({"minimum": 5, "maximum": 4})),
            (true, json!({"minimum": 6, "maximum": 9, "multipleOf": 5})),
            (false, json!({"exclusiveMinimum": 1, "exclusiveMaximum": 1})),
            (true, json!({"minimum": 1e30})),
            (true, json!({"minimum": "3"})),
        ] {
            assert!(
                NumberRule::new(int, s.as_object().unwrap(), "#").is_err(),
                "{s}"
            );
        }
    }
}
