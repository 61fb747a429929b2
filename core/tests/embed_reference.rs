//! all-MiniLM-L6-v2 against sentence-transformers' own vectors (tests/reference/
//! all-MiniLM-L6-v2.embeddings.json): the Hugging Face folder and the same model as GGUF on the
//! CPU backend, the options (normalisation, dimensions, truncation, layouts), bad inputs and
//! bad folders, and a decoder chat model embedding.

use std::path::Path;
use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::embed::{cosine, EmbedError, EmbedInput, EmbedOptions, Embedder, Layout};
use weft_core::gguf::ModelFile;
use weft_core::hf::HfModel;
use weft_core::test_support::{
    embedding_reference, floats, ids, minilm_dir, model_path, EMBED_MIN_COSINE,
};

fn sentences(reference: &serde_json::Value) -> Vec<serde_json::Value> {
    reference["sentences"].as_array().unwrap().clone()
}

fn inputs(sents: &[serde_json::Value]) -> Vec<EmbedInput> {
    sents
        .iter()
        .map(|s| EmbedInput::Text(s["text"].as_str().unwrap().to_string()))
        .collect()
}

fn folder_embedder(dir: &Path) -> Embedder {
    let hf = HfModel::open(dir).unwrap();
    Embedder::from_hf(hf, Box::new(CpuBackend::new(2))).unwrap()
}

/// Every vector within the cosine bound of its reference (`key`: embedding or pooled).
fn check_all(what: &str, got: &[Vec<f32>], sents: &[serde_json::Value], key: &str) {
    let mut worst = (1.0f64, String::new());
    for (v, s) in got.iter().zip(sents) {
        let want = floats(&s[key]);
        assert_eq!(v.len(), want.len(), "{what}: length");
        let c = cosine(v, &want);
        if c < worst.0 {
            worst = (c, s["text"].as_str().unwrap().chars().take(40).collect());
        }
    }
    eprintln!("{what}: lowest cosine {:.7} ({:?})", worst.0, worst.1);
    assert!(
        worst.0 >= EMBED_MIN_COSINE,
        "{what}: cosine {} < {EMBED_MIN_COSINE} for {:?}",
        worst.0,
        worst.1
    );
}

#[test]
fn folder_matches_sentence_transformers_on_cpu() {
    let Some(dir) = minilm_dir() else { return };
    let r = embedding_reference();
    let sents = sentences(&r);
    assert!(sents.len() >= 30);
    let mut e = folder_embedder(&dir);
    assert_eq!(e.config().dim, 384);
    assert_eq!(e.config().max_tokens, 256);
    assert!(e.config().normalize);
    // Token ids (truncated to 256) are the reference's exactly.
    for (i, s) in sents.iter().enumerate() {
        let got = e.sequence(i, &inputs(&sents)[i], true).unwrap();
        assert_eq!(got, ids(&s["ids"]), "ids of {:?}", s["text"]);
    }
    let out = e.embed(&inputs(&sents), &EmbedOptions::default()).unwrap();
    check_all("folder, cpu", &out.vectors, &sents, "embedding");
    let want_tokens: usize = sents
        .iter()
        .map(|s| s["ids"].as_array().unwrap().len())
        .sum();
    assert_eq!(out.prompt_tokens, want_tokens);
    for v in &out.vectors {
        let n: f64 = v.iter().map(|&x| x as f64 * x as f64).sum();
        assert!((n - 1.0).abs() < 1e-5);
    }
    // Without normalisation: the pooled vectors before sentence-transformers' Normalize.
    let opts = EmbedOptions {
        normalize: Some(false),
        ..Default::default()
    };
    let raw = e.embed(&inputs(&sents), &opts).unwrap();
    check_all(
        "folder, cpu, not normalised",
        &raw.vectors,
        &sents,
        "pooled",
    );
    for (v, s) in raw.vectors.iter().zip(&sents) {
        let want = floats(&s["pooled"]);
        let (nv, nw) = (norm(v), norm(&want));
        assert!((nv - nw).abs() / nw < 1e-3, "norm {nv} vs {nw}");
    }
}

fn norm(v: &[f32]) -> f64 {
    v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt()
}

#[test]
fn padded_and_packed_steps_agree_and_batches_do_not_change_vectors() {
    let Some(dir) = minilm_dir() else { return };
    let r = embedding_reference();
    let sents = sentences(&r);
    let inp = inputs(&sents);
    let mut e = folder_embedder(&dir);
    let packed = e.embed(&inp, &EmbedOptions::default()).unwrap();
    e.set_layout(Layout::Padded, Some(1024));
    let padded = e.embed(&inp, &EmbedOptions::default()).unwrap();
    for (a, b) in packed.vectors.iter().zip(&padded.vectors) {
        assert!(cosine(a, b) > 0.999_999, "padded differs: {}", cosine(a, b));
    }
    // One at a time gives the same vectors as all together.
    e.set_layout(Layout::Packed, Some(4096));
    for i in [0, 5, 21, 33] {
        let one = e.embed(&inp[i..i + 1], &EmbedOptions::default()).unwrap();
        assert!(cosine(&one.vectors[0], &packed.vectors[i]) > 0.999_999);
    }
}

#[test]
fn dimensions_cut_then_renormalise_and_token_inputs_equal_text() {
    let Some(dir) = minilm_dir() else { return };
    let r = embedding_reference();
    let sents = sentences(&r);
    let mut e = folder_embedder(&dir);
    let text = EmbedInput::Text(sents[6]["text"].as_str().unwrap().into());
    let opts = EmbedOptions {
        dimensions: Some(128),
        ..Default::default()
    };
    let cut = e.embed(std::slice::from_ref(&text), &opts).unwrap();
    assert_eq!(cut.vectors[0].len(), 128);
    let mut want = floats(&sents[6]["pooled"])[..128].to_vec();
    weft_core::embed::l2_normalize(&mut want);
    assert!(cosine(&cut.vectors[0], &want) >= EMBED_MIN_COSINE);
    assert!((norm(&cut.vectors[0]) - 1.0).abs() < 1e-5);
    // Token ids of the text (without [CLS]/[SEP], which are added as for text).
    let all = ids(&sents[6]["ids"]);
    let tokens = EmbedInput::Tokens(all[1..all.len() - 1].to_vec());
    let a = e.embed(&[text, tokens], &EmbedOptions::default()).unwrap();
    assert!(cosine(&a.vectors[0], &a.vectors[1]) > 0.999_999);
}

#[test]
fn bad_inputs_are_clear_errors() {
    let Some(dir) = minilm_dir() else { return };
    let mut e = folder_embedder(&dir);
    let d = EmbedOptions::default();
    let err = |r: Result<_, EmbedError>| {
        r.map(|_: weft_core::embed::Embeddings| ())
            .unwrap_err()
            .to_string()
    };
    assert!(err(e.embed(&[], &d)).contains("no input"));
    // The empty string is valid: [CLS] [SEP], as sentence-transformers embeds it.
    let r = embedding_reference();
    let empty = e.embed(&["".into()], &d).unwrap();
    assert!(
        cosine(&empty.vectors[0], &floats(&r["sentences"][0]["embedding"])) >= EMBED_MIN_COSINE
    );
    let long: EmbedInput = "word ".repeat(400).into();
    let strict = EmbedOptions {
        truncate: false,
        ..d
    };
    let m = err(e.embed(std::slice::from_ref(&long), &strict));
    assert!(m.contains("402 tokens") && m.contains("256"), "{m}");
    assert_eq!(e.embed(&[long], &d).unwrap().prompt_tokens, 256);
    for bad in [0, 385] {
        let o = EmbedOptions {
            dimensions: Some(bad),
            ..d
        };
        assert!(err(e.embed(&["x".into()], &o)).contains("between 1 and the model's 384"));
    }
    let m = err(e.embed(&[EmbedInput::Tokens(vec![5, 999_999])], &d));
    assert!(m.contains("token id 999999"), "{m}");
}

/// A copy of the folder (symlinks to the big files) with `edit` applied.
fn folder_copy(dir: &Path, name: &str, edit: impl FnOnce(&Path)) -> std::path::PathBuf {
    let out = std::env::temp_dir().join(format!("weft-embed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(out.join("1_Pooling")).unwrap();
    for f in [
        "config.json",
        "modules.json",
        "sentence_bert_config.json",
        "tokenizer.json",
        "1_Pooling/config.json",
    ] {
        std::fs::copy(dir.join(f), out.join(f)).unwrap();
    }
    std::os::unix::fs::symlink(dir.join("model.safetensors"), out.join("model.safetensors"))
        .unwrap();
    edit(&out);
    out
}

#[test]
fn bad_folders_are_one_line_errors() {
    let Some(dir) = minilm_dir() else { return };
    let truncated = folder_copy(&dir, "truncated", |d| {
        let f = d.join("model.safetensors");
        let bytes = std::fs::read(&f).unwrap();
        std::fs::remove_file(&f).unwrap();
        std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
    });
    let m = HfModel::open(&truncated).err().unwrap().to_string();
    assert!(
        m.contains("model.safetensors") && m.contains("truncated"),
        "{m}"
    );
    assert!(!m.contains('\n'));
    let garbage = folder_copy(&dir, "garbage", |d| {
        let f = d.join("model.safetensors");
        std::fs::remove_file(&f).unwrap();
        std::fs::write(&f, b"not a safetensors file at all").unwrap();
    });
    let m = HfModel::open(&garbage).err().unwrap().to_string();
    assert!(m.contains("not a valid safetensors file"), "{m}");
    let llama = folder_copy(&dir, "arch", |d| {
        std::fs::write(
            d.join("config.json"),
            r#"{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}"#,
        )
        .unwrap();
    });
    let m = HfModel::open(&llama).err().unwrap().to_string();
    assert!(
        m.contains("config.json") && m.contains("\"llama\" is not supported"),
        "{m}"
    );
    let missing = folder_copy(&dir, "missing", |d| {
        std::fs::remove_file(d.join("tokenizer.json")).unwrap();
    });
    let m = HfModel::open(&missing).err().unwrap().to_string();
    assert!(m.contains("tokenizer.json: not found"), "{m}");
    for d in [truncated, garbage, llama, missing] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn the_same_model_as_gguf_gives_the_same_vectors() {
    let Some(dir) = minilm_dir() else { return };
    let r = embedding_reference();
    let sents = sentences(&r);
    let hf = HfModel::open(&dir).unwrap();
    let bytes = hf.to_gguf();
    let file = Arc::new(ModelFile::from_vec(bytes).unwrap());
    assert_eq!(file.gguf.architecture(), Some("bert"));
    let mut g = Embedder::from_gguf(file, Box::new(CpuBackend::new(2))).unwrap();
    assert_eq!(g.config().max_tokens, 256);
    assert!(g.config().normalize);
    // The GGUF's WordPiece vocabulary (llama.cpp's tokenizer) gives the reference ids.
    let mut differ = Vec::new();
    for (i, s) in sents.iter().enumerate() {
        let got = g.sequence(i, &inputs(&sents)[i], true).unwrap();
        if got != ids(&s["ids"]) {
            differ.push(format!("{:?}: {got:?} vs {:?}", s["text"], s["ids"]));
        }
    }
    assert!(
        differ.is_empty(),
        "the GGUF tokenizer differs:\n{}",
        differ.join("\n")
    );
    let out = g.embed(&inputs(&sents), &EmbedOptions::default()).unwrap();
    check_all("gguf, cpu", &out.vectors, &sents, "embedding");
    let mut f = folder_embedder(&dir);
    let folder = f.embed(&inputs(&sents), &EmbedOptions::default()).unwrap();
    for (a, b) in out.vectors.iter().zip(&folder.vectors) {
        assert!(cosine(a, b) >= EMBED_MIN_COSINE);
    }
}

#[test]
fn a_decoder_chat_model_embeds_with_last_token_pooling() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let mut e = Embedder::from_gguf(file, Box::new(CpuBackend::new(2))).unwrap();
    assert!(!e.is_encoder());
    let texts: Vec<EmbedInput> = ["The cat sits on the mat.", "A dog runs in the park.", "x"]
        .into_iter()
        .map(Into::into)
        .collect();
    let all = e.embed(&texts, &EmbedOptions::default()).unwrap();
    assert_eq!(all.vectors.len(), 3);
    assert_eq!(all.vectors[0].len(), e.config().dim);
    for (i, t) in texts.iter().enumerate() {
        let one = e
            .embed(std::slice::from_ref(t), &EmbedOptions::default())
            .unwrap();
        let c = cosine(&one.vectors[0], &all.vectors[i]);
        assert!(c > 0.9999, "input {i} alone vs in a batch: {c}");
        assert!((norm(&one.vectors[0]) - 1.0).abs() < 1e-4);
    }
    assert!(cosine(&all.vectors[0], &all.vectors[1]) < 0.9999);
}

/// Packed against padded steps on the reference sentences (mixed lengths, 2 to 256 tokens),
/// 2 threads: prints embeddings/s of each (docs/benchmarks.md). Run in release for figures:
/// `cargo test --release -p weft-core --test embed_reference -- --ignored --nocapture layouts`.
#[test]
#[ignore = "a measurement"]
fn layouts_speed() {
    let Some(dir) = minilm_dir() else { return };
    let r = embedding_reference();
    let sents = sentences(&r);
    let inp: Vec<EmbedInput> = (0..64)
        .map(|i| inputs(&sents)[i % sents.len()].clone())
        .collect();
    let mut e = folder_embedder(&dir);
    for layout in [
        Layout::Packed,
        Layout::Padded,
        Layout::Packed,
        Layout::Padded,
    ] {
        e.set_layout(layout, Some(4096));
        let t = std::time::Instant::now();
        e.embed(&inp, &EmbedOptions::default()).unwrap();
        let s = t.elapsed().as_secs_f64();
        eprintln!(
            "{layout:?}: {} inputs in {s:.2} s, {:.1} embeddings/s",
            inp.len(),
            inp.len() as f64 / s
        );
    }
}
