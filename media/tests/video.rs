//! Video sampling on the files in tests/data/media (made by scripts/media/make_test_media.py):
//! every frame there is one solid colour given by its frame index (`colour` below, the same
//! formula as the script's), so a sampled frame's colour says which source frame it is.

use std::path::PathBuf;

use weft_media::video::{
    sample_frames, sample_frames_from_file, Frame, SampleOptions, VideoLimits,
};
use weft_media::Error;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/media")
        .join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(data(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn colour(i: usize) -> [u8; 3] {
    [
        (28 + (60 + 97 * i) % 200) as u8,
        (28 + (20 + 151 * i) % 200) as u8,
        (28 + (140 + 59 * i) % 200) as u8,
    ]
}

fn opts(fps: f64, max_frames: usize) -> SampleOptions {
    SampleOptions::new(Some(fps), Some(max_frames)).unwrap()
}

fn mean_rgb(frame: &Frame) -> [f64; 3] {
    let mut sum = [0f64; 3];
    for p in frame.image.pixels() {
        for c in 0..3 {
            sum[c] += f64::from(p[c]);
        }
    }
    let n = f64::from(frame.image.width() * frame.image.height());
    sum.map(|s| s / n)
}

/// Each frame is the source frame `expected[k]` of a `fps`-frame-per-second video: its index,
/// its time and its colour (lossy coding and YUV 4:2:0 leave a few levels of error; neighbouring
/// frames differ by at least 40 in some channel).
fn assert_frames(frames: &[Frame], expected: &[usize], source_fps: f64, size: (u32, u32)) {
    let got: Vec<usize> = frames.iter().map(|f| f.index).collect();
    assert_eq!(got, expected, "source frames picked");
    for f in frames {
        assert_eq!(f.image.dimensions(), size);
        let want_t = f.index as f64 / source_fps;
        assert!(
            (f.time_s - want_t).abs() < 1e-6,
            "frame {} at {} s, expected {want_t}",
            f.index,
            f.time_s
        );
        let mean = mean_rgb(f);
        let want = colour(f.index);
        for c in 0..3 {
            assert!(
                (mean[c] - f64::from(want[c])).abs() < 8.0,
                "frame {}: colour {mean:?}, expected {want:?}",
                f.index
            );
        }
    }
}

#[test]
fn defaults_take_one_frame_a_second() {
    let frames = sample_frames(
        &read("h264_baseline.mp4"),
        &SampleOptions::default(),
        &VideoLimits::default(),
    )
    .unwrap();
    // 4 s at 8 fps: frames 0, 8, 16, 24 at 0, 1, 2, 3 s.
    assert_frames(&frames, &[0, 8, 16, 24], 8.0, (64, 48));
}

#[test]
fn fps_picks_the_frame_on_screen() {
    let frames = sample_frames(
        &read("h264_baseline.mp4"),
        &opts(3.0, 64),
        &VideoLimits::default(),
    )
    .unwrap();
    // Times k/3 s for k < 12; the frame on screen at t is floor(8 t).
    let expected: Vec<usize> = (0..12).map(|k| (k * 8) / 3).collect();
    assert_frames(&frames, &expected, 8.0, (64, 48));
}

#[test]
fn every_frame_across_key_frames() {
    let frames = sample_frames(
        &read("h264_baseline.mp4"),
        &opts(60.0, 64),
        &VideoLimits::default(),
    )
    .unwrap();
    assert_frames(&frames, &(0..32).collect::<Vec<_>>(), 8.0, (64, 48));
}

#[test]
fn over_max_frames_spreads_evenly() {
    let frames = sample_frames(
        &read("h264_baseline.mp4"),
        &opts(8.0, 5),
        &VideoLimits::default(),
    )
    .unwrap();
    // 32 times would be needed: 5 at k * 4 s / 5 = 0, 0.8, 1.6, 2.4, 3.2 s instead.
    assert_frames(&frames, &[0, 6, 12, 19, 25], 8.0, (64, 48));
}

#[test]
fn b_frames_come_back_in_display_order() {
    // High profile with B-frames: decode order differs from display order.
    let bytes = read("h264_bframes.mp4");
    let all = sample_frames(&bytes, &opts(60.0, 64), &VideoLimits::default()).unwrap();
    assert_frames(&all, &(0..30).collect::<Vec<_>>(), 10.0, (48, 32));
    // Frames reached by runs that stop short of the next key frame.
    let some = sample_frames(&bytes, &opts(3.0, 64), &VideoLimits::default()).unwrap();
    let expected: Vec<usize> = (0..9).map(|k| (k * 10) / 3).collect();
    assert_frames(&some, &expected, 10.0, (48, 32));
}

#[test]
fn from_a_file() {
    let frames = sample_frames_from_file(
        &data("h264_baseline.mp4"),
        &opts(1.0, 2),
        &VideoLimits::default(),
    )
    .unwrap();
    // 4 frames would be needed at 1 fps: 2 at 0 and 2 s.
    assert_frames(&frames, &[0, 16], 8.0, (64, 48));
    let small = VideoLimits {
        max_bytes: 100,
        ..VideoLimits::default()
    };
    let err = sample_frames_from_file(&data("h264_baseline.mp4"), &opts(1.0, 2), &small);
    assert!(matches!(err, Err(Error::TooLarge(_))), "{err:?}");
}

#[test]
fn options_out_of_range_are_refused() {
    for fps in [0.0, -1.0, 60.5, f64::NAN, f64::INFINITY] {
        let err = SampleOptions::new(Some(fps), None);
        assert!(
            matches!(&err, Err(Error::InvalidOption(m)) if m.contains("fps")),
            "{fps}: {err:?}"
        );
    }
    for n in [0, 65] {
        let err = SampleOptions::new(None, Some(n));
        assert!(
            matches!(&err, Err(Error::InvalidOption(m)) if m.contains("max_frames")),
            "{n}: {err:?}"
        );
    }
    assert_eq!(
        SampleOptions::new(None, None).unwrap(),
        SampleOptions {
            fps: 1.0,
            max_frames: 16
        }
    );
    assert!(SampleOptions::new(Some(60.0), Some(64)).is_ok());
    // Options built by hand are checked too.
    let bad = SampleOptions {
        fps: 0.0,
        max_frames: 16,
    };
    let err = sample_frames(&read("h264_baseline.mp4"), &bad, &VideoLimits::default());
    assert!(matches!(err, Err(Error::InvalidOption(_))), "{err:?}");
}

fn unsupported(bytes: &[u8]) -> (String, String) {
    match sample_frames(bytes, &SampleOptions::default(), &VideoLimits::default()) {
        Err(e @ Error::UnsupportedCodec { .. }) => {
            assert!(e.is_unsupported());
            let Error::UnsupportedCodec { container, codec } = e else {
                unreachable!()
            };
            (container, codec)
        }
        other => panic!("expected an unsupported codec, got {other:?}"),
    }
}

#[test]
fn other_codecs_are_named() {
    let (container, codec) = unsupported(&read("mpeg4_part2.mp4"));
    assert_eq!(
        (container.as_str(), codec.as_str()),
        ("MP4", "MPEG-4 Part 2 (mp4v)")
    );
    let (container, codec) = unsupported(&read("hevc.mp4"));
    assert_eq!(
        (container.as_str(), codec.as_str()),
        ("MP4", "HEVC/H.265 (hev1)")
    );
    // H.264 profiles OpenH264 does not decode are named too.
    let (_, codec) = unsupported(&read("h264_444.mp4"));
    assert_eq!(codec, "H.264 4:4:4 (High 4:4:4)");
    let (_, codec) = unsupported(&read("h264_10bit.mp4"));
    assert_eq!(codec, "H.264 10-bit (High 10 or above)");
    let (container, codec) = unsupported(&read("vp9.webm"));
    assert_eq!((container.as_str(), codec.as_str()), ("WebM", "VP9"));
    let message = Error::UnsupportedCodec { container, codec }.to_string();
    assert!(message.contains("VP9"), "{message}");
}

#[test]
fn truncated_or_damaged_files_are_errors() {
    let bytes = read("h264_baseline.mp4");
    for cut in [0, 7, 100, bytes.len() / 2, bytes.len() - 1] {
        let err = sample_frames(
            &bytes[..cut],
            &SampleOptions::default(),
            &VideoLimits::default(),
        );
        assert!(
            matches!(err, Err(Error::Corrupt(_))),
            "cut at {cut} of {}: {err:?}",
            bytes.len()
        );
    }
    // A damaged avcC box inside an avc1 entry is damage, not "unsupported codec H.264".
    let at = bytes
        .windows(4)
        .position(|w| w == b"avcC")
        .expect("avcC box");
    let mut no_avcc = bytes.clone();
    no_avcc[at + 3] = b'X';
    let err = sample_frames(&no_avcc, &SampleOptions::default(), &VideoLimits::default());
    assert!(
        matches!(&err, Err(Error::Corrupt(m)) if m.contains("avc1")),
        "{err:?}"
    );
    // Bytes flipped all through the file, the sample data included: an error or frames, never
    // a panic or a hang.
    for step in [7, 31, 101] {
        let mut damaged = bytes.clone();
        for i in (0..damaged.len()).step_by(step) {
            damaged[i] ^= 0x5a;
        }
        let _ = sample_frames(&damaged, &opts(60.0, 64), &VideoLimits::default());
    }
}

#[test]
fn limits_are_checked_before_decoding() {
    let bytes = read("h264_baseline.mp4");
    let narrow = VideoLimits {
        max_width: 32,
        ..VideoLimits::default()
    };
    let err = sample_frames(&bytes, &SampleOptions::default(), &narrow);
    assert!(
        matches!(&err, Err(Error::TooLarge(m)) if m.contains("64x48")),
        "{err:?}"
    );
    let few = VideoLimits {
        max_samples: 10,
        ..VideoLimits::default()
    };
    let err = sample_frames(&bytes, &SampleOptions::default(), &few);
    assert!(
        matches!(&err, Err(Error::TooLarge(m)) if m.contains("32 frames")),
        "{err:?}"
    );
    // Every frame needs 32 decoded; the defaults need only the 4 key frames. The budget counts
    // pixels of the coded 64x48 frames.
    let short = VideoLimits {
        max_decoded_pixels: 5 * 64 * 48,
        ..VideoLimits::default()
    };
    let err = sample_frames(&bytes, &opts(60.0, 64), &short);
    assert!(
        matches!(&err, Err(Error::TooLarge(m)) if m.contains("32 frames decoded (98304 pixels)")),
        "{err:?}"
    );
    assert_eq!(
        sample_frames(&bytes, &SampleOptions::default(), &short)
            .unwrap()
            .len(),
        4
    );
}

#[test]
fn probe_reads_headers_only() {
    use weft_media::video::{probe, VideoInfo};
    let info = probe(
        &read("h264_baseline.mp4"),
        &opts(3.0, 64),
        &VideoLimits::default(),
    )
    .unwrap();
    let want = VideoInfo {
        width: 64,
        height: 48,
        duration_s: 4.0,
        frame_count: 32,
        sampled: 12,
    };
    assert_eq!(info, want);
    let info = probe(
        &read("h264_bframes.mp4"),
        &opts(1.0, 2),
        &VideoLimits::default(),
    )
    .unwrap();
    assert_eq!(
        (info.frame_count, info.sampled, info.duration_s),
        (30, 2, 3.0)
    );
    assert!(probe(
        &read("hevc.mp4"),
        &SampleOptions::default(),
        &VideoLimits::default()
    )
    .unwrap_err()
    .is_unsupported());
    // The SPS is read too: 10-bit H.264 is refused by the probe as by sampling.
    let err = probe(
        &read("h264_10bit.mp4"),
        &SampleOptions::default(),
        &VideoLimits::default(),
    );
    assert!(err.unwrap_err().is_unsupported());
}

/// The moving frame's lower part (rows 16..): see scripts/media/make_test_media.py.
fn moving_pixel(i: usize, x: usize, y: usize) -> [u8; 3] {
    [
        ((x + 16 * i) % 256) as u8,
        ((3 * y + 7 * i) % 256) as u8,
        (((x / 16 + y / 16 + i / 10) % 2) * 200 + 20) as u8,
    ]
}

#[test]
fn high_profile_with_motion_decodes_right() {
    // x264's default tools (CABAC, 8x8 transform, weighted prediction, B-pyramid), one key frame.
    let bytes = read("h264_high_moving.mp4");
    let frames = sample_frames(&bytes, &opts(60.0, 64), &VideoLimits::default()).unwrap();
    assert_eq!(frames.len(), 60);
    for f in &frames {
        assert_eq!(f.image.dimensions(), (128, 72));
        assert!((f.time_s - f.index as f64 / 30.0).abs() < 1e-6);
        // Which frame: the solid band on top.
        let band = f.image.get_pixel(64, 8).0;
        let want = colour(f.index);
        for c in 0..3 {
            assert!(
                band[c].abs_diff(want[c]) <= 10,
                "frame {}: band {band:?}, expected {want:?}",
                f.index
            );
        }
        // Decoded right: the moving texture below it within coding loss (a decoding error or a
        // wrong reference shows as tens of levels).
        let mut err = 0u64;
        let mut n = 0u64;
        for y in 24..72 {
            for x in 0..128 {
                let got = f.image.get_pixel(x as u32, y as u32).0;
                let want = moving_pixel(f.index, x, y);
                err += (0..3)
                    .map(|c| u64::from(got[c].abs_diff(want[c])))
                    .sum::<u64>();
                n += 3;
            }
        }
        let mean = err as f64 / n as f64;
        assert!(
            mean < 8.0,
            "frame {}: mean error {mean:.2} against its source",
            f.index
        );
    }
    // The defaults on 2 s: frames 0 and 30.
    let two = sample_frames(&bytes, &SampleOptions::default(), &VideoLimits::default()).unwrap();
    assert_eq!(two.iter().map(|f| f.index).collect::<Vec<_>>(), [0, 30]);
}
