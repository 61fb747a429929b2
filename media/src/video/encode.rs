//! RGB frames into an MP4/H.264 video: `encode_mp4(frames, options)`.
//!
//! H.264 by OpenH264's encoder (compiled from the `openh264` crate's bundled sources, the same
//! library that decodes uploads), Constrained Baseline profile: every browser and player decodes
//! it. Quality is a constant quantiser (`qp`, default [`EncodeOptions::DEFAULT_QP`]): each frame
//! is coded at the same QP whatever its content, so quality does not depend on a bitrate guess,
//! and a frame's size grows with its detail instead. At QP 20 smooth and moving test patterns
//! come back above 40 dB PSNR (see media/tests/encode.rs); a Wan frame is smooth by comparison.
//!
//! Colour: RGB to YUV 4:2:0 with the BT.601 matrix in limited range (`yuv.rs`), declared in the
//! SPS's VUI (SMPTE 170M primaries, transfer and matrix, limited range), which is also what a
//! decoder assumes when the VUI is absent: this crate's decoder and FFmpeg (PyAV) agree on it.
//!
//! Determinism: the same frames and options give the same bytes. The encoder runs on one thread
//! (its multi-threaded mode splits frames into slices by the machine's core count), its
//! content-adaptive features that are not needed for a fixed QP are off, and the MP4 carries no
//! wall-clock time (`mux.rs`).
//!
//! Frame sizes: width and height must be even (4:2:0 has one chroma sample per 2x2 block; an odd
//! size is refused rather than padded, and Wan's sizes are multiples of 16 anyway), at least
//! [`MIN_SIDE`] (one macroblock), at most [`MAX_LONG_SIDE`] on the longer side and
//! [`MAX_SHORT_SIDE`] on the shorter (OpenH264's ceiling, H.264 level 5.2). Sizes that are not
//! multiples of 16 are coded padded and cropped back by the SPS, which decoders apply.

use std::ops::ControlFlow;

use image::RgbImage;
use openh264::encoder::{
    BitRate, Complexity, Encoder, EncoderConfig, FrameRate as EncoderRate, FrameType,
    IntraFramePeriod, QpRange, RateControlMode, SpsPpsStrategy, UsageType, VuiConfig,
};
use openh264::formats::YUVSlices;
use openh264::{OpenH264API, Timestamp};

use super::mux::{self, Sample, Track};
use super::yuv::rgb_to_i420;
use crate::error::guarded;
use crate::Error;

/// Most frames one video may have (Wan makes 81; 1024 is a minute at 16 fps).
pub const MAX_FRAMES: usize = 1024;
/// Frame side limits in pixels: 3840x2160 either way round.
pub const MAX_LONG_SIDE: u32 = 3840;
pub const MAX_SHORT_SIDE: u32 = 2160;
pub const MIN_SIDE: u32 = 16;

/// Frames per second as a fraction: `FrameRate::new(16, 1)`, `FrameRate::new(30000, 1001)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRate {
    pub num: u32,
    pub den: u32,
}

impl FrameRate {
    /// Slowest and fastest rates accepted, in frames per second.
    pub const MIN_FPS: u32 = 1;
    pub const MAX_FPS: u32 = 120;

    pub const fn new(num: u32, den: u32) -> Self {
        FrameRate { num, den }
    }

    /// A whole number of frames per second.
    pub const fn per_second(fps: u32) -> Self {
        FrameRate { num: fps, den: 1 }
    }

    fn as_f64(self) -> f64 {
        f64::from(self.num) / f64::from(self.den)
    }

    fn validate(self) -> Result<(), Error> {
        let (num, den) = (u64::from(self.num), u64::from(self.den));
        let in_range = den > 0
            && num >= u64::from(Self::MIN_FPS) * den
            && num <= u64::from(Self::MAX_FPS) * den
            && self.num <= 1_000_000;
        if !in_range {
            return Err(Error::InvalidOption(format!(
                "fps must be a fraction num/den between {} and {} with num at most 1000000, \
                 got {}/{}",
                Self::MIN_FPS,
                Self::MAX_FPS,
                self.num,
                self.den
            )));
        }
        Ok(())
    }

    /// MP4 ticks per second and per frame: `den / num` seconds a frame exactly. The timescale is
    /// a multiple of `num` of at least 1000, so that times in players that work in
    /// milliseconds stay exact for whole rates.
    fn ticks(self) -> (u32, u32) {
        let k = 1000u32.div_ceil(self.num).max(1);
        // num <= 1e6 and num/den >= 1 keep both under 2^32 (num * k < num + 1000).
        (self.num * k, self.den * k)
    }
}

/// How to encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    pub fps: FrameRate,
    /// H.264 quantiser, [`Self::MIN_QP`]..=51: lower is better and larger.
    pub qp: u8,
    /// A key frame (IDR) every this many frames, so players can seek; 0: the first frame only.
    pub key_frame_interval: u32,
}

impl EncodeOptions {
    /// 20 keeps test patterns above 40 dB PSNR and the files a few times smaller than at 12.
    pub const DEFAULT_QP: u8 = 20;
    /// OpenH264 raises any lower QP to 12.
    pub const MIN_QP: u8 = 12;

    /// The defaults at `fps`: QP 20, a key frame every 2 seconds (rounded up to whole frames).
    pub fn new(fps: FrameRate) -> Self {
        let two_seconds = (2 * u64::from(fps.num)).div_ceil(u64::from(fps.den.max(1)));
        EncodeOptions {
            fps,
            qp: Self::DEFAULT_QP,
            key_frame_interval: u32::try_from(two_seconds).unwrap_or(u32::MAX),
        }
    }

    pub fn validate(&self) -> Result<(), Error> {
        self.fps.validate()?;
        if !(Self::MIN_QP..=51).contains(&self.qp) {
            return Err(Error::InvalidOption(format!(
                "qp must be in {}..=51, got {}",
                Self::MIN_QP,
                self.qp
            )));
        }
        Ok(())
    }
}

/// The MP4 file of `frames` (all the same size), shown `options.fps` a second.
pub fn encode_mp4(frames: &[RgbImage], options: &EncodeOptions) -> Result<Vec<u8>, Error> {
    encode_mp4_with(frames, options, |_, _| ControlFlow::Continue(()))
}

/// [`encode_mp4`], calling `progress(done, total)` after each frame is encoded; returning
/// `ControlFlow::Break` stops encoding with [`Error::Cancelled`].
pub fn encode_mp4_with(
    frames: &[RgbImage],
    options: &EncodeOptions,
    mut progress: impl FnMut(usize, usize) -> ControlFlow<()>,
) -> Result<Vec<u8>, Error> {
    options.validate()?;
    let (width, height) = check_frames(frames)?;
    let (timescale, frame_ticks) = options.fps.ticks();
    let mut encoder = start_encoder(options)?;
    let mut params: Option<(Vec<u8>, Vec<u8>)> = None;
    let mut samples = Vec::with_capacity(frames.len());
    for (i, frame) in frames.iter().enumerate() {
        let i420 = rgb_to_i420(frame);
        let (w, h) = (width as usize, height as usize);
        let (luma, chroma) = i420.split_at(w * h);
        let (cb, cr) = chroma.split_at(w * h / 4);
        let picture = YUVSlices::new((luma, cb, cr), (w, h), (w, w / 2, w / 2));
        let millis = (i as u64 * 1000 * u64::from(options.fps.den)) / u64::from(options.fps.num);
        let sample = guarded("H.264 encoder", || {
            let stream = encoder
                .encode_at(&picture, Timestamp::from_millis(millis))
                .map_err(|e| Error::Encoder(format!("H.264 encoder failed on frame {i}: {e}")))?;
            let sync = match stream.frame_type() {
                FrameType::IDR => true,
                FrameType::I | FrameType::P => false,
                other => {
                    return Err(Error::Encoder(format!(
                        "H.264 encoder gave no picture for frame {i} ({other:?})"
                    )))
                }
            };
            let mut nals = Vec::new();
            for l in 0..stream.num_layers() {
                let Some(layer) = stream.layer(l) else {
                    continue;
                };
                for n in 0..layer.nal_count() {
                    if let Some(nal) = layer.nal_unit(n) {
                        nals.push(strip_start_code(nal).to_vec());
                    }
                }
            }
            frame_sample(i, nals, sync, &mut params)
        })?;
        samples.push(sample);
        if progress(i + 1, frames.len()).is_break() {
            return Err(Error::Cancelled);
        }
    }
    let Some((sps, pps)) = params else {
        return Err(Error::Encoder(
            "H.264 encoder gave no parameter sets (SPS/PPS)".into(),
        ));
    };
    mux::write_mp4(&Track {
        // The limits above keep both under 2^16.
        width: width as u16,
        height: height as u16,
        timescale,
        frame_ticks,
        sps,
        pps,
        samples,
    })
}

/// The frames' common size, or the error saying why they cannot be encoded.
fn check_frames(frames: &[RgbImage]) -> Result<(u32, u32), Error> {
    let Some(first) = frames.first() else {
        return Err(Error::InvalidOption("no frames to encode".into()));
    };
    if frames.len() > MAX_FRAMES {
        return Err(Error::TooLarge(format!(
            "{} frames, over the limit of {MAX_FRAMES}",
            frames.len()
        )));
    }
    let (width, height) = first.dimensions();
    if let Some((i, f)) = frames
        .iter()
        .enumerate()
        .find(|(_, f)| f.dimensions() != (width, height))
    {
        return Err(Error::InvalidOption(format!(
            "frame {i} is {}x{}, frame 0 is {width}x{height}: all frames must be one size",
            f.width(),
            f.height()
        )));
    }
    let (long, short) = (width.max(height), width.min(height));
    if long > MAX_LONG_SIDE || short > MAX_SHORT_SIDE {
        return Err(Error::TooLarge(format!(
            "frames are {width}x{height}, over the limit of {MAX_LONG_SIDE}x{MAX_SHORT_SIDE} \
             (either orientation)"
        )));
    }
    if short < MIN_SIDE || width % 2 != 0 || height % 2 != 0 {
        return Err(Error::InvalidOption(format!(
            "frames are {width}x{height}: H.264 4:2:0 needs an even width and height, each at \
             least {MIN_SIDE}"
        )));
    }
    Ok((width, height))
}

fn start_encoder(options: &EncodeOptions) -> Result<Encoder, Error> {
    // The encoder's rate only steers its rate control (off in effect here) and the level it
    // declares; OpenH264 clamps it to 1..=60.
    let rate = options.fps.as_f64().clamp(1.0, 60.0) as f32;
    let config = EncoderConfig::new()
        // OpenH264 2.7 refuses the non-real-time camera mode; the real-time one is its default.
        .usage_type(UsageType::CameraVideoRealTime)
        // Quality mode with the QP range pinned to one value: a constant QP. (OpenH264's
        // "off" mode takes its QP from a field the crate does not expose.) The bitrate is only
        // a ceiling the pinned QP never consults; frame skipping would drop frames to meet it.
        .rate_control_mode(RateControlMode::Quality)
        .qp(QpRange::new(options.qp, options.qp))
        .bitrate(BitRate::from_bps(50_000_000))
        .skip_frames(false)
        .max_frame_rate(EncoderRate::from_hz(rate))
        .intra_frame_period(IntraFramePeriod::from_num_frames(
            options.key_frame_interval,
        ))
        .sps_pps_strategy(SpsPpsStrategy::ConstantId)
        .complexity(Complexity::High)
        .num_threads(1)
        .adaptive_quantization(false)
        .background_detection(false)
        .scene_change_detect(false)
        .vui(VuiConfig::bt601());
    Encoder::with_api_config(OpenH264API::from_source(), config)
        .map_err(|e| Error::Encoder(format!("H.264 encoder could not start: {e}")))
}

const NAL_SPS: u8 = 7;
const NAL_PPS: u8 = 8;

/// One frame's NAL units as an MP4 sample. Parameter sets go to the sample entry (`avcC`), not
/// the samples: the first ones are kept, and a later IDR must repeat them unchanged.
fn frame_sample(
    i: usize,
    nals: Vec<Vec<u8>>,
    sync: bool,
    params: &mut Option<(Vec<u8>, Vec<u8>)>,
) -> Result<Sample, Error> {
    let mut data = Vec::new();
    let (mut sps, mut pps) = (None, None);
    for nal in nals {
        match nal.first().map(|b| b & 0x1f) {
            None => {}
            Some(NAL_SPS) => sps = Some(nal),
            Some(NAL_PPS) => pps = Some(nal),
            Some(_) => {
                data.extend_from_slice(&(nal.len() as u32).to_be_bytes());
                data.extend_from_slice(&nal);
            }
        }
    }
    match (params.as_ref(), sps, pps) {
        (None, Some(sps), Some(pps)) => *params = Some((sps, pps)),
        (None, _, _) => {
            return Err(Error::Encoder(format!(
                "H.264 encoder's frame {i} came without both an SPS and a PPS"
            )))
        }
        (Some((s0, p0)), sps, pps) => {
            let same = sps.as_ref().is_none_or(|s| s == s0) && pps.as_ref().is_none_or(|p| p == p0);
            if !same {
                return Err(Error::Encoder(format!(
                    "H.264 encoder changed its parameter sets at frame {i}"
                )));
            }
        }
    }
    if data.is_empty() {
        return Err(Error::Encoder(format!(
            "H.264 encoder gave no slice data for frame {i}"
        )));
    }
    Ok(Sample { data, sync })
}

/// A NAL unit without its Annex B start code (OpenH264 writes `00 00 00 01`).
fn strip_start_code(nal: &[u8]) -> &[u8] {
    let zeros = nal.iter().take_while(|&&b| b == 0).count();
    if zeros >= 2 && nal.get(zeros) == Some(&1) {
        &nal[zeros + 1..]
    } else {
        nal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_exact_and_at_least_milliseconds() {
        assert_eq!(FrameRate::per_second(16).ticks(), (1008, 63));
        assert_eq!(FrameRate::per_second(24).ticks(), (1008, 42));
        assert_eq!(FrameRate::per_second(25).ticks(), (1000, 40));
        assert_eq!(FrameRate::new(30000, 1001).ticks(), (30000, 1001));
        assert_eq!(FrameRate::per_second(1).ticks(), (1000, 1000));
    }

    #[test]
    fn start_codes_are_stripped() {
        assert_eq!(strip_start_code(&[0, 0, 0, 1, 0x67, 0x42]), &[0x67, 0x42]);
        assert_eq!(strip_start_code(&[0, 0, 1, 0x68]), &[0x68]);
        assert_eq!(strip_start_code(&[0x65, 0, 0, 1]), &[0x65, 0, 0, 1]);
    }

    #[test]
    fn parameter_sets_leave_the_samples() {
        let mut params = None;
        let first = vec![vec![0x67, 1], vec![0x68, 2], vec![0x65, 3, 4]];
        let s = frame_sample(0, first, true, &mut params).unwrap();
        assert_eq!(s.data, [0, 0, 0, 3, 0x65, 3, 4]);
        assert_eq!(params, Some((vec![0x67, 1], vec![0x68, 2])));
        // A later IDR repeating them is fine; a changed SPS is an error.
        let again = vec![vec![0x67, 1], vec![0x68, 2], vec![0x65, 5]];
        assert!(frame_sample(5, again, true, &mut params).is_ok());
        let changed = vec![vec![0x67, 9], vec![0x65, 5]];
        assert!(matches!(
            frame_sample(6, changed, true, &mut params),
            Err(Error::Encoder(_))
        ));
        // The first frame must bring both.
        let mut none = None;
        assert!(frame_sample(0, vec![vec![0x65, 1]], true, &mut none).is_err());
    }
}
