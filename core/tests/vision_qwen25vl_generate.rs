//! Image + prompt through the tiny Qwen2.5-VL text model (`qwen2vl`, M-RoPE) on the CPU
//! backend: greedy tokens against llama.cpp's mtmd run (tests/data/vision/qwen25vl/index.json,
//! `greedy`, with its per-step margins and top-1 logits). The prompt is mtmd's tokenization
//! (`prompt_chunks`): its text chunks' ids, and the image chunk as an image grid of embedding
//! rows — mtmd's own projector output (`S.embd.f32`), then Weft's encoder output from
//! `S.pixels.0.png` (the whole path). A divergence is accepted only at a near-tie of the
//! reference (margin < 0.05, see the data README: the tiny random model's logits differ
//! between llama.cpp's own programs by a few hundredths).

mod vision_files;
mod wgpu_support;

use std::path::PathBuf;
use std::sync::Arc;

use vision_files::{read_f32, read_png};
use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::wgpu::WgpuOptions;
use weft_core::engine::{EngineConfig, Prompt, PromptPiece};
use weft_core::generation::GenParams;
use weft_core::gguf::ModelFile;
use weft_core::loaded::LoadedModel;
use weft_core::model::vision::qwen25vl::Qwen25Vision;
use weft_core::model::vision::Mmproj;
use weft_core::sampler::SamplerConfig;
use weft_core::test_support;

/// A reference margin (top-1 minus top-2 logit) below which two implementations may pick
/// different tokens.
const NEAR_TIE: f64 = 0.05;

/// The text model's width.
const N_EMBD: usize = 32;

fn data(rel: &str) -> PathBuf {
    vision_files::data(&format!("qwen25vl/{rel}"))
}

fn index() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(data("index.json")).unwrap()).unwrap()
}

fn load_model() -> LoadedModel {
    load_on(Box::new(CpuBackend::new(2)))
}

fn load_on(backend: Box<dyn weft_core::backend::Backend>) -> LoadedModel {
    let cfg = EngineConfig::default();
    let path = data("qwen25vl-tiny-q8_0.gguf");
    LoadedModel::open(path, backend, cfg, &mut |_, _| {}).unwrap()
}

/// The merged-token grid of an image's encoder input (28 px a token).
fn grid_of(image: &serde_json::Value) -> (usize, usize) {
    let s = &image["pixel_shapes_bchw"][0];
    let (h, w) = (
        s[2].as_u64().unwrap() as usize,
        s[3].as_u64().unwrap() as usize,
    );
    (h / 28, w / 28)
}

/// The image's prompt as mtmd tokenized it, with `rows` for its image chunk.
fn prompt_of(image: &serde_json::Value, rows: &[f32]) -> Prompt {
    let (gh, gw) = grid_of(image);
    let mut pieces = Vec::new();
    for c in image["prompt_chunks"].as_array().unwrap() {
        match c["type"].as_str().unwrap() {
            "text" => pieces.push(PromptPiece::Tokens(test_support::ids(&c["tokens"]))),
            "image" => {
                let n = c["n_tokens"].as_u64().unwrap() as usize;
                assert_eq!(n, gh * gw);
                assert_eq!(c["n_pos"].as_u64().unwrap() as usize, gh.max(gw));
                assert_eq!(rows.len(), n * N_EMBD);
                pieces.push(PromptPiece::ImageGrid { rows: gh, cols: gw });
                pieces.push(PromptPiece::Embeddings {
                    data: rows.into(),
                    n,
                    bidirectional: false,
                });
            }
            t => panic!("unexpected chunk type {t}"),
        }
    }
    Prompt { pieces }
}

fn greedy(n: usize) -> GenParams {
    GenParams {
        sampling: SamplerConfig::greedy(),
        max_tokens: n,
        ignore_eos: true,
        ..GenParams::default()
    }
}

/// Top-1 id, its logit and the margin to the second.
fn top2(logits: &[f32]) -> (u32, f32, f32) {
    let (mut a, mut b) = ((0usize, f32::NEG_INFINITY), f32::NEG_INFINITY);
    for (i, &v) in logits.iter().enumerate() {
        if v > a.1 {
            b = a.1;
            a = (i, v);
        } else if v > b {
            b = v;
        }
    }
    (a.0 as u32, a.1, a.1 - b)
}

/// Greedy decoding on the engine itself, following the reference's tokens (teacher forcing)
/// so every step's logits can be compared: per step, Weft's top-1 id, its logit and margin.
fn forced_run(model: &mut LoadedModel, prompt: &Prompt, want: &[u32]) -> Vec<(u32, f32, f32)> {
    let engine = &mut model.engine;
    let seq = engine.new_sequence().unwrap();
    let mut logits = engine.prefill_prompt(seq, prompt).unwrap();
    let mut out = Vec::new();
    for &t in want {
        out.push(top2(&logits));
        logits = engine.decode(seq, t).unwrap();
    }
    engine.free_sequence(seq).unwrap();
    out
}

/// Runs the greedy check of one image: Ok(note) when Weft's tokens equal the reference up to
/// its first near-tie, Err(message) otherwise.
fn check(
    model: &mut LoadedModel,
    image: &serde_json::Value,
    rows: &[f32],
) -> Result<String, String> {
    let name = image["image"].as_str().unwrap();
    let want = test_support::ids(&image["greedy"]);
    let margins: Vec<f64> = image["greedy_margin"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let top1: Vec<f64> = image["greedy_top1_logit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let prompt = prompt_of(image, rows);
    // The session's path (prefix cache, decode loop).
    let mut session = model.session().unwrap();
    let got = session
        .generate_prompt(model, &prompt, 0, &greedy(want.len()), &mut |_| true)
        .unwrap()
        .tokens;
    session.reset(&mut model.engine).unwrap();
    model.engine.free_sequence(session.seq()).unwrap();
    // The same prompt step by step on the reference's tokens: logits per step.
    let forced = forced_run(model, &prompt, &want);
    let diverged = (0..want.len()).find(|&i| got.get(i) != Some(&want[i]));
    let first_tie = margins.iter().position(|&m| m < NEAR_TIE);
    // Top-1 logit distance over the steps where Weft's top-1 is the reference's.
    let mut max_dlogit = 0f64;
    let mut forced_equal = 0;
    for (k, &(id, l, _)) in forced.iter().enumerate() {
        if id == want[k] {
            forced_equal += 1;
            max_dlogit = max_dlogit.max((l as f64 - top1[k]).abs());
        }
    }
    let min_margin = margins.iter().cloned().fold(f64::INFINITY, f64::min);
    let note = match diverged {
        None => format!(
            "{name}: equal to llama.cpp for {} tokens (reference min margin {min_margin:.4})",
            want.len()
        ),
        Some(k) => format!(
            "{name}: equal for {k} tokens, diverged at step {k} (reference margin {:.4}, Weft's \
             {:.4}; first reference near-tie at step {first_tie:?})",
            margins[k], forced[k].2
        ),
    };
    let note = format!(
        "{note}; teacher-forced: top-1 equal on {forced_equal}/{} steps, max |top-1 logit - \
         llama.cpp's| {max_dlogit:.2e}",
        want.len()
    );
    let ok = got.len() == want.len() && diverged.is_none_or(|k| margins[k] < NEAR_TIE);
    if ok {
        Ok(note)
    } else {
        Err(note)
    }
}

#[test]
fn greedy_after_mtmd_embeddings_matches_llamacpp() {
    let mut model = load_model();
    let idx = index();
    let mut failures = Vec::new();
    for image in idx["images"].as_array().unwrap() {
        let rows = read_f32(&data(image["mtmd_embd"].as_str().unwrap()));
        match check(&mut model, image, &rows) {
            Ok(note) => eprintln!("{note}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn greedy_from_pixels_through_the_encoder_matches_llamacpp() {
    let mut model = load_model();
    let mm = Mmproj::read(Arc::new(
        ModelFile::open(data("mmproj-qwen25vl-tiny-f16.gguf")).unwrap(),
    ))
    .unwrap();
    let (mean, std) = (mm.hparams.image_mean, mm.hparams.image_std);
    let mut be = CpuBackend::new(2);
    let enc = Qwen25Vision::load(&mm, &mut be).unwrap();
    let idx = index();
    let mut failures = Vec::new();
    for image in idx["images"].as_array().unwrap() {
        let png = image["pixel_pngs"][0].as_str().unwrap();
        let (w, h, rgb) = read_png(&data(png));
        let mut pixels = vec![0f32; 3 * w * h];
        for (i, px) in rgb.chunks_exact(3).enumerate() {
            for c in 0..3 {
                pixels[c * w * h + i] = (px[c] as f32 / 255.0 - mean[c]) / std[c];
            }
        }
        let rows = enc.encode(&mut be, &pixels, w, h).unwrap();
        match check(&mut model, image, &rows) {
            Ok(note) => eprintln!("pixels: {note}"),
            Err(e) => failures.push(format!("pixels: {e}")),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Without the grid the image rows take consecutive rotary positions (1-D), which is not
/// what the model was run with: the logits after the prompt must differ from the grid's.
/// Guards against the grid being ignored.
#[test]
fn the_grid_changes_the_positions() {
    let mut model = load_model();
    let idx = index();
    let image = &idx["images"][0];
    let rows = read_f32(&data(image["mtmd_embd"].as_str().unwrap()));
    let with = prompt_of(image, &rows);
    let without = Prompt {
        pieces: with
            .pieces
            .iter()
            .filter(|p| !matches!(p, PromptPiece::ImageGrid { .. }))
            .cloned()
            .collect(),
    };
    let mut last = Vec::new();
    for p in [&with, &without] {
        let e = &mut model.engine;
        let seq = e.new_sequence().unwrap();
        last.push(e.prefill_prompt(seq, p).unwrap());
        e.free_sequence(seq).unwrap();
    }
    let d = last[0]
        .iter()
        .zip(&last[1])
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(d > 1e-3, "the grid made no difference ({d})");
    // A grid that does not match its rows is refused.
    let mut bad = with.clone();
    bad.pieces[1] = PromptPiece::ImageGrid { rows: 1, cols: 1 };
    let e = &mut model.engine;
    let seq = e.new_sequence().unwrap();
    let err = e.prefill_prompt(seq, &bad).unwrap_err();
    assert!(err.to_string().contains("grid"), "{err}");
    e.free_sequence(seq).unwrap();
}

/// The same greedy runs from mtmd's embeddings on the wgpu backend (M-RoPE by the table
/// kernel), held to the same rule.
#[test]
fn wgpu_greedy_after_mtmd_embeddings_matches_llamacpp() {
    let Some(gpu) = wgpu_support::backend(&WgpuOptions::default()) else {
        return;
    };
    let mut model = load_on(Box::new(gpu));
    let idx = index();
    let mut failures = Vec::new();
    for image in idx["images"].as_array().unwrap() {
        let rows = read_f32(&data(image["mtmd_embd"].as_str().unwrap()));
        match check(&mut model, image, &rows) {
            Ok(note) => eprintln!("wgpu: {note}"),
            Err(e) => failures.push(format!("wgpu: {e}")),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
