//! `weft video` through the built binary on the tiny Wan models (tests/data/video): the MP4 it
//! writes decodes with PyAV (FFmpeg, scripts/media/pyav_decode.py) to the frames the pipeline
//! makes in process for the same request (PSNR >= 35 dB), the same seed gives the same bytes,
//! image-to-video takes a first frame, and bad requests fail with a reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use weft_core::diffusion::{Companions, Control, VideoRequest, WanPipeline};
use weft_tests::weft_binary;

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/video")
        .join(rel)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-video-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

const PROMPT: &str = "A red fox runs through fresh snow at dawn.";

/// `weft video` on `model` at 64x48, 5 frames, 3 steps, seed 11; `extra` adds flags or
/// replaces those.
fn video(model: &str, out: &Path, extra: &[&str]) -> Output {
    let model = data(model);
    let mut args = vec![
        "video".to_string(),
        "--model".into(),
        model.display().to_string(),
        "--prompt".into(),
        PROMPT.into(),
        "--negative-prompt".into(),
        "blurry, static, low quality".into(),
        "-o".into(),
        out.display().to_string(),
    ];
    for (flag, value) in [
        ("--width", "64"),
        ("--height", "48"),
        ("--frames", "5"),
        ("--steps", "3"),
        ("--seed", "11"),
    ] {
        if !extra.contains(&flag) {
            args.extend([flag.to_string(), value.to_string()]);
        }
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    Command::new(weft_binary())
        .args(&args)
        .output()
        .expect("running weft video")
}

fn ok(o: &Output) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "weft video failed:\n{stderr}");
    stderr
}

/// Whether python3 has PyAV; outside CI a missing one skips loudly, under CI it fails.
fn pyav_ready() -> bool {
    let ready = Command::new("python3")
        .args(["-c", "import av, numpy"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ready {
        if std::env::var_os("CI").is_some() {
            panic!("python3 with PyAV (`av`) is required under CI (scripts/requirements-test.txt)");
        }
        eprintln!("\n*** SKIPPING the PyAV checks: python3 has no `av` ***\n");
    }
    ready
}

/// The file decoded by PyAV: its `name value` lines and the RGB frames back to back.
fn pyav(mp4: &Path) -> (String, Vec<u8>) {
    let raw = mp4.with_extension("rgb");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/media/pyav_decode.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(mp4)
        .arg(&raw)
        .output()
        .expect("running python3");
    assert!(
        o.status.success(),
        "pyav_decode.py: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        std::fs::read(raw).unwrap(),
    )
}

fn psnr_of(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let mse = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>() / a.len() as f64;
    10.0 * (255.0f64 * 255.0 / mse.max(1e-12)).log10()
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let f = |v: &[u8]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
    psnr_of(&f(a), &f(b))
}

/// BT.601 luma of RGB pixels.
fn luma(rgb: &[u8]) -> Vec<f64> {
    rgb.chunks_exact(3)
        .map(|p| 0.299 * f64::from(p[0]) + 0.587 * f64::from(p[1]) + 0.114 * f64::from(p[2]))
        .collect()
}

fn fact<'a>(lines: &'a str, name: &str) -> &'a str {
    lines
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in\n{lines}"))
}

#[test]
fn t2v_mp4_decodes_to_the_pipeline_frames() {
    let out = scratch("t2v.mp4");
    let started = std::time::Instant::now();
    let log = ok(&video("tiny-wan/t2v", &out, &["--fps", "16"]));
    eprintln!(
        "weft video (tiny t2v, 64x48, 5 frames, 3 steps): {:.2} s\n{log}",
        started.elapsed().as_secs_f64()
    );
    assert!(log.contains("seed 11"), "{log}");
    let bytes = std::fs::read(&out).unwrap();

    // The same request in process: the frames the MP4 should hold.
    let pipeline = WanPipeline::load(&data("tiny-wan/t2v"), &Companions::default()).unwrap();
    let request = VideoRequest {
        prompt: PROMPT.into(),
        negative_prompt: Some("blurry, static, low quality".into()),
        width: Some(64),
        height: Some(48),
        frames: Some(5),
        steps: Some(3),
        seed: 11,
        ..Default::default()
    };
    let want = pipeline
        .generate(&request, &mut |_| Control::Continue)
        .unwrap();
    assert_eq!((want.width, want.height, want.frames), (64, 48, 5));

    // Same seed, same bytes.
    let again = scratch("t2v-again.mp4");
    ok(&video("tiny-wan/t2v", &again, &["--fps", "16"]));
    assert_eq!(std::fs::read(&again).unwrap(), bytes);

    if !pyav_ready() {
        return;
    }
    let (facts, frames) = pyav(&out);
    assert_eq!(fact(&facts, "codec"), "h264", "{facts}");
    assert_eq!(fact(&facts, "width"), "64");
    assert_eq!(fact(&facts, "height"), "48");
    assert_eq!(frames.len(), want.rgb.len(), "5 frames of 64x48 RGB");
    // The tiny random-weight model's frames are close to noise: 4:2:0 chroma alone limits
    // their RGB PSNR to about 30 dB (the reference's own frames: 30.0 dB after a perfect
    // 4:2:0 round trip), so the encoder is held to 35 dB on luma, which H.264 keeps whole.
    let p = psnr(&frames, &want.rgb);
    let y = psnr_of(&luma(&frames), &luma(&want.rgb));
    eprintln!("PyAV-decoded frames against the pipeline's: PSNR {p:.1} dB RGB, {y:.1} dB luma");
    assert!(y >= 35.0, "luma PSNR {y}");
    assert!(p >= 25.0, "RGB PSNR {p}");
    // A different seed is a different video (the comparison above can tell them apart).
    let other = scratch("t2v-other.mp4");
    ok(&video(
        "tiny-wan/t2v",
        &other,
        &["--fps", "16", "--seed", "12"],
    ));
    let (_, other_frames) = pyav(&other);
    assert!(psnr(&other_frames, &want.rgb) < p - 3.0);
}

#[test]
fn i2v_takes_a_first_frame() {
    let out = scratch("i2v.mp4");
    let image = data("ref/first_frame.png");
    // The i2v folder has no text encoder, tokenizer or VAE: found in the sibling t2v folder.
    let log = ok(&video(
        "tiny-wan/i2v",
        &out,
        &["--image", &image.display().to_string(), "--cfg2", "3"],
    ));
    assert!(log.contains("/ 3"), "two experts, cfg2 shown: {log}");
    assert!(std::fs::metadata(&out).unwrap().len() > 0);
    if pyav_ready() {
        let (facts, frames) = pyav(&out);
        assert_eq!(fact(&facts, "width"), "64");
        assert_eq!(frames.len(), 5 * 64 * 48 * 3);
    }
}

#[test]
fn bad_requests_fail_with_a_reason() {
    let out = scratch("bad.mp4");
    let image = data("ref/first_frame.png");
    for (model, extra, says) in [
        (
            "tiny-wan/t2v",
            vec!["--image", image.to_str().unwrap()],
            "text-to-video",
        ),
        ("tiny-wan/i2v", vec![], "needs an image"),
        ("tiny-wan/t2v", vec!["--sampler", "dpm"], "unknown sampler"),
        ("tiny-wan/t2v", vec!["--frames", "0"], "frames"),
        ("tiny-wan/t2v", vec!["--width", "100000"], "too large"),
        ("tiny-wan/t2v/vae", vec![], "model_index.json"),
    ] {
        let o = video(model, &out, &extra);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{model} {extra:?} succeeded");
        assert!(stderr.contains(says), "{model} {extra:?}: {stderr}");
    }
}

/// `weft convert` of the tiny t2v folder, then `weft video --model t2v.gguf` (the UMT5 GGUF
/// and the VAE found beside it): the same MP4, byte for byte, as from the folder (the f32
/// files hold the same numbers, and the encoder is deterministic).
#[test]
fn gguf_model_makes_the_folder_video() {
    let dir = scratch("gguf");
    let _ = std::fs::remove_dir_all(&dir);
    let o = Command::new(weft_binary())
        .arg("convert")
        .arg(data("tiny-wan/t2v"))
        .arg("-o")
        .arg(&dir)
        .output()
        .expect("running weft convert");
    assert!(
        o.status.success(),
        "weft convert: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (from_folder, from_gguf) = (scratch("folder.mp4"), scratch("gguf.mp4"));
    ok(&video("tiny-wan/t2v", &from_folder, &[]));
    let gguf = dir.join("t2v.gguf");
    let log = ok(&video(gguf.to_str().unwrap(), &from_gguf, &[]));
    assert!(log.contains("seed 11"), "{log}");
    assert_eq!(
        std::fs::read(&from_gguf).unwrap(),
        std::fs::read(&from_folder).unwrap()
    );

    // Without its VAE beside it, the error says what was looked for and which flag names it.
    std::fs::remove_file(dir.join("t2v-vae.safetensors")).unwrap();
    let o = video(gguf.to_str().unwrap(), &from_gguf, &[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("t2v-vae.safetensors") && stderr.contains("--video-vae"),
        "{stderr}"
    );
}
