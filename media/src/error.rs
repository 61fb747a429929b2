//! The one error type of the crate; each variant says which HTTP status a caller should map it to.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    /// A caller's option is out of range (`fps`, `max_frames`, `max_pages`, ...): 400.
    #[error("{0}")]
    InvalidOption(String),
    /// A codec this crate does not decode, named (e.g. "VP9", "HEVC/H.265 (hvc1)"): 415.
    #[error(
        "unsupported video codec {codec} in {container}: only H.264 (AVC) in MP4/MOV is decoded"
    )]
    UnsupportedCodec { container: String, codec: String },
    /// A container this crate does not read (WebM, AVI, MPEG-TS, ...) or not a video at all: 415.
    #[error("unsupported video container {0}: only MP4/MOV with H.264 is decoded")]
    UnsupportedContainer(String),
    /// Over a size limit, found from headers before decoding (frame size, sample count, pages): 400.
    #[error("{0}")]
    TooLarge(String),
    /// Truncated or malformed data: 400.
    #[error("{0}")]
    Corrupt(String),
    /// The H.264 encoder or the MP4 writer failed on valid input (a bug, not the caller's
    /// fault): 500.
    #[error("{0}")]
    Encoder(String),
    /// The caller's progress callback stopped an encode.
    #[error("video encoding was cancelled")]
    Cancelled,
    /// Reading a file failed.
    #[error("reading media: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// True for the errors a server reports as 415 Unsupported Media Type.
    pub fn is_unsupported(&self) -> bool {
        matches!(
            self,
            Error::UnsupportedCodec { .. } | Error::UnsupportedContainer(_)
        )
    }
}

/// Runs a parser and turns a panic inside it into [`Error::Corrupt`]: the parsers are third-party
/// code fed untrusted bytes, and a crafted file must not take the server down.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(_) => Err(Error::Corrupt(format!(
            "{what}: malformed data (parser failed)"
        ))),
    }
}
