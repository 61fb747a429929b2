use thiserror::Error;

/// Why a GGUF file could not be read. Every variant names what was wrong and where.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum GgufError {
    #[error("not a GGUF file: the first 4 bytes are {0:02x?}, expected \"GGUF\"")]
    BadMagic([u8; 4]),
    #[error("GGUF version {0} is not supported (versions 2 and 3 are)")]
    UnsupportedVersion(u32),
    #[error("big-endian GGUF files are not supported")]
    BigEndian,
    #[error("truncated GGUF: reading {what} at byte {offset} needs {needed} bytes, but the file ends at byte {len}")]
    Truncated {
        what: String,
        offset: u64,
        needed: u64,
        len: u64,
    },
    /// Only the first `have` bytes of the file were given; parsing needs at least `need` bytes.
    /// Feed more and parse again (the browser streams the header in chunks).
    #[error("need at least {need} bytes of the header, have {have}")]
    NeedMore { have: u64, need: u64 },
    #[error("invalid GGUF: {0}")]
    Invalid(String),
    #[error("cannot read {path}: {message}")]
    Io { path: String, message: String },
}

pub type Result<T> = std::result::Result<T, GgufError>;
