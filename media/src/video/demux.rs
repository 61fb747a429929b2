//! The video track of an MP4/MOV file, through `mp4parse`: its codec, its H.264 configuration
//! (avcC) and its sample table (byte ranges, times, key frames).

use std::io::Cursor;

use mp4parse::unstable::{create_sample_table, CheckedInteger};
use mp4parse::{CodecType, SampleEntry, TrackType, VideoCodecSpecific};

use super::fourcc;
use super::VideoLimits;
use crate::error::guarded;
use crate::Error;

/// One coded frame in decode order.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub start: usize,
    pub end: usize,
    /// Presentation time in ticks, from the first displayed frame.
    pub pts: i64,
    /// A random-access point (decoding may start here).
    pub sync: bool,
}

/// The first video track (H.264: anything else is refused while reading).
#[derive(Debug)]
pub struct VideoTrack {
    /// The avcC record (SPS, PPS, NAL length size).
    pub avcc: Vec<u8>,
    /// Width and height the sample entry declares.
    pub width: u32,
    pub height: u32,
    /// Ticks per second.
    pub timescale: u64,
    /// Samples in decode order.
    pub samples: Vec<Sample>,
    /// Each displayed frame's presentation time (ticks, ascending, the first 0).
    pub presentation: Vec<i64>,
    /// `presentation[i]` is `samples[by_presentation[i]]`.
    pub by_presentation: Vec<usize>,
    /// From the first frame's start to the last frame's end, in ticks.
    pub duration: i64,
}

const MP4: &str = "MP4";

/// The H.264 track of `bytes`, or the error naming what the video is instead.
pub fn video_track(bytes: &[u8], limits: &VideoLimits) -> Result<VideoTrack, Error> {
    guarded("MP4", || read(bytes, limits))
}

fn read(bytes: &[u8], limits: &VideoLimits) -> Result<VideoTrack, Error> {
    let context = mp4parse::read_mp4(&mut Cursor::new(bytes)).map_err(|e| match e {
        mp4parse::Error::MoovMissing => Error::Corrupt("MP4 has no 'moov' box (truncated?)".into()),
        mp4parse::Error::UnexpectedEOF => Error::Corrupt("MP4 is truncated".into()),
        other => Error::Corrupt(format!("MP4 could not be read: {other}")),
    })?;
    if context.mvex.is_some() {
        return Err(Error::UnsupportedContainer("fragmented MP4".into()));
    }
    let videos: Vec<&mp4parse::Track> = context
        .tracks
        .iter()
        .filter(|t| t.track_type == TrackType::Video)
        .collect();
    let Some(track) = videos.first() else {
        return Err(Error::Corrupt("MP4 has no video track".into()));
    };
    let entry = track
        .stsd
        .as_ref()
        .and_then(|stsd| stsd.descriptions.first())
        .ok_or_else(|| Error::Corrupt("MP4 video track has no sample description".into()))?;
    let (avcc, width, height) = match entry {
        SampleEntry::Video(v) => match (&v.codec_type, &v.codec_specific) {
            (CodecType::H264, VideoCodecSpecific::AVCConfig(avcc)) => {
                (avcc.to_vec(), u32::from(v.width), u32::from(v.height))
            }
            (CodecType::H264, _) => {
                return Err(Error::Corrupt(
                    "MP4 H.264 track has no avcC configuration".into(),
                ));
            }
            (codec, _) => return Err(unsupported(bytes, Some(codec))),
        },
        _ => return Err(unsupported(bytes, None)),
    };
    if width > limits.max_width || height > limits.max_height {
        return Err(too_big(width, height, limits));
    }
    let timescale = track
        .timescale
        .map(|t| t.0)
        .filter(|&t| t > 0)
        .ok_or_else(|| Error::Corrupt("MP4 video track has no timescale".into()))?;
    let count = track.stsz.as_ref().map_or(0, |s| {
        if s.sample_size > 0 {
            track.stts.as_ref().map_or(0, count_stts)
        } else {
            s.sample_sizes.len()
        }
    });
    if count > limits.max_samples {
        return Err(Error::TooLarge(format!(
            "video has {count} frames, over the limit of {}",
            limits.max_samples
        )));
    }
    let table = create_sample_table(track, CheckedInteger(0))
        .ok_or_else(|| Error::Corrupt("MP4 sample table is inconsistent".into()))?;
    if table.len() > limits.max_samples {
        return Err(Error::TooLarge(format!(
            "video has {} frames, over the limit of {}",
            table.len(),
            limits.max_samples
        )));
    }
    let mut samples = Vec::with_capacity(table.len());
    let mut end_max = i64::MIN;
    for s in table.iter() {
        let (start, end) = (s.start_offset.0, s.end_offset.0);
        if start > end || end > bytes.len() as u64 {
            return Err(Error::Corrupt(format!(
                "MP4 sample at bytes {start}..{end} lies outside the {}-byte file (truncated?)",
                bytes.len()
            )));
        }
        samples.push(Sample {
            start: start as usize,
            end: end as usize,
            pts: s.start_composition.0,
            sync: s.sync,
        });
        end_max = end_max.max(s.end_composition.0);
    }
    if samples.is_empty() {
        return Err(Error::Corrupt("MP4 video track has no frames".into()));
    }
    let first = samples.iter().map(|s| s.pts).min().unwrap_or(0);
    for s in &mut samples {
        s.pts -= first;
    }
    let mut by_presentation: Vec<usize> = (0..samples.len()).collect();
    by_presentation.sort_by_key(|&i| (samples[i].pts, i));
    let presentation = by_presentation.iter().map(|&i| samples[i].pts).collect();
    Ok(VideoTrack {
        avcc,
        width,
        height,
        timescale,
        samples,
        presentation,
        by_presentation,
        duration: (end_max - first).max(0),
    })
}

fn count_stts(stts: &mp4parse::TimeToSampleBox) -> usize {
    stts.samples
        .iter()
        .map(|s| s.sample_count as usize)
        .fold(0, usize::saturating_add)
}

pub fn too_big(width: u32, height: u32, limits: &VideoLimits) -> Error {
    Error::TooLarge(format!(
        "video frames are {width}x{height}, over the limit of {}x{}",
        limits.max_width, limits.max_height
    ))
}

/// The error for a video track that is not H.264, naming its codec.
fn unsupported(bytes: &[u8], known: Option<&CodecType>) -> Error {
    let code = fourcc::video_sample_entries(bytes).into_iter().next();
    // An H.264 entry that mp4parse could not take (a damaged avcC) is damage, not another codec.
    if let Some(code @ ("avc1" | "avc2" | "avc3" | "avc4")) = code.as_deref() {
        return Error::Corrupt(format!("MP4 H.264 sample entry '{code}' could not be read"));
    }
    let from_box = code.map(|c| fourcc::codec_name(&c));
    let codec = from_box.unwrap_or_else(|| match known {
        Some(CodecType::MP4V) => "MPEG-4 Part 2".into(),
        Some(CodecType::VP9) => "VP9".into(),
        Some(CodecType::VP8) => "VP8".into(),
        Some(CodecType::AV1) => "AV1".into(),
        Some(CodecType::H263) => "H.263".into(),
        Some(CodecType::EncryptedVideo) => "encrypted video".into(),
        _ => "unknown".into(),
    });
    Error::UnsupportedCodec {
        container: MP4.into(),
        codec,
    }
}
