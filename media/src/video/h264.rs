//! H.264 decoding of the chosen frames with OpenH264 (compiled from the `openh264` crate's
//! bundled sources).
//!
//! MP4 stores H.264 as length-prefixed NAL units with the parameter sets in the avcC record;
//! OpenH264 takes Annex B (start codes), so each sample is rewritten. Every SPS — from avcC and
//! in-band — is read with `h264-reader` and its coded size checked against the limits before the
//! decoder sees it, since the decoder allocates its pictures from the SPS.
//!
//! To reach a frame the decoder starts at the key frame before it (in decode order) and runs to
//! it; chosen frames that share a key frame share one run. The decoder outputs pictures in display
//! order, so the m-th picture of a run is the run's sample with the m-th smallest presentation
//! time; a run whose picture count differs from its sample count is an error rather than a
//! guess at which picture is which.

use std::collections::BTreeMap;

use h264_reader::avcc::AvcDecoderConfigurationRecord;
use h264_reader::nal::sps::{ChromaFormat, FrameMbsFlags, SeqParameterSet};
use h264_reader::nal::{Nal, RefNal};
use image::RgbImage;
use openh264::decoder::{DecodedYUV, Decoder, DecoderConfig, Flush};
use openh264::formats::YUVSource;
use openh264::OpenH264API;

use super::demux::{too_big, VideoTrack};
use super::{Frame, VideoLimits};
use crate::error::guarded;
use crate::Error;

const START_CODE: [u8; 4] = [0, 0, 0, 1];
const NAL_SPS: u8 = 7;

/// Decoding parameters read from avcC.
struct Config {
    /// SPS and PPS as Annex B, fed before each run.
    header: Vec<u8>,
    /// Bytes of each NAL unit's length prefix (1, 2 or 4).
    length_size: usize,
    /// Coded pixels of a picture (the largest avcC SPS; the limit's size when avcC has none).
    /// In-band SPS may not exceed it, so the decoding budget below holds for the whole run.
    coded_pixels: u64,
}

/// One decoder pass over `samples[start..=end]` (decode order).
#[derive(Debug, PartialEq)]
struct Run {
    start: usize,
    end: usize,
}

/// Decodes the frames at the presentation indices `chosen` (ascending).
pub fn decode_chosen(
    bytes: &[u8],
    track: &VideoTrack,
    chosen: &[usize],
    limits: &VideoLimits,
) -> Result<Vec<Frame>, Error> {
    let config = guarded("H.264 configuration", || read_avcc(&track.avcc, limits))?;
    // decode index -> presentation index, for the chosen frames.
    let wanted: BTreeMap<usize, usize> = chosen
        .iter()
        .map(|&p| (track.by_presentation[p], p))
        .collect();
    let sync: Vec<bool> = track.samples.iter().map(|s| s.sync).collect();
    let runs = plan_runs(&sync, wanted.keys().copied());
    let work: usize = runs.iter().map(|r| r.end - r.start + 1).sum();
    let pixels = (work as u64).saturating_mul(config.coded_pixels);
    if pixels > limits.max_decoded_pixels {
        return Err(Error::TooLarge(format!(
            "reaching the chosen frames needs {work} frames decoded ({pixels} pixels), over the \
             limit of {} pixels (too few key frames for a video this long)",
            limits.max_decoded_pixels
        )));
    }
    let mut frames: Vec<Frame> = Vec::with_capacity(chosen.len());
    for run in &runs {
        decode_run(bytes, track, &config, run, &wanted, limits, &mut frames)?;
    }
    frames.sort_by_key(|f| f.index);
    Ok(frames)
}

/// The avcC checks of [`decode_chosen`] alone (profile, frame size), for a probe.
pub fn check_avcc(avcc: &[u8], limits: &VideoLimits) -> Result<(), Error> {
    guarded("H.264 configuration", || read_avcc(avcc, limits)).map(|_| ())
}

/// Groups the wanted decode indices (ascending) into runs from their preceding sync sample.
fn plan_runs(sync: &[bool], wanted: impl Iterator<Item = usize>) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for j in wanted {
        // Without any sync sample before it, decoding starts at the first sample.
        let start = sync[..=j].iter().rposition(|&s| s).unwrap_or(0);
        match runs.last_mut() {
            // The key frame lies inside the current run: continue it rather than restart.
            Some(run) if start <= run.end => run.end = j,
            _ => runs.push(Run { start, end: j }),
        }
    }
    runs
}

fn read_avcc(avcc: &[u8], limits: &VideoLimits) -> Result<Config, Error> {
    let record = AvcDecoderConfigurationRecord::try_from(avcc)
        .map_err(|e| Error::Corrupt(format!("H.264 avcC record is malformed: {e:?}")))?;
    let length_size = usize::from(record.length_size_minus_one()) + 1;
    if length_size == 3 {
        return Err(Error::Corrupt(
            "H.264 avcC gives a 3-byte NAL length, which is invalid".into(),
        ));
    }
    let mut header = Vec::new();
    let mut coded_pixels = 0;
    for sps in record.sequence_parameter_sets() {
        let sps = sps.map_err(|e| Error::Corrupt(format!("H.264 SPS in avcC: {e:?}")))?;
        coded_pixels = coded_pixels.max(check_sps(sps, limits)?);
        header.extend_from_slice(&START_CODE);
        header.extend_from_slice(sps);
    }
    for pps in record.picture_parameter_sets() {
        let pps = pps.map_err(|e| Error::Corrupt(format!("H.264 PPS in avcC: {e:?}")))?;
        header.extend_from_slice(&START_CODE);
        header.extend_from_slice(pps);
    }
    if coded_pixels == 0 {
        coded_pixels = u64::from(limits.max_width) * u64::from(limits.max_height);
    }
    Ok(Config {
        header,
        length_size,
        coded_pixels,
    })
}

/// The coded pixels of an SPS's picture; an error when over the limits or unreadable.
fn check_sps(nal: &[u8], limits: &VideoLimits) -> Result<u64, Error> {
    if nal.is_empty() {
        return Err(Error::Corrupt("H.264 SPS is empty".into()));
    }
    let sps = SeqParameterSet::from_bits(RefNal::new(nal, &[], true).rbsp_bits())
        .map_err(|e| Error::Corrupt(format!("H.264 SPS is malformed: {e:?}")))?;
    // OpenH264 decodes 8-bit 4:2:0 (and 4:0:0) only: other H.264 is refused by name (415), not
    // left to fail inside the decoder as damage.
    let chroma = &sps.chroma_info;
    let unsupported = |what: &str| Error::UnsupportedCodec {
        container: "MP4".into(),
        codec: format!("H.264 {what}"),
    };
    match chroma.chroma_format {
        ChromaFormat::YUV420 | ChromaFormat::Monochrome => {}
        ChromaFormat::YUV422 => return Err(unsupported("4:2:2 (High 4:2:2)")),
        ChromaFormat::YUV444 => return Err(unsupported("4:4:4 (High 4:4:4)")),
        ChromaFormat::Invalid(n) => {
            return Err(Error::Corrupt(format!("H.264 SPS has chroma format {n}")));
        }
    }
    let depth = 8 + chroma
        .bit_depth_luma_minus8
        .max(chroma.bit_depth_chroma_minus8);
    if depth > 8 {
        return Err(unsupported(&format!("{depth}-bit (High 10 or above)")));
    }
    let field_factor = match sps.frame_mbs_flags {
        FrameMbsFlags::Frames => 1,
        FrameMbsFlags::Fields { .. } => 2,
    };
    let width = (u64::from(sps.pic_width_in_mbs_minus1) + 1) * 16;
    let height = (u64::from(sps.pic_height_in_map_units_minus1) + 1) * 16 * field_factor;
    if width > u64::from(limits.max_width) || height > u64::from(limits.max_height) {
        let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        return Err(too_big(clamp(width), clamp(height), limits));
    }
    Ok(width * height)
}

/// One sample as Annex B, checking any in-band SPS on the way.
fn annex_b(
    sample: &[u8],
    config: &Config,
    limits: &VideoLimits,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    let length_size = config.length_size;
    out.clear();
    let mut rest = sample;
    while !rest.is_empty() {
        if rest.len() < length_size {
            return Err(Error::Corrupt(
                "H.264 sample ends inside a NAL length".into(),
            ));
        }
        let len = rest[..length_size]
            .iter()
            .fold(0usize, |n, &b| (n << 8) | usize::from(b));
        rest = &rest[length_size..];
        if len > rest.len() {
            return Err(Error::Corrupt(format!(
                "H.264 NAL unit of {len} bytes runs past its sample ({} bytes left)",
                rest.len()
            )));
        }
        let (nal, tail) = rest.split_at(len);
        rest = tail;
        if nal.is_empty() {
            continue;
        }
        if nal[0] & 0x1f == NAL_SPS {
            let pixels = guarded("H.264 SPS", || check_sps(nal, limits))?;
            if pixels > config.coded_pixels {
                return Err(Error::Corrupt(
                    "H.264 stream grows its frame size mid-stream (not supported)".into(),
                ));
            }
        }
        out.extend_from_slice(&START_CODE);
        out.extend_from_slice(nal);
    }
    Ok(())
}

fn decode_run(
    bytes: &[u8],
    track: &VideoTrack,
    config: &Config,
    run: &Run,
    wanted: &BTreeMap<usize, usize>,
    limits: &VideoLimits,
    frames: &mut Vec<Frame>,
) -> Result<(), Error> {
    // The run's samples in display order: the m-th picture out is the m-th of these.
    let mut display: Vec<usize> = (run.start..=run.end).collect();
    display.sort_by_key(|&i| (track.samples[i].pts, i));
    // Reordering is left to the decoder: flushing after every packet would hand out a reference
    // picture before the B-pictures shown ahead of it.
    let decoder_config = DecoderConfig::new().flush_after_decode(Flush::NoFlush);
    let mut decoder = Decoder::with_api_config(OpenH264API::from_source(), decoder_config)
        .map_err(|e| Error::Corrupt(format!("H.264 decoder could not start: {e}")))?;
    let mut output = Output {
        track,
        display: &display,
        wanted,
        limits,
        frames,
        count: 0,
    };
    decoder
        .decode(&config.header)
        .map_err(|e| Error::Corrupt(format!("H.264 parameter sets were refused: {e}")))?;
    let mut packet = Vec::new();
    for i in run.start..=run.end {
        let sample = &track.samples[i];
        annex_b(
            &bytes[sample.start..sample.end],
            config,
            limits,
            &mut packet,
        )?;
        let picture = decoder
            .decode(&packet)
            .map_err(|e| Error::Corrupt(format!("H.264 frame {i} could not be decoded: {e}")))?;
        if let Some(picture) = picture {
            output.take(&picture)?;
        }
    }
    let rest = decoder
        .flush_remaining()
        .map_err(|e| Error::Corrupt(format!("H.264 decoder could not be flushed: {e}")))?;
    for picture in &rest {
        output.take(picture)?;
    }
    if output.count != display.len() {
        return Err(Error::Corrupt(format!(
            "H.264 decoder gave {} pictures for {} frames (damaged stream?)",
            output.count,
            display.len()
        )));
    }
    Ok(())
}

/// Labels the pictures of one run as they come out and keeps the wanted ones.
struct Output<'a> {
    track: &'a VideoTrack,
    display: &'a [usize],
    wanted: &'a BTreeMap<usize, usize>,
    limits: &'a VideoLimits,
    frames: &'a mut Vec<Frame>,
    count: usize,
}

impl Output<'_> {
    fn take(&mut self, picture: &DecodedYUV<'_>) -> Result<(), Error> {
        let Some(&sample) = self.display.get(self.count) else {
            return Err(Error::Corrupt(
                "H.264 decoder gave more pictures than frames".into(),
            ));
        };
        self.count += 1;
        // Runs do not overlap, so each wanted frame comes out once.
        let Some(&index) = self.wanted.get(&sample) else {
            return Ok(());
        };
        let (width, height) = picture.dimensions();
        if width as u64 > u64::from(self.limits.max_width)
            || height as u64 > u64::from(self.limits.max_height)
        {
            return Err(too_big(width as u32, height as u32, self.limits));
        }
        let mut rgb = vec![0u8; width * height * 3];
        picture.write_rgb8(&mut rgb);
        let image = RgbImage::from_raw(width as u32, height as u32, rgb)
            .ok_or_else(|| Error::Corrupt("H.264 picture has an odd size".into()))?;
        let time_s = self.track.samples[sample].pts as f64 / self.track.timescale as f64;
        self.frames.push(Frame {
            time_s,
            index,
            image,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_start_at_the_key_frame_before_and_merge() {
        // Key frames at 0 and 4.
        let sync = [true, false, false, false, true, false, false, false];
        assert_eq!(
            plan_runs(&sync, [1, 2].into_iter()),
            vec![Run { start: 0, end: 2 }]
        );
        assert_eq!(
            plan_runs(&sync, [2, 6].into_iter()),
            vec![Run { start: 0, end: 2 }, Run { start: 4, end: 6 }]
        );
        assert_eq!(
            plan_runs(&sync, [4, 5, 7].into_iter()),
            vec![Run { start: 4, end: 7 }]
        );
        // No key frame at all: from the first sample.
        assert_eq!(
            plan_runs(&[false; 3], [2].into_iter()),
            vec![Run { start: 0, end: 2 }]
        );
    }

    #[test]
    fn annex_b_rewrites_lengths_and_refuses_overruns() {
        let limits = VideoLimits::default();
        let config = Config {
            header: Vec::new(),
            length_size: 4,
            coded_pixels: 64 * 48,
        };
        let mut out = Vec::new();
        // Two NAL units (types 5 and 1) with 4-byte lengths.
        let sample = [0, 0, 0, 2, 0x65, 0xaa, 0, 0, 0, 1, 0x41];
        annex_b(&sample, &config, &limits, &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 1, 0x65, 0xaa, 0, 0, 0, 1, 0x41]);
        let overrun = [0, 0, 0, 9, 0x65];
        assert!(matches!(
            annex_b(&overrun, &config, &limits, &mut out),
            Err(Error::Corrupt(_))
        ));
        assert!(matches!(
            annex_b(&[0, 0], &config, &limits, &mut out),
            Err(Error::Corrupt(_))
        ));
    }
}
