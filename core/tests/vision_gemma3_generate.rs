//! Image + prompt through the real Gemma 3 270M: greedy tokens against llama.cpp's mtmd runs
//! (tests/data/vision/gemma3: index.json's `greedy`, text flash attention on, and
//! greedy_text_fa_off.json, off). The prompt is exactly mtmd's tokenization (`prompt_chunks`):
//! its text chunks' ids, and the image chunk as embedding rows that attend to each other both
//! ways — mtmd's own projector output (`S.embd.f32`, the text side alone), then Weft's encoder
//! output from `S.pixels.0.png` (the whole path); on the CPU, and on wgpu against the CPU.
//!
//! The rule (see [`NEAR_TIE`]): Weft's tokens must equal one of llama.cpp's runs for all 32
//! steps, or up to the first step where llama.cpp's or Weft's own top-1/top-2 margin is under
//! 0.3. These prompts are chaotic (a random vision tower into a real language model):
//! llama.cpp's two runs part from each other within 3 tokens on every image, their step-0 top-1
//! logits 0.2-0.8 apart, so a longer match cannot be asked. Every parting is printed with both
//! margins, and the steps matched.

mod vision_files;
mod wgpu_support;

use std::path::PathBuf;

use vision_files::{read_f32, read_png};
use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::wgpu::WgpuOptions;
use weft_core::backend::{top_k_host, Backend};
use weft_core::engine::{Engine, EngineConfig, Prompt, PromptPiece};
use weft_core::generation::GenParams;
use weft_core::loaded::LoadedModel;
use weft_core::model::vision::gemma3::Gemma3Vision;
use weft_core::model::vision::Mmproj;
use weft_core::sampler::SamplerConfig;
use weft_core::test_support;

/// Steps are compared up to the first where llama.cpp's or Weft's top-1/top-2 margin is
/// below this: a near-tie, where two correct implementations may pick different tokens. It is
/// the text references' own bound (`test_support::MIN_MARGIN`), and what llama.cpp needs to
/// agree with itself here: its flash-attention-on and -off runs part at steps where one of
/// them has a margin of 0.004-0.29.
const NEAR_TIE: f64 = test_support::MIN_MARGIN;

fn data(rel: &str) -> PathBuf {
    vision_files::data(&format!("gemma3/{rel}"))
}

fn index() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(data("index.json")).unwrap()).unwrap()
}

fn load_model_on(backend: Box<dyn Backend>) -> Option<LoadedModel> {
    let path = test_support::model_path("gemma3")?;
    let cfg = EngineConfig::default();
    Some(LoadedModel::open(path, backend, cfg, &mut |_, _| {}).unwrap())
}

fn load_model() -> Option<LoadedModel> {
    load_model_on(Box::new(CpuBackend::new(2)))
}

/// The image's prompt as mtmd tokenized it, with `rows` for its image chunk.
fn prompt_of(image: &serde_json::Value, rows: &[f32]) -> Prompt {
    let mut pieces = Vec::new();
    for c in image["prompt_chunks"].as_array().unwrap() {
        match c["type"].as_str().unwrap() {
            "text" => pieces.push(PromptPiece::Tokens(test_support::ids(&c["tokens"]))),
            "image" => {
                let n = c["n_tokens"].as_u64().unwrap() as usize;
                assert_eq!(c["n_pos"].as_u64().unwrap() as usize, n);
                assert_eq!(rows.len(), n * 640);
                pieces.push(PromptPiece::Embeddings {
                    data: rows.into(),
                    n,
                    bidirectional: true,
                });
            }
            t => panic!("unexpected chunk type {t}"),
        }
    }
    Prompt { pieces }
}

/// A greedy run: per step the token, its logit and its margin over the runner-up.
struct Run {
    tokens: Vec<u32>,
    top1: Vec<f64>,
    margin: Vec<f64>,
}

impl Run {
    fn of_reference(run: &serde_json::Value) -> Run {
        let f = |k: &str| -> Vec<f64> {
            run[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        };
        Run {
            tokens: test_support::ids(&run["greedy"]),
            top1: f("greedy_top1_logit"),
            margin: f("greedy_margin"),
        }
    }
}

/// `n` greedy steps after `prompt` in a fresh sequence of `engine`, with Weft's own margins.
fn greedy_run(engine: &mut Engine, prompt: &Prompt, n: usize) -> Run {
    let seq = engine.new_sequence().unwrap();
    let mut logits = engine.prefill_prompt(seq, prompt).unwrap();
    let mut run = Run {
        tokens: Vec::new(),
        top1: Vec::new(),
        margin: Vec::new(),
    };
    for step in 0..n {
        let top = top_k_host(&logits, 2);
        run.tokens.push(top[0].0);
        run.top1.push(top[0].1 as f64);
        run.margin.push((top[0].1 - top[1].1) as f64);
        if step + 1 < n {
            logits = engine.decode(seq, top[0].0).unwrap();
        }
    }
    engine.free_sequence(seq).unwrap();
    run
}

/// Where `got` parts from `want`: the number of equal tokens, and whether the parting step (if
/// any) is a near-tie on either side.
struct Parting {
    equal: usize,
    near_tie: bool,
    note: String,
}

fn parting(got: &Run, want: &Run, what: &str) -> Parting {
    let n = want.tokens.len();
    let Some(k) = (0..n).find(|&i| got.tokens.get(i) != Some(&want.tokens[i])) else {
        let d = (0..n)
            .map(|i| (got.top1[i] - want.top1[i]).abs())
            .fold(0f64, f64::max);
        return Parting {
            equal: n,
            near_tie: false,
            note: format!("equal to {what} for {n} steps (top-1 logits within {d:.3})"),
        };
    };
    // Before the parting step both sides read the same tokens: how far apart their top-1
    // logits were there says how close the two implementations run.
    let d = (0..=k)
        .map(|i| (got.top1[i] - want.top1[i]).abs())
        .fold(0f64, f64::max);
    let (mw, mg) = (want.margin[k], got.margin.get(k).copied().unwrap_or(0.0));
    Parting {
        equal: k,
        near_tie: mw.min(mg) < NEAR_TIE,
        note: format!(
            "vs {what}: equal for {k} steps, parted at step {k} (token {} vs {}), margins there: \
             reference {mw:.3}, Weft {mg:.3}; top-1 logits up to it within {d:.3}",
            got.tokens.get(k).copied().unwrap_or(u32::MAX),
            want.tokens[k]
        ),
    }
}

/// Checks `got` against the references of one image: it must equal at least one of them up to
/// a near-tie (either side's margin under [`NEAR_TIE`]) or for all their steps. Returns
/// (passed, the longest equal run, the notes).
fn judge(name: &str, got: &Run, refs: &[(Run, &str)]) -> (bool, usize, String) {
    let parts: Vec<Parting> = refs.iter().map(|(r, w)| parting(got, r, w)).collect();
    let ok = parts
        .iter()
        .zip(refs)
        .any(|(p, (r, _))| p.equal == r.tokens.len() || p.near_tie);
    let best = parts.iter().map(|p| p.equal).max().unwrap_or(0);
    let notes: Vec<&str> = parts.iter().map(|p| p.note.as_str()).collect();
    let first: Vec<String> = refs
        .iter()
        .map(|(r, w)| format!("{w} {:.3}", r.top1[0]))
        .collect();
    (
        ok,
        best,
        format!(
            "{name}: {}; step 0 top-1 logit: Weft {:.3}, {}",
            notes.join("; "),
            got.top1[0],
            first.join(", ")
        ),
    )
}

/// llama.cpp's runs of one image: index.json's (text flash attention on), and the same with it
/// off (greedy_text_fa_off.json).
fn references(fa_off: &serde_json::Value, image: &serde_json::Value) -> Vec<(Run, &'static str)> {
    let stem = image["mtmd_embd"]
        .as_str()
        .unwrap()
        .trim_end_matches(".embd.f32");
    let off = fa_off["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["image"] == stem)
        .unwrap_or_else(|| panic!("{stem} missing from greedy_text_fa_off.json"));
    vec![
        (Run::of_reference(image), "llama.cpp (flash attention on)"),
        (Run::of_reference(off), "llama.cpp (flash attention off)"),
    ]
}

fn fa_off() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(data("greedy_text_fa_off.json")).unwrap()).unwrap()
}

/// Weft's encoder output for an image's `S.pixels.0.png` (mtmd's exact encoder input).
fn encode(enc: &Gemma3Vision, be: &mut dyn Backend, image: &serde_json::Value) -> Vec<f32> {
    let (mean, std) = (enc.hparams().image_mean, enc.hparams().image_std);
    let png = image["pixel_pngs"][0].as_str().unwrap();
    let (w, h, rgb) = read_png(&data(png));
    let mut pixels = vec![0f32; 3 * w * h];
    for (i, px) in rgb.chunks_exact(3).enumerate() {
        for c in 0..3 {
            pixels[c * w * h + i] = (px[c] as f32 / 255.0 - mean[c]) / std[c];
        }
    }
    enc.encode(be, &pixels).unwrap()
}

fn mmproj() -> Mmproj {
    vision_files::mmproj("gemma3/mmproj-gemma3-tiny-f16.gguf")
}

/// Greedy after each image's prompt (image rows from `rows_of`) against llama.cpp's runs.
fn check_all(model: &mut LoadedModel, rows_of: &mut dyn FnMut(&serde_json::Value) -> Vec<f32>) {
    let (idx, off) = (index(), fa_off());
    let mut failures = Vec::new();
    let mut total = 0;
    for image in idx["images"].as_array().unwrap() {
        let name = image["image"].as_str().unwrap();
        let rows = rows_of(image);
        let refs = references(&off, image);
        let got = greedy_run(
            &mut model.engine,
            &prompt_of(image, &rows),
            refs[0].0.tokens.len(),
        );
        let (ok, best, note) = judge(name, &got, &refs);
        total += best;
        eprintln!("{note}");
        if !ok {
            failures.push(note);
        }
    }
    eprintln!("steps equal to a llama.cpp run, summed over the images: {total}");
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The image chunk given as mtmd's own projector output (`S.embd.f32`): the text side alone.
#[test]
fn greedy_after_mtmd_embeddings_matches_llamacpp() {
    let Some(mut model) = load_model() else {
        return;
    };
    check_all(&mut model, &mut |image| {
        read_f32(&data(image["mtmd_embd"].as_str().unwrap()))
    });
}

/// The whole path: Weft's encoder on mtmd's encoder input, then the text model.
#[test]
fn greedy_from_pixels_through_the_encoder_matches_llamacpp() {
    let Some(mut model) = load_model() else {
        return;
    };
    let mm = mmproj();
    let mut be = CpuBackend::new(2);
    let enc = Gemma3Vision::load(&mm, &mut be).unwrap();
    check_all(&mut model, &mut |image| encode(&enc, &mut be, image));
}

/// The same prompts on the wgpu backend (lavapipe here: image rows attending both ways in its
/// attention kernel) against the CPU backend's runs and llama.cpp's, by the same near-tie
/// rule. Software Vulkan is slow on 2 cores, so one image by default (the first, whose
/// CPU run equals llama.cpp's longest); `WEFT_VISION_ALL_IMAGES=1` runs all five.
#[test]
fn greedy_on_wgpu_matches_the_cpu_and_llamacpp() {
    let Some(gpu) = wgpu_support::backend(&WgpuOptions::default()) else {
        return;
    };
    let Some(mut on_gpu) = load_model_on(Box::new(gpu)) else {
        return;
    };
    let mut on_cpu = load_model().unwrap();
    let (idx, off) = (index(), fa_off());
    let images = idx["images"].as_array().unwrap();
    let n_images = if std::env::var_os("WEFT_VISION_ALL_IMAGES").is_some() {
        images.len()
    } else {
        1
    };
    let mut failures = Vec::new();
    for image in &images[..n_images] {
        let name = image["image"].as_str().unwrap();
        let rows = read_f32(&data(image["mtmd_embd"].as_str().unwrap()));
        let prompt = prompt_of(image, &rows);
        let mut refs = references(&off, image);
        let n = refs[0].0.tokens.len();
        let cpu = greedy_run(&mut on_cpu.engine, &prompt, n);
        let got = greedy_run(&mut on_gpu.engine, &prompt, n);
        refs.push((cpu, "the CPU backend"));
        let (_, _, note) = judge(&format!("wgpu {name}"), &got, &refs);
        eprintln!("{note}");
        // Against the CPU: equal up to a near-tie (or all the way).
        let p = parting(&got, &refs[2].0, "the CPU backend");
        if !(p.equal == n || p.near_tie) {
            failures.push(note.clone());
        }
        // Against llama.cpp: as the CPU backend is held to.
        let (ok, _, _) = judge(name, &got, &refs[..2]);
        if !ok {
            failures.push(note);
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

fn greedy(n: usize) -> GenParams {
    GenParams {
        sampling: SamplerConfig::greedy(),
        max_tokens: n,
        ignore_eos: true,
        ..GenParams::default()
    }
}

/// A prompt of token ids only takes the same path as a plain token prompt: same tokens.
#[test]
fn token_only_prompt_equals_the_token_path() {
    let Some(mut model) = load_model() else {
        return;
    };
    let idx = index();
    let ids: Vec<u32> = idx["images"][0]["prompt_chunks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "text")
        .flat_map(|c| test_support::ids(&c["tokens"]))
        .collect();
    let mut s = model.session().unwrap();
    let plain = s
        .generate(&mut model, &ids, &greedy(8), &mut |_| true)
        .unwrap();
    s.reset(&mut model.engine).unwrap();
    let pieces = s
        .generate_prompt(
            &mut model,
            &Prompt::tokens(&ids),
            0,
            &greedy(8),
            &mut |_| true,
        )
        .unwrap();
    assert_eq!(plain.tokens, pieces.tokens);
    assert_eq!(pieces.prompt_tokens, ids.len());
}

/// The embedding rows matter (a prompt with another image's rows generates differently), and
/// prefix reuse tells images apart: the same image again reuses the cache past it, another
/// image with the same placeholder tokens reuses only the text before it.
#[test]
fn image_rows_drive_generation_and_key_the_cache() {
    let Some(mut model) = load_model() else {
        return;
    };
    let idx = index();
    let image = &idx["images"][0];
    let a = read_f32(&data(image["mtmd_embd"].as_str().unwrap()));
    let b = read_f32(&data(idx["images"][1]["mtmd_embd"].as_str().unwrap()));
    let (pa, pb) = (prompt_of(image, &a), prompt_of(image, &b));
    assert_ne!(pa.cache_keys(), pb.cache_keys());
    let n = pa.len();
    let before_image = test_support::ids(&image["prompt_chunks"][0]["tokens"]).len();
    let mut s = model.session().unwrap();
    let first = s
        .generate_prompt(&mut model, &pa, 0, &greedy(4), &mut |_| true)
        .unwrap();
    assert_eq!(first.cached_tokens, 0);
    let again = s
        .generate_prompt(&mut model, &pa, 0, &greedy(4), &mut |_| true)
        .unwrap();
    assert_eq!(
        again.cached_tokens,
        n - 1,
        "same image: all but the last position reused"
    );
    assert_eq!(again.tokens, first.tokens);
    let other = s
        .generate_prompt(&mut model, &pb, 0, &greedy(4), &mut |_| true)
        .unwrap();
    assert_eq!(
        other.cached_tokens, before_image,
        "another image: only the text before it"
    );
    assert_ne!(other.tokens, first.tokens);
    // Evaluated fresh, the other image gives the same tokens as after reuse.
    s.reset(&mut model.engine).unwrap();
    let fresh = s
        .generate_prompt(&mut model, &pb, 0, &greedy(4), &mut |_| true)
        .unwrap();
    assert_eq!(fresh.tokens, other.tokens);
}
