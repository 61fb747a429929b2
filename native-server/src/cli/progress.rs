//! Progress for long commands: a bar on a terminal, a plain line every 10 % otherwise.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// Shows one task's progress on stderr.
pub struct Reporter {
    bar: Option<ProgressBar>,
    phase: String,
    last_tenth: i64,
    bytes: bool,
}

fn human(n: u64) -> String {
    indicatif::HumanBytes(n).to_string()
}

impl Reporter {
    /// `bytes`: whether progress counts bytes (else items, e.g. tensors).
    pub fn new(bytes: bool) -> Reporter {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(0);
            let tpl = if bytes {
                "{msg:12} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
            } else {
                "{msg:12} [{bar:40}] {pos}/{len} eta {eta}"
            };
            b.set_style(
                ProgressStyle::with_template(tpl)
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b
        });
        Reporter {
            bar,
            phase: String::new(),
            last_tenth: -1,
            bytes,
        }
    }

    /// Reports `done` of `total` (0: unknown) in `phase`.
    pub fn update(&mut self, phase: &str, done: u64, total: u64) {
        if let Some(b) = &self.bar {
            if phase != self.phase {
                b.set_message(phase.to_string());
            }
            b.set_length(total);
            b.set_position(done);
        } else {
            let tenth = done
                .saturating_mul(10)
                .checked_div(total)
                .map_or(-1, |t| t as i64);
            if phase != self.phase || tenth > self.last_tenth {
                let amount = if self.bytes {
                    format!("{} / {}", human(done), human(total))
                } else {
                    format!("{done} / {total}")
                };
                let pct = (done * 100)
                    .checked_div(total)
                    .map_or_else(String::new, |p| format!("{p:>3}% "));
                eprintln!("weft: {phase}: {pct}{amount}");
                self.last_tenth = tenth;
            }
        }
        if phase != self.phase {
            self.phase = phase.to_string();
            self.last_tenth = -1;
        }
    }

    /// Clears the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
