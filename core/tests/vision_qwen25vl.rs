//! Qwen2.5-VL's vision encoder on the CPU backend against llama.cpp's mtmd and transformers,
//! on the tiny random-weight mmproj and five test images of tests/data/vision/qwen25vl (see
//! its README): the encoder input is rebuilt from mtmd's own u8 image (`S.pixels.0.png`, any
//! size with sides multiples of 28) as `(v / 255 - mean) / std`, and the merger's output
//! compared with `S.embd.f32` (mtmd) and `S.hf_embd.f32` (transformers on the same input).

mod vision_files;
mod wgpu_support;

use std::sync::Arc;

use vision_files::{compare, data, normalise, read_f32, read_png};
use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::wgpu::WgpuOptions;
use weft_core::gguf::ModelFile;
use weft_core::model::vision::qwen25vl::{Grid, Qwen25Vision};
use weft_core::model::vision::{Mmproj, Projector, VisionError};

const IMAGES: [&str; 5] = [
    "landscape_640x480",
    "tall_300x900",
    "wide_1024x256",
    "square_224x224",
    "tiny_37x61",
];

fn mmproj() -> Mmproj {
    vision_files::mmproj("qwen25vl/mmproj-qwen25vl-tiny-f16.gguf")
}

#[test]
fn mmproj_metadata_and_tensors() {
    let mm = mmproj();
    assert_eq!(mm.projector, Projector::Qwen25VL);
    let h = &mm.hparams;
    assert_eq!(
        (h.patch_size, h.n_embd, h.n_ff, h.n_layer, h.n_head),
        (14, 64, 128, 4, 2)
    );
    assert_eq!(h.projection_dim, 32);
    assert!((h.eps - 1e-6).abs() < 1e-12);
    let mut be = CpuBackend::new(1);
    let enc = Qwen25Vision::load(&mm, &mut be).unwrap();
    assert_eq!((enc.align(), enc.n_out()), (28, 32));
    assert_eq!(enc.grid(644, 476).unwrap(), Grid { rows: 17, cols: 23 });
}

#[test]
fn bad_inputs_are_errors() {
    let mm = mmproj();
    let mut be = CpuBackend::new(1);
    let enc = Qwen25Vision::load(&mm, &mut be).unwrap();
    // A side that is not a multiple of 28.
    let e = enc
        .encode(&mut be, &[0.0; 3 * 30 * 28], 30, 28)
        .unwrap_err();
    assert!(matches!(e, VisionError::Input(_)), "{e}");
    assert!(e.to_string().contains("28"), "{e}");
    // Too few values for the size.
    let e = enc.encode(&mut be, &[0.0; 10], 28, 28).unwrap_err();
    assert!(matches!(e, VisionError::Input(_)), "{e}");
    // Another family's mmproj.
    let g = ModelFile::open(data("gemma3/mmproj-gemma3-tiny-f16.gguf")).unwrap();
    let g = Mmproj::read(Arc::new(g)).unwrap();
    let e = Qwen25Vision::load(&g, &mut be).err().unwrap();
    assert!(matches!(e, VisionError::UnsupportedProjector(_)), "{e}");
}

/// The embeddings of every image, and their distance from mtmd and transformers.
#[test]
fn embeddings_match_mtmd_and_transformers() {
    let mm = mmproj();
    let (mean, std) = (mm.hparams.image_mean, mm.hparams.image_std);
    let mut be = CpuBackend::new(2);
    let enc = Qwen25Vision::load(&mm, &mut be).unwrap();
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data("qwen25vl/index.json")).unwrap()).unwrap();
    let mut failures = Vec::new();
    for (s, entry) in IMAGES.iter().zip(index["images"].as_array().unwrap()) {
        assert!(entry["image"].as_str().unwrap().starts_with(s));
        let (w, h, rgb) = read_png(&data(&format!("qwen25vl/{s}.pixels.0.png")));
        let pixels = normalise(w, h, &rgb, mean, std);
        let got = enc.encode(&mut be, &pixels, w, h).unwrap();
        let shape = &entry["embd_shape"];
        let grid = enc.grid(w, h).unwrap();
        assert_eq!(grid.n_tokens() as u64, shape[0].as_u64().unwrap(), "{s}");
        assert_eq!(got.len(), grid.n_tokens() * enc.n_out(), "{s}");
        let mtmd = read_f32(&data(&format!("qwen25vl/{s}.embd.f32")));
        let hf = read_f32(&data(&format!("qwen25vl/{s}.hf_embd.f32")));
        let (c_m, d_m) = compare(&got, &mtmd);
        let (c_h, d_h) = compare(&got, &hf);
        eprintln!(
            "{s:<18} {w}x{h} vs mtmd: cosine {c_m:.9} max-abs {d_m:.2e} | vs transformers: cosine {c_h:.9} max-abs {d_h:.2e}"
        );
        // Weft runs in f32 as transformers does (its GELU too is the erf form), and lands
        // within 5e-6 of it. mtmd is 1.7-2.3e-3 from both (as from transformers, see the data
        // README): ggml rounds activations to f16 for its f16 weights (the patch im2col, the
        // products, flash attention) and takes GELU's tanh form from an f16 table (with
        // that form here, the distance to mtmd stays 1.6-2.3e-3, so rounding is most of it).
        if !(c_m >= 0.9999995 && d_m <= 2.5e-3) {
            failures.push(format!("{s} vs mtmd: cosine {c_m}, max-abs {d_m}"));
        }
        if !(c_h >= 0.99999999 && d_h <= 1e-5) {
            failures.push(format!("{s} vs transformers: cosine {c_h}, max-abs {d_h}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same graph on the wgpu backend (its multi-component RoPE rotates by the CPU's own
/// angles): against the CPU backend and transformers, on every image.
#[test]
fn wgpu_embeddings_match_the_cpu_and_transformers() {
    let Some(mut gpu) = wgpu_support::backend(&WgpuOptions::default()) else {
        return;
    };
    let mm = mmproj();
    let (mean, std) = (mm.hparams.image_mean, mm.hparams.image_std);
    let enc = Qwen25Vision::load(&mm, &mut gpu).unwrap();
    let mut cpu = CpuBackend::new(2);
    let enc_cpu = Qwen25Vision::load(&mm, &mut cpu).unwrap();
    let mut failures = Vec::new();
    for s in IMAGES {
        let (w, h, rgb) = read_png(&data(&format!("qwen25vl/{s}.pixels.0.png")));
        let pixels = normalise(w, h, &rgb, mean, std);
        let got = enc.encode(&mut gpu, &pixels, w, h).unwrap();
        let on_cpu = enc_cpu.encode(&mut cpu, &pixels, w, h).unwrap();
        let hf = read_f32(&data(&format!("qwen25vl/{s}.hf_embd.f32")));
        let (c_c, d_c) = compare(&got, &on_cpu);
        let (c_h, d_h) = compare(&got, &hf);
        eprintln!(
            "wgpu {s:<18} vs cpu: cosine {c_c:.9} max-abs {d_c:.2e} | vs transformers: cosine {c_h:.9} max-abs {d_h:.2e}"
        );
        if !(c_c >= 0.99999999 && d_c <= 1e-5 && c_h >= 0.99999999 && d_h <= 1e-5) {
            failures.push(format!(
                "{s}: vs cpu {c_c} / {d_c}, vs transformers {c_h} / {d_h}"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
