//! Reading the video reference kit (tests/data/video, made by scripts/video/make_tiny_wan.py):
//! a run folder's manifest and its raw tensors, and the error figures the video tests report.
//! Shared by the video tests; each test binary uses some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use weft_core::diffusion::{Expert, ExpertSwitch, Sampler, VideoRequest};

/// A path under tests/data/video.
pub fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/video")
        .join(rel)
}

/// A JSON file under tests/data/video, parsed.
pub fn json(rel: &str) -> Value {
    let path = data(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One reference run (`ref/t2v-unipc`, ...): its manifest and tensors.
pub struct Run {
    pub dir: PathBuf,
    pub manifest: Value,
}

/// A tensor of a run: its shape and values (u8 files are widened to f32).
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Run {
    /// The run in `ref/<name>`.
    pub fn open(name: &str) -> Run {
        let dir = data("ref").join(name);
        let manifest = json(&format!("ref/{name}/manifest.json"));
        Run { dir, manifest }
    }

    /// The tensor the manifest lists as `name`, checked against its recorded shape.
    pub fn tensor(&self, name: &str) -> Tensor {
        let entry = &self.manifest["files"][name];
        assert!(
            entry.is_object(),
            "{}: no file {name:?}",
            self.dir.display()
        );
        let shape: Vec<usize> = entry["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let path = self.dir.join(entry["file"].as_str().unwrap());
        let data = match entry["dtype"].as_str().unwrap() {
            "f32" => read_f32(&path),
            "u8" => read_bytes(&path).into_iter().map(f32::from).collect(),
            other => panic!("{}: unknown dtype {other}", path.display()),
        };
        assert_eq!(
            data.len(),
            shape.iter().product::<usize>(),
            "{}",
            path.display()
        );
        Tensor { shape, data }
    }

    /// The manifest's per-step records.
    pub fn steps(&self) -> &Vec<Value> {
        self.manifest["steps"].as_array().unwrap()
    }

    /// A list of numbers from the manifest (`timesteps`, `sigmas`), as f32.
    pub fn floats(&self, key: &str) -> Vec<f32> {
        floats(&self.manifest[key])
    }

    /// The run's guidance: which expert a timestep goes to (`boundary_ratio`; one expert when
    /// absent) and each expert's scale (`guidance_scale`, `guidance_scale_2` or the same one).
    pub fn guidance(&self) -> Guidance {
        let high = self.manifest["guidance_scale"].as_f64().unwrap() as f32;
        let low = self.manifest["guidance_scale_2"]
            .as_f64()
            .map_or(high, |g| g as f32);
        let switch = ExpertSwitch {
            boundary_ratio: self.manifest["boundary_ratio"].as_f64(),
            num_train_timesteps: 1000,
        };
        Guidance { switch, high, low }
    }

    /// The request diffusers' pipeline run made, starting from its exported noise; `sampler`
    /// `None` leaves the model's own scheduler.
    pub fn request(&self, sampler: Option<Sampler>) -> VideoRequest {
        let m = &self.manifest;
        let guidance = self.guidance();
        VideoRequest {
            prompt: m["prompt"].as_str().unwrap().into(),
            negative_prompt: Some(m["negative_prompt"].as_str().unwrap().into()),
            width: Some(m["width"].as_u64().unwrap() as usize),
            height: Some(m["height"].as_u64().unwrap() as usize),
            frames: Some(m["num_frames"].as_u64().unwrap() as usize),
            steps: Some(m["num_inference_steps"].as_u64().unwrap() as usize),
            cfg: Some(guidance.high),
            cfg2: Some(guidance.low),
            sampler,
            image: (m["mode"] == "i2v").then(first_frame),
            noise: Some(self.tensor("noise").data),
            ..Default::default()
        }
    }
}

/// The first frame the image-to-video runs started from.
pub fn first_frame() -> image::RgbImage {
    image::open(data("ref/first_frame.png")).unwrap().to_rgb8()
}

/// A run's expert switch and guidance scales (see [`Run::guidance`]).
pub struct Guidance {
    pub switch: ExpertSwitch,
    pub high: f32,
    pub low: f32,
}

impl Guidance {
    /// The guidance scale of `expert`.
    pub fn scale(&self, expert: Expert) -> f32 {
        match expert {
            Expert::High => self.high,
            Expert::Low => self.low,
        }
    }
}

/// A JSON array of numbers as f32 (each is a float32 written exactly, or a whole number).
pub fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn read_bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A raw little-endian f32 file.
pub fn read_f32(path: &Path) -> Vec<f32> {
    read_bytes(path)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `|ours - theirs| / |theirs|` over whole tensors (Euclidean norms, in f64): the figure the
/// issue's "relative error on latents" means.
pub fn relative_error(ours: &[f32], theirs: &[f32]) -> f64 {
    assert_eq!(ours.len(), theirs.len());
    let (mut diff, mut norm) = (0f64, 0f64);
    for (&a, &b) in ours.iter().zip(theirs) {
        diff += (a as f64 - b as f64).powi(2);
        norm += (b as f64).powi(2);
    }
    (diff / norm).sqrt()
}

/// The largest `|ours - theirs|`.
pub fn max_abs_diff(ours: &[f32], theirs: &[f32]) -> f64 {
    assert_eq!(ours.len(), theirs.len());
    ours.iter()
        .zip(theirs)
        .map(|(&a, &b)| (a as f64 - b as f64).abs())
        .fold(0.0, f64::max)
}

/// How many values differ in their bits.
pub fn bits_differing(ours: &[f32], theirs: &[f32]) -> usize {
    assert_eq!(ours.len(), theirs.len());
    ours.iter()
        .zip(theirs)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count()
}

/// PSNR in dB of 8-bit frames (values 0..=255, as f32) against the reference's.
pub fn psnr_u8(ours: &[f32], theirs: &[f32]) -> f64 {
    assert_eq!(ours.len(), theirs.len());
    let mse = ours
        .iter()
        .zip(theirs)
        .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
        .sum::<f64>()
        / ours.len() as f64;
    if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (255.0f64 * 255.0 / mse).log10()
    }
}
