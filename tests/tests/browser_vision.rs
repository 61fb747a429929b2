//! Vision in the browser package: `tests/browser/vision.mjs` drives Debian's headless Chromium
//! (playwright-core) through weft.js: the tiny Gemma 3 projector (tests/data/vision/gemma3)
//! beside the real Gemma 3 270M and one image file. On the wasm CPU backend: the projector's
//! output (`embedImage`) against the native one computed here (cosine >= 0.9999, max-abs <=
//! 1e-3); greedy 32 tokens of a chat with the image as a Blob against the native CPU backend's
//! — the same image bytes, chat prompt (llama.cpp mtmd's tokenization, index.json's
//! `prompt_chunks`) and encoder — equal up to the first step where either side's top-1/top-2
//! margin is a near-tie (`test_support::MIN_MARGIN`, as core's vision_gemma3_generate), top-1
//! raw logits within [`LOGIT_TOLERANCE`] up to there; the same image as bytes to `complete`,
//! a PNG as bytes and as an ImageBitmap, and the error cases. On WebGPU (SwiftShader): the
//! encoder's embeddings against the native ones.
//!
//! Needs `chromium`, `npm ci` in tests/browser and `scripts/build-web.sh`; skips loudly when
//! one is missing, fails under CI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::top_k_host;
use weft_core::engine::{EngineConfig, Prompt, PromptPiece};
use weft_core::gguf::ModelFile;
use weft_core::loaded::LoadedModel;
use weft_core::model::vision::encoder::VisionEncoder;
use weft_core::model::vision::Mmproj;
use weft_core::test_support;
use weft_core::vision::{decode_image, DecodeLimits};

/// Greedy steps compared.
const STEPS: usize = 32;
/// The image (index.json's first: its native run equals llama.cpp's longest).
const IMAGE: &str = "landscape_640x480.jpg";
/// A PNG, sent as bytes and as an ImageBitmap (drawn and encoded again as PNG: same pixels).
const PNG: &str = "tall_300x900.png";
/// Before the tokens part (and at the step where they do), the browser's top-1 raw logit is
/// within this of the native one: the text references' own bound. These prompts (a random
/// vision tower into a real language model) are chaotic: llama.cpp's flash-attention on and
/// off runs are 0.2-0.8 apart at step 0, and the wasm CPU backend (sums in another order:
/// wasm SIMD, one thread) 0.3-0.9 from the native one while its image embeddings agree to
/// cosine 0.99999 (checked first).
const LOGIT_TOLERANCE: f64 = test_support::LOGIT_TOLERANCE;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn data(rel: &str) -> PathBuf {
    root().join("tests/data/vision").join(rel)
}

/// A native greedy run: per step the token, its raw logit and its margin over the runner-up;
/// and the prompt's length.
struct Native {
    tokens: Vec<u32>,
    top1: Vec<f64>,
    margins: Vec<f64>,
    prompt_len: usize,
    /// The projector's output for the image (256 rows of 640).
    embeddings: Vec<f32>,
}

/// The native CPU run of `image` (its file and index.json entry).
fn native_run(model_path: &Path, image: &serde_json::Value) -> Native {
    let mut model = LoadedModel::open(
        model_path,
        Box::new(CpuBackend::new(2)),
        EngineConfig::default(),
        &mut |_, _| {},
    )
    .expect("the Gemma 3 270M model loads");
    let mm = Mmproj::read(Arc::new(
        ModelFile::open(data("gemma3/mmproj-gemma3-tiny-f16.gguf")).unwrap(),
    ))
    .unwrap();
    let mut be = CpuBackend::new(2);
    let n_embd = model.engine.model_info().n_embd;
    let enc = VisionEncoder::load(&mm, &mut be, &model.tokenizer, n_embd).unwrap();
    let file = image["image"].as_str().unwrap();
    let bytes = std::fs::read(data(&format!("images/{file}"))).unwrap();
    let img = decode_image(&bytes, &DecodeLimits::default()).unwrap();
    let encoded = enc.encode(&mut be, &img).unwrap();
    let embeddings: Vec<f32> = encoded
        .pieces
        .iter()
        .filter_map(|p| match p {
            PromptPiece::Embeddings { data, .. } => Some(data.to_vec()),
            _ => None,
        })
        .flatten()
        .collect();
    // mtmd's tokenization of the chat prompt: text chunks' ids, the image's pieces between.
    let mut pieces = Vec::new();
    for c in image["prompt_chunks"].as_array().unwrap() {
        match c["type"].as_str().unwrap() {
            "text" => {
                let mut ids = test_support::ids(&c["tokens"]);
                // The image's own markers come with its pieces.
                if ids.last() == Some(&255999) {
                    ids.pop();
                }
                if ids.first() == Some(&256000) {
                    ids.remove(0);
                }
                pieces.push(PromptPiece::Tokens(ids));
            }
            _ => pieces.extend(encoded.pieces.iter().cloned()),
        }
    }
    let prompt = Prompt { pieces };
    let seq = model.engine.new_sequence().unwrap();
    let mut logits = model.engine.prefill_prompt(seq, &prompt).unwrap();
    let (mut tokens, mut top1, mut margins) = (Vec::new(), Vec::new(), Vec::new());
    for step in 0..STEPS {
        let top = top_k_host(&logits, 2);
        tokens.push(top[0].0);
        top1.push(top[0].1 as f64);
        margins.push((top[0].1 - top[1].1) as f64);
        if step + 1 < STEPS {
            logits = model.engine.decode(seq, top[0].0).unwrap();
        }
    }
    Native {
        tokens,
        top1,
        margins,
        prompt_len: prompt.len(),
        embeddings,
    }
}

#[test]
fn browser_vision_greedy_equals_native() {
    let Some(model) = test_support::model_path("gemma3") else {
        return;
    };
    if !weft_tests::browser::ready("the browser vision test", true) {
        return;
    }
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data("gemma3/index.json")).unwrap()).unwrap();
    let image = index["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["image"] == IMAGE)
        .expect("the image is in index.json");
    let n = native_run(&model, image);
    eprintln!("native tokens {:?}\nmargins {:.3?}", n.tokens, n.margins);
    let embd_path =
        std::env::temp_dir().join(format!("weft-vision-embd-{}.f32", std::process::id()));
    let bytes: Vec<u8> = n.embeddings.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&embd_path, bytes).unwrap();
    let expect = serde_json::json!({
        "tokens": n.tokens,
        "top1": n.top1,
        "margins": n.margins,
        "promptTokens": n.prompt_len,
        "nearTie": test_support::MIN_MARGIN,
        "logitTolerance": LOGIT_TOLERANCE,
    });
    let out = Command::new("node")
        .arg(root().join("tests/browser/vision.mjs"))
        .env("WEFT_MODEL", &model)
        .env("WEFT_MMPROJ", data("gemma3/mmproj-gemma3-tiny-f16.gguf"))
        .env("WEFT_IMAGE", data(&format!("images/{IMAGE}")))
        .env("WEFT_IMAGE_PNG", data(&format!("images/{PNG}")))
        .env("WEFT_VISION_EXPECT", expect.to_string())
        .env("WEFT_VISION_EMBD", &embd_path)
        .output()
        .expect("running node tests/browser/vision.mjs");
    let _ = std::fs::remove_file(&embd_path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    assert!(
        out.status.success(),
        "the browser vision test failed: {stdout}"
    );
    let figures: serde_json::Value =
        serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
            .expect("vision.mjs prints a JSON summary");
    assert_eq!(figures["ok"], true);
}
