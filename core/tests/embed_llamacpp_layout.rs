//! The GGUF Weft writes from a Hugging Face folder (`HfModel::to_gguf`) against the one
//! llama.cpp's own converter makes of it (`scripts/convert-minilm-llamacpp.sh`, run once by
//! hand: it needs the llama.cpp sources and PyTorch, so CI does not run this): the same
//! tensors (names, types, shapes, bytes), the same `bert.*` hyper-parameters and vocabulary;
//! and llama.cpp's file embeds like the folder (cosine 0.9999 with sentence-transformers).
//!
//! `cargo test -p weft-core --test embed_llamacpp_layout -- --ignored`

use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::embed::{cosine, EmbedInput, EmbedOptions, Embedder};
use weft_core::gguf::ModelFile;
use weft_core::hf::HfModel;
use weft_core::test_support::{
    embedding_reference, floats, minilm_dir, models_dir, EMBED_MIN_COSINE,
};

#[test]
#[ignore = "needs the llama.cpp-converted GGUF (scripts/convert-minilm-llamacpp.sh)"]
fn our_gguf_has_llama_cpp_layout() {
    let Some(dir) = minilm_dir() else { return };
    let theirs_path = models_dir().join("all-MiniLM-L6-v2.llamacpp-f32.gguf");
    let theirs =
        Arc::new(ModelFile::open(&theirs_path).expect("run scripts/convert-minilm-llamacpp.sh"));
    let hf = HfModel::open(&dir).unwrap();
    let ours = ModelFile::from_vec(hf.to_gguf()).unwrap();
    let (a, b) = (&ours.gguf, &theirs.gguf);
    assert_eq!(a.tensors.len(), b.tensors.len());
    for t in &b.tensors {
        let mine = a
            .tensor(&t.name)
            .unwrap_or_else(|| panic!("we lack {}", t.name));
        assert_eq!((mine.ty, &mine.dims), (t.ty, &t.dims), "{}", t.name);
        assert_eq!(
            ours.tensor_data(mine),
            theirs.tensor_data(t),
            "{} bytes",
            t.name
        );
    }
    for (k, v) in &b.metadata {
        let same_meaning = k.starts_with("bert.")
            || k == "general.architecture"
            || k.starts_with("tokenizer.ggml.")
                && !k.ends_with(".pre")
                && !k.ends_with("_count")
                && !k.contains("normalizer");
        if same_meaning {
            assert_eq!(a.get(k), Some(v), "{k}");
        }
    }
    // llama.cpp's file through Weft's GGUF path gives sentence-transformers' vectors.
    let r = embedding_reference();
    // (It does not carry sentence-transformers' 256-token limit: it takes all 512 positions,
    // so only inputs within 256 tokens are comparable.)
    let sents: Vec<&serde_json::Value> = r["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["n_tokens_untruncated"].as_u64().unwrap() <= 256)
        .collect();
    let inputs: Vec<EmbedInput> = sents
        .iter()
        .map(|s| EmbedInput::Text(s["text"].as_str().unwrap().into()))
        .collect();
    let mut e = Embedder::from_gguf(theirs, Box::new(CpuBackend::new(2))).unwrap();
    let out = e.embed(&inputs, &EmbedOptions::default()).unwrap();
    for (v, s) in out.vectors.iter().zip(&sents) {
        // llama.cpp's file says nothing of normalisation: compare directions.
        let c = cosine(v, &floats(&s["embedding"]));
        assert!(c >= EMBED_MIN_COSINE, "{:?}: {c}", s["text"]);
    }
}
