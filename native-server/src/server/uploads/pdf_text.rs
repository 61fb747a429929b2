//! One page's text from its content stream, with the line breaks and word gaps a reader sees.
//!
//! lopdf's own `extract_text` joins the strings of a text object without regard to the
//! positioning between them, so two lines drawn with `Td` come out as one run-on word. This
//! walks the same operators (lopdf decodes the stream and the fonts' encodings) and turns the
//! moves into separators: a move to another line is a newline, a move along the line or a wide
//! gap in a `TJ` array is a space.

use lopdf::content::Content;
use lopdf::{Document, Encoding, Object, ObjectId};

/// A `TJ` adjustment (thousandths of an em; negative moves right) wider than this is a gap
/// between words rather than kerning.
const WORD_GAP: f32 = 180.0;

/// The text of the page `page` (an empty string when it draws none).
pub fn page_text(doc: &Document, page: ObjectId, max_content: usize) -> lopdf::Result<String> {
    let fonts = doc.get_page_fonts(page)?;
    let encodings: Vec<(Vec<u8>, Encoding)> = fonts
        .into_iter()
        .filter_map(|(name, font)| {
            font.get_font_encoding_with_limit(doc, max_content)
                .ok()
                .map(|e| (name, e))
        })
        .collect();
    let content = Content::decode(&doc.get_page_content_with_limit(page, max_content)?)?;
    let mut out = Text::default();
    let mut enc: Option<&Encoding> = None;
    let mut last_tm_y: Option<f32> = None;
    for op in &content.operations {
        let args = &op.operands;
        match op.operator.as_str() {
            "Tf" => {
                enc = args
                    .first()
                    .and_then(|n| n.as_name().ok())
                    .and_then(|n| encodings.iter().find(|(k, _)| k == n))
                    .map(|(_, e)| e);
            }
            "Tj" => out.show(enc, args.first()),
            "'" => {
                out.newline();
                out.show(enc, args.first());
            }
            "\"" => {
                out.newline();
                out.show(enc, args.get(2));
            }
            "TJ" => {
                for item in args
                    .first()
                    .and_then(|a| a.as_array().ok())
                    .into_iter()
                    .flatten()
                {
                    match item.as_float() {
                        Ok(adjust) if -adjust > WORD_GAP => out.space(),
                        Ok(_) => {}
                        Err(_) => out.show(enc, Some(item)),
                    }
                }
            }
            "Td" | "TD" => {
                let dy = args.get(1).and_then(|y| y.as_float().ok()).unwrap_or(0.0);
                if dy.abs() > 0.01 {
                    out.newline();
                } else {
                    out.space();
                }
            }
            // Some writers place every run with `Tm`: only a new baseline is a new line.
            "Tm" => {
                let y = args.get(5).and_then(|y| y.as_float().ok());
                match (y, last_tm_y) {
                    (Some(y), Some(prev)) if (y - prev).abs() <= 0.01 => out.space(),
                    _ => out.newline(),
                }
                last_tm_y = y;
            }
            "T*" | "ET" => out.newline(),
            _ => {}
        }
    }
    Ok(out.finish())
}

/// The text being assembled; separators are only added between visible text.
#[derive(Default)]
struct Text {
    s: String,
}

impl Text {
    fn show(&mut self, enc: Option<&Encoding>, s: Option<&Object>) {
        let Some(bytes) = s.and_then(|o| o.as_str().ok()) else {
            return;
        };
        let decoded = match enc {
            Some(e) => Document::decode_text(e, bytes).unwrap_or_default(),
            // A font without a readable encoding: Latin-1 is right for the simple fonts that
            // most often lack one, and harmless otherwise.
            None => bytes.iter().map(|&b| b as char).collect(),
        };
        self.s.push_str(&decoded);
    }

    fn space(&mut self) {
        if !self.s.is_empty() && !self.s.ends_with([' ', '\n']) {
            self.s.push(' ');
        }
    }

    fn newline(&mut self) {
        let trimmed = self.s.trim_end_matches(' ').len();
        self.s.truncate(trimmed);
        if !self.s.is_empty() && !self.s.ends_with('\n') {
            self.s.push('\n');
        }
    }

    fn finish(self) -> String {
        self.s.trim().to_string()
    }
}
