//! Idefics3 / SmolVLM's vision encoder and image prompt layout on the CPU backend against
//! llama.cpp's mtmd and transformers, on the tiny random-weight mmproj, text model and five
//! test images of tests/data/vision/idefics3 (see its README).
//!
//! - Embeddings: each encoder input (tiles row by row, then the overview) is rebuilt from
//!   mtmd's own u8 image (`S.pixels.K.png`) as `(v / 255 - mean) / std`, and the projector
//!   outputs, concatenated in that order, compared with `S.embd.f32` (mtmd) and
//!   `S.hf_embd.f32` (transformers on the same input).
//! - Layout: the prompt built from `prompt.txt` is mtmd's tokenization (`prompt_chunks`).
//! - Greedy: 32 tokens after image + prompt equal mtmd's run up to its first near-tie, from
//!   mtmd's embeddings and from the pixels through Weft's encoder.

mod vision_files;
mod wgpu_support;

use std::path::PathBuf;
use std::sync::Arc;

use vision_files::{compare, normalise, read_f32, read_png};
use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::wgpu::WgpuOptions;
use weft_core::backend::Backend;
use weft_core::engine::{EngineConfig, Prompt, PromptPiece};
use weft_core::generation::GenParams;
use weft_core::gguf::ModelFile;
use weft_core::loaded::LoadedModel;
use weft_core::model::vision::idefics3::{Idefics3Image, Idefics3Vision};
use weft_core::model::vision::idefics3_prompt::Idefics3Layout;
use weft_core::model::vision::{Mmproj, Projector, VisionError};
use weft_core::sampler::SamplerConfig;
use weft_core::test_support;
use weft_core::vision::RgbImage;

/// A reference margin (top-1 minus top-2 logit) below which two implementations may pick
/// different tokens: the data README measured llama.cpp's own CLI parting from the reference
/// at margins up to 0.031 on these random-weight models.
const NEAR_TIE: f64 = 0.05;

/// mtmd's marker for an image in `prompt.txt`.
const MARKER: &str = "<__media__>";

fn data(rel: &str) -> PathBuf {
    vision_files::data(&format!("idefics3/{rel}"))
}

fn index() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(data("index.json")).unwrap()).unwrap()
}

fn images(idx: &serde_json::Value) -> &Vec<serde_json::Value> {
    idx["images"].as_array().unwrap()
}

fn stem(image: &serde_json::Value) -> &str {
    image["mtmd_embd"]
        .as_str()
        .unwrap()
        .trim_end_matches(".embd.f32")
}

fn text_model() -> LoadedModel {
    let path = data("idefics3-tiny-q8_0.gguf");
    let cfg = EngineConfig::default();
    LoadedModel::open(path, Box::new(CpuBackend::new(2)), cfg, &mut |_, _| {}).unwrap()
}

/// The image's grid (tiles across, down) from its prompt chunks: `<row_R_col_C>` ids are
/// 49156 + 6·(R - 1) + (C - 1) in this vocabulary (README), the last one names the corner.
fn grid_of(image: &serde_json::Value) -> (usize, usize) {
    let tiles = image["pixel_pngs"].as_array().unwrap().len() - 1;
    let mut last = 0;
    for c in image["prompt_chunks"].as_array().unwrap() {
        if c["type"] == "text" {
            for id in test_support::ids(&c["tokens"]) {
                if (49156..49156 + 36).contains(&id) {
                    last = id - 49156;
                }
            }
        }
    }
    let (rows, cols) = (last as usize / 6 + 1, last as usize % 6 + 1);
    assert_eq!(rows * cols, tiles, "{}", image["image"]);
    (cols, rows)
}

/// Weft's encoder on mtmd's encoder inputs of one image: the image with its grid.
fn encode_pngs(
    enc: &Idefics3Vision,
    be: &mut dyn Backend,
    mm: &Mmproj,
    image: &serde_json::Value,
) -> Idefics3Image {
    let (mean, std) = (mm.hparams.image_mean, mm.hparams.image_std);
    let rows = image["pixel_pngs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let (w, h, rgb) = read_png(&data(p.as_str().unwrap()));
            assert_eq!((w, h), (512, 512));
            Arc::from(
                enc.encode_tile(be, &normalise(w, h, &rgb, mean, std))
                    .unwrap(),
            )
        })
        .collect();
    let (grid_x, grid_y) = grid_of(image);
    Idefics3Image {
        grid_x,
        grid_y,
        rows,
        n_tokens: enc.n_tokens(),
        n_out: enc.n_out(),
    }
}

fn concat(img: &Idefics3Image) -> Vec<f32> {
    img.rows.iter().flat_map(|r| r.iter().copied()).collect()
}

fn mmproj() -> Mmproj {
    vision_files::mmproj("idefics3/mmproj-idefics3-tiny-f16.gguf")
}

#[test]
fn mmproj_metadata_and_tensors() {
    let mm = mmproj();
    assert_eq!(mm.projector, Projector::Idefics3);
    let h = &mm.hparams;
    assert_eq!(
        (
            h.image_size,
            h.patch_size,
            h.n_embd,
            h.n_ff,
            h.n_layer,
            h.n_head
        ),
        (512, 16, 64, 128, 2, 2)
    );
    assert_eq!((h.projection_dim, h.scale_factor), (32, Some(4)));
    assert_eq!((h.image_mean, h.image_std), ([0.5; 3], [0.5; 3]));
    assert!(h.use_gelu);
    let mut be = CpuBackend::new(1);
    let enc = Idefics3Vision::load(&mm, &mut be).unwrap();
    // 32 x 32 patches, 4 x 4 of them a token.
    assert_eq!(
        (enc.tile_size(), enc.n_tokens(), enc.n_out()),
        (512, 64, 32)
    );
}

#[test]
fn bad_input_is_an_error() {
    let mm = mmproj();
    let mut be = CpuBackend::new(1);
    let enc = Idefics3Vision::load(&mm, &mut be).unwrap();
    let e = enc.encode_tile(&mut be, &[0.0; 3 * 10 * 10]).unwrap_err();
    assert!(matches!(e, VisionError::Input(_)), "{e}");
    // Another family's loader refuses this file, and this loader another family's.
    let g = ModelFile::open(data("../gemma3/mmproj-gemma3-tiny-f16.gguf")).unwrap();
    let g = Mmproj::read(Arc::new(g)).unwrap();
    let e = Idefics3Vision::load(&g, &mut be).err().unwrap();
    assert!(matches!(e, VisionError::UnsupportedProjector(_)), "{e}");
    // A layout whose blocks do not match its grid.
    let model = text_model();
    let layout = Idefics3Layout::new(&model.tokenizer).unwrap();
    let img = Idefics3Image {
        grid_x: 2,
        grid_y: 2,
        rows: vec![Arc::from(vec![0.0; 64 * 32]); 4],
        n_tokens: 64,
        n_out: 32,
    };
    let e = layout.pieces(&model.tokenizer, &img).unwrap_err();
    assert!(e.to_string().contains("needs 5 blocks"), "{e}");
    let e = layout
        .prompt(
            &model.tokenizer,
            "no marker here",
            MARKER,
            std::slice::from_ref(&img),
        )
        .unwrap_err();
    assert!(e.to_string().contains("0 image markers"), "{e}");
}

#[test]
fn embeddings_match_mtmd_and_transformers() {
    let mm = mmproj();
    let mut be = CpuBackend::new(2);
    let enc = Idefics3Vision::load(&mm, &mut be).unwrap();
    let idx = index();
    let mut failures = Vec::new();
    for image in images(&idx) {
        let s = stem(image);
        let got = concat(&encode_pngs(&enc, &mut be, &mm, image));
        let mtmd = read_f32(&data(&format!("{s}.embd.f32")));
        let hf = read_f32(&data(&format!("{s}.hf_embd.f32")));
        let (c_m, d_m) = compare(&got, &mtmd);
        let (c_h, d_h) = compare(&got, &hf);
        eprintln!(
            "{s:<18} vs mtmd: cosine {c_m:.9} max-abs {d_m:.2e} | vs transformers: cosine {c_h:.9} max-abs {d_h:.2e}"
        );
        // The goal: cosine >= 0.9999 and max-abs <= 1e-3 against both. Against
        // transformers Weft is at 3.1-3.8e-6 (its tower computes GELU in f32; the backends'
        // ggml-style f16 GELU table alone would cost 1.0-1.2e-3). Against mtmd, max-abs is
        // 1.56-1.91e-3: exactly transformers' own distance from mtmd (data README). That gap
        // is ggml's f16 roundings — its patch convolution builds an f16 im2col (pixels and
        // kernel rounded: 6.3e-4 off at the very first node), f16 activations go into its
        // f16-weight products, the GELU table, f16 K/V into flash attention. Emulating those in
        // numpy (scripts/vision/idefics3_numerics.py) lands as far from transformers as mtmd
        // and closer to mtmd, but not within 1e-3: a last-bit difference flips an f16
        // rounding. Asserted: what Weft reaches.
        if !(c_m >= 0.999_999_9 && d_m <= 2e-3) {
            failures.push(format!("{s} vs mtmd: cosine {c_m}, max-abs {d_m}"));
        }
        if !(c_h >= 0.999_999_99 && d_h <= 1e-5) {
            failures.push(format!("{s} vs transformers: cosine {c_h}, max-abs {d_h}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `encode_image` (Weft's decoding-free path: preprocessing + encoder) on the image mtmd
/// decoded gives exactly the embeddings of mtmd's encoder inputs (preprocessing is
/// pixel-identical, tests/vision_preprocess.rs), with mtmd's grid.
#[test]
fn encode_image_equals_the_encoder_on_mtmds_inputs() {
    let mm = mmproj();
    let mut be = CpuBackend::new(2);
    let enc = Idefics3Vision::load(&mm, &mut be).unwrap();
    let idx = index();
    // Two images keep this quick: a JPEG in landscape and the smallest PNG.
    for image in images(&idx)
        .iter()
        .filter(|i| matches!(stem(i), "wide_1024x256" | "tiny_37x61"))
    {
        let (w, h, rgb) = read_png(&data(image["decoded_png"].as_str().unwrap()));
        let img = RgbImage {
            width: w as u32,
            height: h as u32,
            data: rgb,
        };
        let got = enc.encode_image(&mut be, &img).unwrap();
        let want = encode_pngs(&enc, &mut be, &mm, image);
        assert_eq!((got.grid_x, got.grid_y), (want.grid_x, want.grid_y));
        assert!(got == want, "{}: embeddings differ", stem(image));
    }
}

/// The prompt of `prompt.txt` with an image of `img`'s grid, as mtmd tokenized it.
fn check_layout(model: &LoadedModel, image: &serde_json::Value, prompt: &Prompt) {
    let name = image["image"].as_str().unwrap();
    let chunks = image["prompt_chunks"].as_array().unwrap();
    assert_eq!(prompt.pieces.len(), chunks.len(), "{name}: pieces");
    for (k, (p, c)) in prompt.pieces.iter().zip(chunks).enumerate() {
        match (p, c["type"].as_str().unwrap()) {
            (PromptPiece::Tokens(t), "text") => {
                let want = test_support::ids(&c["tokens"]);
                assert_eq!(
                    t,
                    &want,
                    "{name}: chunk {k}: {:?} vs {:?}",
                    model.tokenizer.decode(t, true),
                    model.tokenizer.decode(&want, true)
                );
            }
            (
                PromptPiece::Embeddings {
                    n, bidirectional, ..
                },
                "image",
            ) => {
                assert_eq!(
                    *n as u64,
                    c["n_tokens"].as_u64().unwrap(),
                    "{name}: chunk {k}"
                );
                assert_eq!(*n as u64, c["n_pos"].as_u64().unwrap(), "{name}: chunk {k}");
                assert!(!bidirectional, "Idefics3's image rows are causal");
            }
            (p, t) => panic!("{name}: chunk {k}: a {t} chunk, Weft has {p:?}"),
        }
    }
}

fn prompt_text() -> String {
    std::fs::read_to_string(data("prompt.txt")).unwrap()
}

/// The layout of every image's prompt equals mtmd's `prompt_chunks` (all five grids: 4x3,
/// 2x4, 4x1, 4x4 and 3x4 tiles).
#[test]
fn prompt_layout_equals_mtmds_chunks() {
    let model = text_model();
    let layout = Idefics3Layout::new(&model.tokenizer).unwrap();
    assert_eq!(
        (
            layout.newline,
            layout.double_newline,
            layout.fake_token,
            layout.global_img
        ),
        (198, 1116, 49152, 49155)
    );
    let text = prompt_text();
    let idx = index();
    for image in images(&idx) {
        let (grid_x, grid_y) = grid_of(image);
        let img = Idefics3Image {
            grid_x,
            grid_y,
            rows: vec![Arc::from(vec![0.0; 64 * 32]); grid_x * grid_y + 1],
            n_tokens: 64,
            n_out: 32,
        };
        let prompt = layout
            .prompt(&model.tokenizer, &text, MARKER, std::slice::from_ref(&img))
            .unwrap();
        check_layout(&model, image, &prompt);
    }
}

fn greedy(n: usize) -> GenParams {
    GenParams {
        sampling: SamplerConfig::greedy(),
        max_tokens: n,
        ignore_eos: true,
        ..GenParams::default()
    }
}

/// Greedy tokens after `prompt` against the image's mtmd run: Ok(note) when equal, or
/// diverging only at a reference near-tie; Err(message) otherwise.
fn check_greedy(
    model: &mut LoadedModel,
    image: &serde_json::Value,
    prompt: &Prompt,
) -> Result<String, String> {
    let name = image["image"].as_str().unwrap();
    let want = test_support::ids(&image["greedy"]);
    let placeholder = model.tokenizer.token_id("<image>").unwrap_or(0);
    let mut session = model.session().unwrap();
    let got = session
        .generate_prompt(model, prompt, placeholder, &greedy(want.len()), &mut |_| {
            true
        })
        .unwrap();
    session.reset(&mut model.engine).unwrap();
    model.engine.free_sequence(session.seq()).unwrap();
    let margins: Vec<f64> = image["greedy_margin"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_f64().unwrap())
        .collect();
    let min_margin = margins.iter().copied().fold(f64::INFINITY, f64::min);
    match (0..want.len()).find(|&i| got.tokens.get(i) != Some(&want[i])) {
        None => Ok(format!(
            "{name}: equal to mtmd for {} tokens (smallest reference margin {min_margin:.4})",
            want.len()
        )),
        Some(k) if margins[k] < NEAR_TIE => Ok(format!(
            "{name}: equal to mtmd for {k} tokens, then a near-tie (reference margin {:.4})",
            margins[k]
        )),
        Some(k) => Err(format!(
            "{name}: diverged from mtmd at step {k}, reference margin {:.4}: got {:?}, want {:?}",
            margins[k], got.tokens, want
        )),
    }
}

#[test]
fn greedy_after_mtmd_embeddings_matches_mtmd() {
    let mut model = text_model();
    let layout = Idefics3Layout::new(&model.tokenizer).unwrap();
    let text = prompt_text();
    let idx = index();
    let mut failures = Vec::new();
    for image in images(&idx) {
        let (grid_x, grid_y) = grid_of(image);
        let all = read_f32(&data(&format!("{}.embd.f32", stem(image))));
        let rows = all.chunks_exact(64 * 32).map(Arc::from).collect();
        let img = Idefics3Image {
            grid_x,
            grid_y,
            rows,
            n_tokens: 64,
            n_out: 32,
        };
        let prompt = layout
            .prompt(&model.tokenizer, &text, MARKER, std::slice::from_ref(&img))
            .unwrap();
        match check_greedy(&mut model, image, &prompt) {
            Ok(note) => eprintln!("mtmd embeddings: {note}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn greedy_from_pixels_through_the_encoder_matches_mtmd() {
    let mut model = text_model();
    let layout = Idefics3Layout::new(&model.tokenizer).unwrap();
    let mm = mmproj();
    let mut be = CpuBackend::new(2);
    let enc = Idefics3Vision::load(&mm, &mut be).unwrap();
    let text = prompt_text();
    let idx = index();
    let mut failures = Vec::new();
    for image in images(&idx) {
        let img = encode_pngs(&enc, &mut be, &mm, image);
        let prompt = layout
            .prompt(&model.tokenizer, &text, MARKER, std::slice::from_ref(&img))
            .unwrap();
        check_layout(&model, image, &prompt);
        match check_greedy(&mut model, image, &prompt) {
            Ok(note) => eprintln!("Weft's encoder: {note}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same graph on the wgpu backend, on the encoder inputs of one image (wide_1024x256: four
/// tiles and the overview; software Vulkan is slow on 2 busy cores): the bounds of the CPU test
/// against mtmd and transformers, and its distance from the CPU backend reported.
#[test]
fn wgpu_embeddings_match_mtmd_and_the_cpu() {
    let Some(mut gpu) = wgpu_support::backend(&WgpuOptions::default()) else {
        return;
    };
    let mm = mmproj();
    let enc = Idefics3Vision::load(&mm, &mut gpu).unwrap();
    let mut cpu = CpuBackend::new(2);
    let enc_cpu = Idefics3Vision::load(&mm, &mut cpu).unwrap();
    let idx = index();
    let image = images(&idx)
        .iter()
        .find(|i| stem(i) == "wide_1024x256")
        .unwrap();
    let got = concat(&encode_pngs(&enc, &mut gpu, &mm, image));
    let on_cpu = concat(&encode_pngs(&enc_cpu, &mut cpu, &mm, image));
    let mtmd = read_f32(&data("wide_1024x256.embd.f32"));
    let hf = read_f32(&data("wide_1024x256.hf_embd.f32"));
    let (c_m, d_m) = compare(&got, &mtmd);
    let (c_h, d_h) = compare(&got, &hf);
    let (c_c, d_c) = compare(&got, &on_cpu);
    eprintln!(
        "wgpu wide_1024x256 vs mtmd: cosine {c_m:.9} max-abs {d_m:.2e} | vs transformers: cosine {c_h:.9} max-abs {d_h:.2e} | vs cpu: cosine {c_c:.9} max-abs {d_c:.2e}"
    );
    assert!(c_m >= 0.999_999_9 && d_m <= 2e-3, "vs mtmd: {c_m} {d_m}");
    assert!(
        c_h >= 0.999_999_99 && d_h <= 1e-5,
        "vs transformers: {c_h} {d_h}"
    );
    assert!(d_c <= 1e-5, "vs the CPU: {d_c}");
}
