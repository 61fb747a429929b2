//! The sample-entry four-character code of each video track, read by walking the ISO-BMFF boxes
//! `moov/trak/mdia/minf/stbl/stsd` directly. `mp4parse` keeps no code for entries it does not
//! know (HEVC, ProRes, ...), and an error should name the codec, so this small walk finds it.

/// One box: its type and its payload (after the header).
struct Bmff<'a> {
    kind: [u8; 4],
    body: &'a [u8],
}

/// The boxes laid end to end in `data`; stops at the first malformed header.
fn boxes(mut data: &[u8]) -> impl Iterator<Item = Bmff<'_>> {
    std::iter::from_fn(move || {
        if data.len() < 8 {
            return None;
        }
        let size32 = u32::from_be_bytes(data[0..4].try_into().ok()?) as u64;
        let kind: [u8; 4] = data[4..8].try_into().ok()?;
        let (header, size) = match size32 {
            // Size 0: the box runs to the end of its parent.
            0 => (8, data.len() as u64),
            // Size 1: a 64-bit size follows the type.
            1 if data.len() >= 16 => (16, u64::from_be_bytes(data[8..16].try_into().ok()?)),
            1 => return None,
            n => (8, n),
        };
        if size < header || size > data.len() as u64 {
            return None;
        }
        let (this, rest) = data.split_at(size as usize);
        data = rest;
        Some(Bmff {
            kind,
            body: &this[header as usize..],
        })
    })
}

fn child<'a>(data: &'a [u8], kind: &[u8; 4]) -> Option<&'a [u8]> {
    boxes(data).find(|b| &b.kind == kind).map(|b| b.body)
}

/// Sample-entry codes of the tracks whose handler is `vide`, in file order.
pub fn video_sample_entries(file: &[u8]) -> Vec<String> {
    let Some(moov) = child(file, b"moov") else {
        return Vec::new();
    };
    let mut codes = Vec::new();
    for trak in boxes(moov).filter(|b| &b.kind == b"trak") {
        let Some(mdia) = child(trak.body, b"mdia") else {
            continue;
        };
        // hdlr: version/flags (4), pre_defined (4), handler_type (4).
        let is_video = child(mdia, b"hdlr").is_some_and(|h| h.get(8..12) == Some(b"vide"));
        let stsd = child(mdia, b"minf")
            .and_then(|m| child(m, b"stbl"))
            .and_then(|s| child(s, b"stsd"));
        // stsd: version/flags (4), entry_count (4), then the first entry's size (4) and code (4).
        if let (true, Some(code)) = (is_video, stsd.and_then(|s| s.get(12..16))) {
            codes.push(String::from_utf8_lossy(code).into_owned());
        }
    }
    codes
}

/// A reader's name for a sample-entry code.
pub fn codec_name(code: &str) -> String {
    let name = match code {
        "avc1" | "avc2" | "avc3" | "avc4" => "H.264",
        "hvc1" | "hev1" => "HEVC/H.265",
        "vvc1" | "vvi1" => "VVC/H.266",
        "av01" => "AV1",
        "vp08" => "VP8",
        "vp09" => "VP9",
        "mp4v" => "MPEG-4 Part 2",
        "s263" | "h263" => "H.263",
        "encv" => "encrypted video",
        "apch" | "apcn" | "apcs" | "apco" | "ap4h" | "ap4x" => "Apple ProRes",
        "mjpa" | "mjpb" | "jpeg" => "Motion JPEG",
        _ => return format!("'{code}'"),
    };
    format!("{name} ({code})")
}
