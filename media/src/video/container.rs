//! What kind of file a video upload is, from its first bytes, so that anything but ISO-BMFF
//! (MP4/MOV) is refused with the container's name and, where it is cheap to find, the codec's.

use crate::Error;

/// Top-level ISO-BMFF box types a file may start with.
const BMFF_FIRST_BOXES: [&[u8; 4]; 7] = [
    b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide", b"styp",
];

/// Matroska/WebM `CodecID` strings for video, and the names to report.
const MATROSKA_CODECS: [(&[u8], &str); 8] = [
    (b"V_VP9", "VP9"),
    (b"V_VP8", "VP8"),
    (b"V_AV1", "AV1"),
    (b"V_MPEGH/ISO/HEVC", "HEVC/H.265"),
    (b"V_MPEG4/ISO/AVC", "H.264"),
    (b"V_MPEG4/ISO", "MPEG-4 Part 2"),
    (b"V_THEORA", "Theora"),
    (b"V_MPEG2", "MPEG-2"),
];

/// Ok for ISO-BMFF; otherwise the 415 error naming what the file is.
pub fn require_iso_bmff(bytes: &[u8]) -> Result<(), Error> {
    if bytes.len() >= 8 && BMFF_FIRST_BOXES.iter().any(|b| &bytes[4..8] == *b) {
        return Ok(());
    }
    if bytes.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]) {
        return Err(matroska(bytes));
    }
    let name = if bytes.len() >= 12 && &bytes[0..4] == b"RIFF" && &bytes[8..12] == b"AVI " {
        "AVI"
    } else if bytes.starts_with(b"OggS") {
        "Ogg"
    } else if bytes.starts_with(b"FLV") {
        "FLV"
    } else if bytes.len() > 188 * 2 && bytes[0] == 0x47 && bytes[188] == 0x47 && bytes[376] == 0x47
    {
        "MPEG-TS"
    } else if bytes.starts_with(&[0x00, 0x00, 0x01, 0xba]) {
        "MPEG-PS"
    } else if bytes.starts_with(&[0x30, 0x26, 0xb2, 0x75]) {
        "ASF/WMV"
    } else if bytes.len() < 8 {
        return Err(Error::Corrupt(format!(
            "video is only {} bytes",
            bytes.len()
        )));
    } else {
        "unknown (not MP4/MOV)"
    };
    Err(Error::UnsupportedContainer(name.to_string()))
}

/// WebM/Matroska: the track's `CodecID` string is in the header, near the start.
fn matroska(bytes: &[u8]) -> Error {
    let container = if find(&bytes[..bytes.len().min(64)], b"webm") {
        "WebM"
    } else {
        "Matroska"
    }
    .to_string();
    let head = &bytes[..bytes.len().min(64 << 10)];
    match MATROSKA_CODECS.iter().find(|(id, _)| find(head, id)) {
        // H.264 itself is decoded, only not from this container.
        Some((_, "H.264")) => Error::UnsupportedContainer(format!("{container} (with H.264)")),
        Some((_, codec)) => Error::UnsupportedCodec {
            container,
            codec: codec.to_string(),
        },
        None => Error::UnsupportedContainer(container),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_other_containers() {
        let avi = b"RIFF\x10\x00\x00\x00AVI LIST";
        assert!(matches!(require_iso_bmff(avi), Err(Error::UnsupportedContainer(n)) if n == "AVI"));
        assert!(
            matches!(require_iso_bmff(b"OggS\0\x02\0\0\0\0"), Err(Error::UnsupportedContainer(n)) if n == "Ogg")
        );
        assert!(matches!(require_iso_bmff(b"\0\0"), Err(Error::Corrupt(_))));
        assert!(require_iso_bmff(b"\0\0\0\x20ftypisom").is_ok());
    }
}
