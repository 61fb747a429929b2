//! Stop strings over streamed text.

/// What one piece of streamed text releases.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopStep {
    /// Text safe to emit now: never part of a stop string, never past one.
    pub text: String,
    /// Index (into the stop list) of the stop string that ended generation, if one did.
    pub stopped: Option<usize>,
}

/// Incremental stop-string detection. Text that could be the start of a stop string is held
/// back until the following text settles it; once a stop string appears, the text before it is
/// released and everything after is dropped.
#[derive(Clone, Debug, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
    stopped: Option<usize>,
}

impl StopMatcher {
    /// Empty stop strings are ignored (they would match everywhere).
    pub fn new<I, S>(stops: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        StopMatcher {
            stops: stops
                .into_iter()
                .map(Into::into)
                .filter(|s: &String| !s.is_empty())
                .collect(),
            held: String::new(),
            stopped: None,
        }
    }

    pub fn stops(&self) -> &[String] {
        &self.stops
    }

    /// The stop string that ended generation, if any.
    pub fn stopped(&self) -> Option<usize> {
        self.stopped
    }

    /// Feeds the next piece of generated text.
    pub fn push(&mut self, chunk: &str) -> StopStep {
        if self.stopped.is_some() {
            return StopStep {
                text: String::new(),
                stopped: self.stopped,
            };
        }
        self.held.push_str(chunk);
        // The earliest occurrence of any stop string ends the text; on equal starts, the
        // longer string (it contains the shorter one's position anyway, and is what was meant).
        let mut found: Option<(usize, usize)> = None;
        for (i, s) in self.stops.iter().enumerate() {
            if let Some(pos) = self.held.find(s.as_str()) {
                let better = match found {
                    None => true,
                    Some((p, j)) => pos < p || (pos == p && s.len() > self.stops[j].len()),
                };
                if better {
                    found = Some((pos, i));
                }
            }
        }
        if let Some((pos, i)) = found {
            self.stopped = Some(i);
            let text = self.held[..pos].to_string();
            self.held.clear();
            return StopStep {
                text,
                stopped: Some(i),
            };
        }
        // Hold back the longest tail that is a proper prefix of some stop string. A stop
        // string starts with a non-continuation byte, so a matching tail starts on a char
        // boundary.
        let keep = self.partial_tail();
        let cut = self.held.len() - keep;
        let text = self.held[..cut].to_string();
        self.held.drain(..cut);
        StopStep {
            text,
            stopped: None,
        }
    }

    /// Ends the stream without a stop string: releases whatever was held back.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    fn partial_tail(&self) -> usize {
        let h = self.held.as_bytes();
        let mut best = 0;
        for s in &self.stops {
            let s = s.as_bytes();
            let longest = (s.len() - 1).min(h.len());
            for len in (best + 1..=longest).rev() {
                if h[h.len() - len..] == s[..len] {
                    best = len;
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams `chunks`, returning everything emitted and the stop index.
    fn run(stops: &[&str], chunks: &[&str]) -> (String, Option<usize>) {
        let mut m = StopMatcher::new(stops.iter().copied());
        let mut out = String::new();
        for c in chunks {
            let step = m.push(c);
            out.push_str(&step.text);
            if step.stopped.is_some() {
                return (out, step.stopped);
            }
        }
        out.push_str(&m.finish());
        (out, None)
    }

    #[test]
    fn stop_split_across_chunks() {
        assert_eq!(
            run(
                &["<|im_end|>"],
                &["Hello", " wor", "ld<|im", "_en", "d|>tail"]
            ),
            ("Hello world".to_string(), Some(0))
        );
    }

    #[test]
    fn partial_match_is_held_then_released() {
        let mut m = StopMatcher::new(["STOP"]);
        assert_eq!(m.push("abcST").text, "abc");
        assert_eq!(m.push("O").text, "");
        assert_eq!(m.push("P!").text, "");
        assert_eq!(m.stopped(), Some(0));
        let mut m = StopMatcher::new(["STOP"]);
        assert_eq!(m.push("abcST").text, "abc");
        assert_eq!(m.push("ORM").text, "STORM");
        assert_eq!(m.finish(), "");
        let mut m = StopMatcher::new(["STOP"]);
        assert_eq!(m.push("xSTO").text, "x");
        assert_eq!(m.finish(), "STO");
    }

    #[test]
    fn every_split_point_gives_the_same_result() {
        let text = "The answer: 42\n\nUser: hi ünïcødé\n\nUser: again";
        let stops = ["\n\nUser:", "ünï"];
        for a in 0..=text.len() {
            for b in a..=text.len() {
                if !(text.is_char_boundary(a) && text.is_char_boundary(b)) {
                    continue;
                }
                let got = run(&stops, &[&text[..a], &text[a..b], &text[b..]]);
                assert_eq!(
                    got,
                    ("The answer: 42".to_string(), Some(0)),
                    "split {a} {b}"
                );
            }
        }
    }

    #[test]
    fn earliest_stop_wins_and_nothing_after() {
        let (out, stop) = run(&["bb", "ab"], &["xxabbyy"]);
        assert_eq!((out.as_str(), stop), ("xx", Some(1)));
        let mut m = StopMatcher::new(["z"]);
        assert_eq!(m.push("az").stopped, Some(0));
        assert_eq!(m.push("more").text, "");
        assert_eq!(m.finish(), "");
    }

    #[test]
    fn no_stops_passes_through() {
        let mut m = StopMatcher::new(Vec::<String>::new());
        assert_eq!(m.push("abc").text, "abc");
        let mut m = StopMatcher::new([""]);
        assert_eq!(m.push("abc").text, "abc");
    }
}
