//! `video::encode_mp4`: frames into MP4/H.264, checked by decoding the file again, with this
//! crate's decoder (mp4parse + OpenH264) and with PyAV (FFmpeg, scripts/media/pyav_decode.py),
//! against the raw frames by PSNR.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::Command;

use image::{Rgb, RgbImage};
use weft_media::video::{
    encode_mp4, encode_mp4_with, probe, sample_frames, EncodeOptions, FrameRate, SampleOptions,
    VideoLimits,
};
use weft_media::Error;

/// Least PSNR (dB) a decoded frame may have against its source (issue #35's bound).
const MIN_PSNR: f64 = 35.0;

/// A smooth diagonal gradient in all three channels that drifts a little each frame.
fn gradient(i: usize, w: u32, h: u32) -> RgbImage {
    RgbImage::from_fn(w, h, |x, y| {
        let t = i as f64;
        let fx = x as f64 / w as f64;
        let fy = y as f64 / h as f64;
        Rgb([
            (30.0 + 190.0 * fx + 2.0 * t).min(255.0) as u8,
            (30.0 + 190.0 * fy) as u8,
            (220.0 - 150.0 * (fx + fy) / 2.0 + t) as u8,
        ])
    })
}

/// A moving scene: a soft sinusoidal background that scrolls 3 px a frame, a yellow disc
/// crossing it 5 px a frame, and a grey checkerboard strip (sharp luma edges) shifting 2 px a
/// frame: motion, edges and texture for the encoder's inter prediction. The disc's colour edge
/// is a 4-pixel blend, as in camera or diffusion output: 4:2:0 keeps one chroma sample per 2x2
/// block, so a hard one-pixel edge between saturated colours loses to chroma subsampling alone
/// (about 35.6 dB with this disc, before any coding), whatever the encoder does.
fn moving(i: usize, w: u32, h: u32) -> RgbImage {
    let t = i as f64;
    let (cx, cy, r) = (20.0 + 5.0 * t, h as f64 / 2.0, h as f64 / 6.0);
    RgbImage::from_fn(w, h, |x, y| {
        if y >= h - h / 8 {
            let on = ((x + 2 * i as u32) / 8 + y / 8).is_multiple_of(2);
            return if on {
                Rgb([220, 220, 220])
            } else {
                Rgb([40, 40, 40])
            };
        }
        let (xf, yf) = (x as f64, y as f64);
        let s = ((xf + 3.0 * t) / 23.0).sin() * (yf / 31.0).cos();
        let background = [
            128.0 + 90.0 * s,
            100.0 + 60.0 * ((xf + yf + 3.0 * t) / 40.0).sin(),
            140.0 - 80.0 * s,
        ];
        let d = ((xf - cx).powi(2) + (yf - cy).powi(2)).sqrt();
        let a = ((r + 2.0 - d) / 4.0).clamp(0.0, 1.0);
        let disc = [230.0, 200.0, 40.0];
        Rgb([0, 1, 2].map(|c| (a * disc[c] + (1.0 - a) * background[c]).round() as u8))
    })
}

/// The gradient with grain: uniform noise in -12..=12, one value per pixel added to all three
/// channels (luma noise, as sensor grain). Noise drawn independently per channel is chroma noise
/// that 4:2:0 averages away: at this amplitude subsampling alone leaves about 33 dB.
fn grain(i: usize, w: u32, h: u32) -> RgbImage {
    let base = gradient(i, w, h);
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ i as u64;
    RgbImage::from_fn(w, h, |x, y| {
        // A 64-bit LCG (Knuth's MMIX constants): the same noise on every run.
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let n = ((state >> 33) % 25) as i32 - 12;
        let p = base.get_pixel(x, y);
        Rgb(p.0.map(|v| (i32::from(v) + n).clamp(0, 255) as u8))
    })
}

type Pattern = fn(usize, u32, u32) -> RgbImage;

const PATTERNS: [(&str, Pattern); 3] =
    [("gradient", gradient), ("moving", moving), ("grain", grain)];

/// PSNR over all three channels, in dB (infinite for identical images).
fn psnr(a: &RgbImage, b: &RgbImage) -> f64 {
    assert_eq!(a.dimensions(), b.dimensions());
    let sum: f64 = a
        .as_raw()
        .iter()
        .zip(b.as_raw())
        .map(|(&p, &q)| (f64::from(p) - f64::from(q)).powi(2))
        .sum();
    let mse = sum / a.as_raw().len() as f64;
    10.0 * (255.0f64 * 255.0 / mse).log10()
}

fn frames(pattern: Pattern, n: usize, w: u32, h: u32) -> Vec<RgbImage> {
    (0..n).map(|i| pattern(i, w, h)).collect()
}

/// Every frame of `bytes` through this crate's decoder.
fn decode_all(bytes: &[u8]) -> Vec<weft_media::video::Frame> {
    let every = SampleOptions::new(
        Some(SampleOptions::MAX_FPS),
        Some(SampleOptions::MAX_FRAMES),
    )
    .unwrap();
    sample_frames(bytes, &every, &VideoLimits::default()).unwrap()
}

/// The least and mean PSNR of `decoded` against `source`, asserting every frame's bound.
fn check_psnr(what: &str, source: &[RgbImage], decoded: &[RgbImage]) -> (f64, f64) {
    assert_eq!(decoded.len(), source.len(), "{what}: frame count");
    let values: Vec<f64> = source
        .iter()
        .zip(decoded)
        .map(|(s, d)| psnr(s, d))
        .collect();
    for (i, p) in values.iter().enumerate() {
        assert!(*p >= MIN_PSNR, "{what}: frame {i} at {p:.2} dB PSNR");
    }
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    eprintln!("{what}: PSNR min {min:.2} dB, mean {mean:.2} dB");
    (min, mean)
}

#[test]
fn round_trip_through_the_crates_decoder() {
    let options = EncodeOptions::new(FrameRate::per_second(16));
    for (name, pattern) in PATTERNS {
        let source = frames(pattern, 33, 256, 256);
        let bytes = encode_mp4(&source, &options).unwrap();
        eprintln!("{name}: 33 frames 256x256 -> {} bytes", bytes.len());
        let decoded = decode_all(&bytes);
        // Every frame, in order, at k/16 s.
        for (k, f) in decoded.iter().enumerate() {
            assert_eq!(f.index, k);
            assert_eq!(f.image.dimensions(), (256, 256));
            assert!(
                (f.time_s - k as f64 / 16.0).abs() < 1e-9,
                "{name} {k}: {}",
                f.time_s
            );
        }
        let images: Vec<RgbImage> = decoded.into_iter().map(|f| f.image).collect();
        check_psnr(name, &source, &images);
        // The default key frame interval, 2 s: frames 0 and 32.
        assert_eq!(sync_samples(&bytes), [1, 33]);
        // The headers: 33 frames over 33/16 s.
        let info = probe(&bytes, &SampleOptions::default(), &VideoLimits::default()).unwrap();
        assert_eq!((info.width, info.height, info.frame_count), (256, 256, 33));
        assert!((info.duration_s - 33.0 / 16.0).abs() < 1e-9);
    }
}

#[test]
fn sizes_off_the_macroblock_grid_are_cropped_back() {
    // 250x142 is coded as 256x144 and cropped by the SPS.
    let source = frames(gradient, 4, 250, 142);
    let bytes = encode_mp4(&source, &EncodeOptions::new(FrameRate::per_second(16))).unwrap();
    let decoded: Vec<RgbImage> = decode_all(&bytes).into_iter().map(|f| f.image).collect();
    assert!(decoded.iter().all(|d| d.dimensions() == (250, 142)));
    check_psnr("gradient 250x142", &source, &decoded);
}

#[test]
fn a_lower_qp_is_closer_and_larger() {
    let source = frames(moving, 8, 128, 96);
    let at = |qp| {
        let options = EncodeOptions {
            qp,
            ..EncodeOptions::new(FrameRate::per_second(24))
        };
        let bytes = encode_mp4(&source, &options).unwrap();
        let decoded: Vec<RgbImage> = decode_all(&bytes).into_iter().map(|f| f.image).collect();
        let mean = source
            .iter()
            .zip(&decoded)
            .map(|(s, d)| psnr(s, d))
            .sum::<f64>()
            / source.len() as f64;
        (bytes.len(), mean)
    };
    let (small, worse) = at(32);
    let (large, better) = at(16);
    assert!(
        large > small && better > worse + 3.0,
        "QP 32: {small} B {worse:.2} dB; QP 16: {large} B {better:.2} dB"
    );
}

#[test]
fn the_same_frames_give_the_same_bytes() {
    let source = frames(moving, 12, 160, 96);
    let options = EncodeOptions::new(FrameRate::new(30000, 1001));
    let a = encode_mp4(&source, &options).unwrap();
    let b = encode_mp4(&source, &options).unwrap();
    assert!(
        a == b,
        "two encodes differ ({} and {} bytes)",
        a.len(),
        b.len()
    );
    // And the frames decide the bytes: one changed pixel changes the file.
    let mut changed = source.clone();
    changed[5].put_pixel(0, 0, Rgb([255, 0, 255]));
    assert_ne!(encode_mp4(&changed, &options).unwrap(), a);
}

#[test]
fn fractional_rates_and_key_frames() {
    let source = frames(gradient, 10, 64, 48);
    let options = EncodeOptions {
        key_frame_interval: 4,
        ..EncodeOptions::new(FrameRate::new(30000, 1001))
    };
    let bytes = encode_mp4(&source, &options).unwrap();
    let decoded = decode_all(&bytes);
    assert_eq!(decoded.len(), 10);
    for (k, f) in decoded.iter().enumerate() {
        let want = k as f64 * 1001.0 / 30000.0;
        assert!((f.time_s - want).abs() < 1e-9, "frame {k} at {}", f.time_s);
    }
    // Key frames at 0, 4 and 8: the sync sample table lists samples 1, 5 and 9.
    assert_eq!(sync_samples(&bytes), [1, 5, 9]);
}

/// The entries of the file's `stss` box (1-based sample numbers of the key frames).
fn sync_samples(file: &[u8]) -> Vec<u32> {
    let at = file
        .windows(4)
        .position(|w| w == b"stss")
        .expect("an stss box");
    let word = |i: usize| u32::from_be_bytes(file[i..i + 4].try_into().unwrap());
    // type, version/flags, entry count, entries.
    let count = word(at + 8) as usize;
    (0..count).map(|k| word(at + 12 + 4 * k)).collect()
}

#[test]
fn progress_is_reported_and_can_cancel() {
    let source = frames(gradient, 6, 32, 32);
    let options = EncodeOptions::new(FrameRate::per_second(8));
    let mut seen = Vec::new();
    encode_mp4_with(&source, &options, |done, total| {
        seen.push((done, total));
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(seen, (1..=6).map(|d| (d, 6)).collect::<Vec<_>>());
    let mut calls = 0;
    let err = encode_mp4_with(&source, &options, |done, _| {
        calls += 1;
        if done == 3 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    assert!(matches!(err, Err(Error::Cancelled)), "{err:?}");
    assert_eq!(calls, 3);
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let options = EncodeOptions::new(FrameRate::per_second(16));
    let invalid = |frames: &[RgbImage], options: &EncodeOptions, needle: &str| match encode_mp4(
        frames, options,
    ) {
        Err(Error::InvalidOption(m)) => assert!(m.contains(needle), "{m}"),
        other => panic!("expected InvalidOption with {needle:?}, got {other:?}"),
    };
    let too_large = |frames: &[RgbImage], needle: &str| match encode_mp4(frames, &options) {
        Err(Error::TooLarge(m)) => assert!(m.contains(needle), "{m}"),
        other => panic!("expected TooLarge with {needle:?}, got {other:?}"),
    };
    let blank = |w, h| RgbImage::new(w, h);
    invalid(&[], &options, "no frames");
    invalid(&[blank(255, 256)], &options, "255x256");
    invalid(&[blank(40, 31)], &options, "even width and height");
    invalid(&[blank(8, 8)], &options, "at least 16");
    invalid(
        &[blank(32, 32), blank(32, 48)],
        &options,
        "frame 1 is 32x48",
    );
    too_large(&vec![blank(16, 16); 1025], "1025 frames");
    too_large(&[blank(4096, 16)], "4096x16");
    too_large(&[blank(2176, 2176)], "2176x2176");
    let one = [blank(16, 16)];
    for (num, den) in [(0, 1), (1, 0), (121, 1), (1, 2), (2_000_000, 2_000_000)] {
        let bad = EncodeOptions::new(FrameRate::new(num, den));
        invalid(&one, &bad, "fps");
    }
    for qp in [0, 11, 52] {
        invalid(&one, &EncodeOptions { qp, ..options }, "qp");
    }
    // The edges of the accepted ranges encode.
    let portrait = [blank(2160, 3840)];
    assert!(encode_mp4(&portrait, &EncodeOptions { qp: 51, ..options }).is_ok());
    let slow = EncodeOptions::new(FrameRate::new(1, 1));
    let fast = EncodeOptions::new(FrameRate::new(120, 1));
    assert!(encode_mp4(&one, &slow).is_ok() && encode_mp4(&one, &fast).is_ok());
}

// ---- PyAV (FFmpeg) as an independent decoder ----

/// Whether `python3` has PyAV and numpy; outside CI a missing one skips loudly, under CI it fails.
fn pyav_ready() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import av, numpy"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("python3 with PyAV (`av`) is required under CI (pip install -r scripts/requirements-test.txt)");
        }
        eprintln!("\n*** SKIPPING: python3 has no PyAV (`av`); pip install -r scripts/requirements-test.txt ***\n");
    }
    ok
}

/// What scripts/media/pyav_decode.py reports: its `name value...` lines, and the frames.
struct PyAv {
    lines: Vec<(String, String)>,
    frames: Vec<RgbImage>,
}

impl PyAv {
    fn get(&self, name: &str) -> &str {
        self.lines
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("pyav_decode.py printed no {name}"))
    }

    fn numbers(&self, name: &str) -> Vec<f64> {
        self.get(name)
            .split_whitespace()
            .map(|v| v.parse().unwrap())
            .collect()
    }
}

fn pyav_decode(bytes: &[u8], tag: &str) -> PyAv {
    let dir = std::env::temp_dir().join(format!("weft-encode-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (video, raw) = (dir.join("video.mp4"), dir.join("frames.rgb"));
    std::fs::write(&video, bytes).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/media/pyav_decode.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&video)
        .arg(&raw)
        .output()
        .expect("running python3");
    assert!(
        out.status.success(),
        "pyav_decode.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (n, v) = l.split_once(' ').unwrap_or((l, ""));
            (n.to_string(), v.to_string())
        })
        .collect();
    let mut result = PyAv {
        lines,
        frames: Vec::new(),
    };
    let (w, h) = (
        result.get("width").parse::<u32>().unwrap(),
        result.get("height").parse::<u32>().unwrap(),
    );
    let data = std::fs::read(&raw).unwrap();
    let size = (w * h * 3) as usize;
    assert_eq!(data.len() % size, 0);
    result.frames = data
        .chunks(size)
        .map(|c| RgbImage::from_raw(w, h, c.to_vec()).unwrap())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[test]
fn pyav_decodes_the_file_to_the_frames() {
    if !pyav_ready() {
        return;
    }
    for (name, pattern) in PATTERNS {
        let source = frames(pattern, 33, 256, 256);
        let options = EncodeOptions::new(FrameRate::per_second(16));
        let bytes = encode_mp4(&source, &options).unwrap();
        let got = pyav_decode(&bytes, name);
        assert_eq!(got.get("codec"), "h264");
        assert_eq!(got.get("pix_fmt"), "yuv420p");
        assert_eq!((got.get("width"), got.get("height")), ("256", "256"));
        assert_eq!(got.get("rate"), "16 1");
        // The VUI's BT.601 (SMPTE 170M = 6) limited ("MPEG" = 1) range reached FFmpeg.
        assert_eq!((got.get("colorspace"), got.get("color_range")), ("6", "1"));
        let times = got.numbers("times");
        assert_eq!(times.len(), 33);
        for (k, t) in times.iter().enumerate() {
            assert!(
                (t - k as f64 / 16.0).abs() < 1e-6,
                "{name} frame {k} at {t} s"
            );
        }
        // A key frame every 2 s (32 frames at 16 fps): frames 0 and 32.
        let keys: Vec<usize> = (got.numbers("key_frames").iter().enumerate())
            .filter(|(_, &k)| k == 1.0)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(keys, [0, 32]);
        check_psnr(&format!("{name} (PyAV)"), &source, &got.frames);
    }
}
