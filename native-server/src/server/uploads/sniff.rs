//! What an uploaded file is, decided from its bytes alone: the client's file name and MIME type
//! are never trusted (a `.pdf` that is an ELF executable is refused as an executable).

use axum::http::StatusCode;

use crate::server::error::ApiError;

/// The kinds of file the chat can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// UTF-8 text without NUL bytes (plain text, markdown, code, CSV, JSON ...).
    Text,
    Pdf,
    Image(Image),
    /// A video container (MP4/MOV, WebM/Matroska, AVI): only MP4/MOV with H.264 is read into
    /// frames; the others are refused by name when the frames are taken (`video.rs`).
    Video,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Image {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl Kind {
    /// `text`, `pdf`, `image` or `video` (the reply's `kind`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Pdf => "pdf",
            Kind::Image(_) => "image",
            Kind::Video => "video",
        }
    }

    /// The media type the file is reported and served as. Text is always `text/plain`, never
    /// HTML or script, so an upload can never run in the page's origin.
    pub fn media_type(self) -> &'static str {
        match self {
            Kind::Text => "text/plain; charset=utf-8",
            Kind::Pdf => "application/pdf",
            Kind::Image(Image::Png) => "image/png",
            Kind::Image(Image::Jpeg) => "image/jpeg",
            Kind::Image(Image::Gif) => "image/gif",
            Kind::Image(Image::Webp) => "image/webp",
            Kind::Video => "video/mp4",
        }
    }

    /// The extension a stored file gets: the client's own one when it names this kind (so a
    /// `.csv` stays `.csv`), else the kind's default.
    pub fn extension(self, client_name: &str) -> &'static str {
        let ext = client_name
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase())
            .unwrap_or_default();
        let (default, allowed): (&'static str, &[&'static str]) = match self {
            Kind::Text => ("txt", TEXT_EXTENSIONS),
            Kind::Pdf => ("pdf", &["pdf"]),
            Kind::Image(Image::Png) => ("png", &["png"]),
            Kind::Image(Image::Jpeg) => ("jpg", &["jpg", "jpeg"]),
            Kind::Image(Image::Gif) => ("gif", &["gif"]),
            Kind::Image(Image::Webp) => ("webp", &["webp"]),
            Kind::Video => ("mp4", &["mp4", "m4v", "mov"]),
        };
        allowed
            .iter()
            .find(|a| **a == ext)
            .copied()
            .unwrap_or(default)
    }
}

/// Extensions a text upload may keep. Markup that a browser would render (html, svg, xml) is
/// left out on purpose: those are stored as `.txt`.
pub const TEXT_EXTENSIONS: &[&str] = &[
    "txt", "md", "markdown", "csv", "tsv", "json", "jsonl", "yaml", "yml", "toml", "ini", "log",
    "rs", "py", "js", "mjs", "ts", "tsx", "jsx", "c", "h", "cc", "cpp", "hpp", "java", "go", "rb",
    "php", "sh", "sql", "css", "kt", "swift", "cs", "lua", "r", "tex",
];

fn refused(status: StatusCode, code: &'static str, msg: String) -> ApiError {
    ApiError {
        status,
        kind: "invalid_request_error",
        code: Some(code),
        message: msg,
        retry_after: None,
    }
}

/// 415: a type the server does not take.
pub fn unsupported(msg: String) -> ApiError {
    refused(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_file", msg)
}

/// 422: the right type, but its content cannot be read.
pub fn unreadable(msg: String) -> ApiError {
    refused(StatusCode::UNPROCESSABLE_ENTITY, "unreadable_file", msg)
}

/// The kind of `bytes` (`name`: the client's file name, only for messages).
pub fn sniff(name: &str, bytes: &[u8]) -> Result<Kind, ApiError> {
    let starts = |m: &[u8]| bytes.starts_with(m);
    if starts(b"\x7fELF")
        || starts(b"MZ")
        || [
            b"\xfe\xed\xfa\xce",
            b"\xfe\xed\xfa\xcf",
            b"\xce\xfa\xed\xfe",
            b"\xcf\xfa\xed\xfe",
            b"\xca\xfe\xba\xbe",
        ]
        .iter()
        .any(|m| starts(&m[..]))
    {
        return Err(unsupported(format!(
            "{name:?} is an executable program (ELF, PE or Mach-O); upload text, PDF or an image"
        )));
    }
    if starts(b"PK\x03\x04") || starts(b"PK\x05\x06") || starts(b"PK\x07\x08") {
        return Err(unsupported(format!(
            "{name:?} is a zip archive (or a format built on zip, such as docx); upload text, \
             PDF or an image"
        )));
    }
    if starts(b"%PDF-") {
        return Ok(Kind::Pdf);
    }
    if starts(b"\x89PNG\r\n\x1a\n") {
        return Ok(Kind::Image(Image::Png));
    }
    if starts(b"\xff\xd8\xff") {
        return Ok(Kind::Image(Image::Jpeg));
    }
    if starts(b"GIF87a") || starts(b"GIF89a") {
        return Ok(Kind::Image(Image::Gif));
    }
    if bytes.len() >= 12 && starts(b"RIFF") && &bytes[8..12] == b"WEBP" {
        return Ok(Kind::Image(Image::Webp));
    }
    if is_video(bytes) {
        return Ok(Kind::Video);
    }
    if !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok() {
        return Ok(Kind::Text);
    }
    Err(unsupported(format!(
        "{name:?} is neither UTF-8 text, a PDF, a PNG, JPEG, GIF or WebP image nor an MP4 video \
         (judged by its content, not its name)"
    )))
}

/// An ISO-BMFF file (MP4/MOV: a small `ftyp` box first, so its size starts with a NUL byte,
/// which text never has), Matroska/WebM (the EBML magic) or AVI.
fn is_video(bytes: &[u8]) -> bool {
    (bytes.len() >= 8 && bytes[0] == 0 && &bytes[4..8] == b"ftyp")
        || bytes.starts_with(&[0x1a, 0x45, 0xdf, 0xa3])
        || (bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"AVI ")
}

/// The client's file name reduced to its last component, without control characters, at most
/// 200 characters: only ever shown (message headers, the reply), never used as a path.
pub fn display_name(raw: Option<&str>) -> String {
    let raw = raw.unwrap_or("");
    let last = raw.rsplit(['/', '\\']).next().unwrap_or("");
    let clean: String = last.chars().filter(|c| !c.is_control()).take(200).collect();
    let clean = clean.trim().trim_start_matches('.').to_string();
    if clean.is_empty() {
        "upload".into()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_decides_not_the_name() {
        assert_eq!(sniff("a.pdf", b"hello").unwrap(), Kind::Text);
        assert_eq!(sniff("a.txt", b"%PDF-1.4\n").unwrap(), Kind::Pdf);
        let elf = sniff("a.pdf", b"\x7fELF\x02\x01\x01").unwrap_err();
        assert_eq!(elf.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(sniff("a.txt", b"PK\x03\x04rest").is_err());
        assert!(sniff("a.txt", b"text\0with nul").is_err());
        assert!(sniff("a.txt", &[0xc3, 0x28]).is_err());
        assert_eq!(
            sniff("x", b"RIFF\0\0\0\0WEBPVP8 ").unwrap(),
            Kind::Image(Image::Webp)
        );
        assert_eq!(sniff("a.txt", b"\0\0\0\x20ftypisom").unwrap(), Kind::Video);
        assert_eq!(sniff("a", b"\x1a\x45\xdf\xa3webm").unwrap(), Kind::Video);
        assert_eq!(sniff("a", b"1234ftyp text").unwrap(), Kind::Text);
    }

    #[test]
    fn extensions_follow_the_kind() {
        assert_eq!(Kind::Text.extension("notes.MD"), "md");
        assert_eq!(Kind::Text.extension("page.html"), "txt");
        assert_eq!(Kind::Pdf.extension("evil.exe"), "pdf");
        assert_eq!(Kind::Image(Image::Jpeg).extension("p.jpeg"), "jpeg");
    }

    #[test]
    fn names_are_only_a_last_component() {
        assert_eq!(display_name(Some("../../etc/passwd")), "passwd");
        assert_eq!(display_name(Some("..\\..\\x.txt")), "x.txt");
        assert_eq!(display_name(Some("..")), "upload");
        assert_eq!(display_name(None), "upload");
    }
}
