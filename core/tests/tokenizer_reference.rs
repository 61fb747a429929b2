//! Tokenization must match llama.cpp id for id on the three reference models.

use weft_core::gguf::ModelFile;
use weft_core::test_support::{model_path, reference};
use weft_core::tokenizer::{StreamDecoder, Tokenizer};

fn load(key: &str) -> Option<(Tokenizer, serde_json::Value)> {
    let path = model_path(key)?;
    let refdata = reference(key)?;
    let file = ModelFile::open(&path).expect("open model");
    let tok = Tokenizer::from_gguf(&file.gguf).expect("build tokenizer");
    Some((tok, refdata))
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("id array")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

fn check_model(key: &str) {
    let Some((tok, r)) = load(key) else { return };
    let mut failures = Vec::new();
    for case in r["tokenize"].as_array().expect("tokenize[]") {
        let text = case["text"].as_str().expect("text");
        let got = tok.encode(text, false, false);
        if got != ids(&case["ids"]) {
            failures.push(format!("{text:?}: got {got:?}, want {:?}", ids(&case["ids"])));
        }
        let got = tok.encode(text, false, true);
        if got != ids(&case["ids_special"]) {
            failures.push(format!("{text:?} (special): got {got:?}"));
        }
        // Decoding gives the text back.
        assert_eq!(tok.decode(&ids(&case["ids"]), false), text, "{key}");
    }
    for case in r["cases"].as_array().expect("cases[]") {
        let prompt = case["prompt"].as_str().expect("prompt");
        let chat = case["kind"] == "chat";
        let add_bos = case["add_bos"].as_bool().expect("add_bos");
        assert_eq!(tok.add_bos_default(), add_bos, "{key}: add_bos");
        let got = tok.encode(prompt, true, chat);
        let want = ids(&case["prompt_ids"]);
        if got != want {
            failures.push(format!("prompt {prompt:?}: got {got:?}, want {want:?}"));
        }
        assert_eq!(
            tok.decode(&want, true),
            format!("{}{prompt}", if add_bos { tok.token_text(want[0]).unwrap() } else { String::new() }),
            "{key}: decode with special tokens"
        );
        // Generated pieces streamed one by one give the same text as a whole decode.
        let gen: Vec<u32> = case["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| s["token"].as_u64().unwrap() as u32)
            .collect();
        let mut d = StreamDecoder::new(true);
        let mut streamed = String::new();
        for &id in &gen {
            let part = d.push(&tok, id);
            streamed.push_str(&part);
        }
        streamed.push_str(&d.finish());
        assert_eq!(streamed, tok.decode(&gen, true), "{key}: stream decode");
        let pieces: String = case["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["piece"].as_str().unwrap_or(""))
            .collect();
        if !pieces.contains('\u{FFFD}') {
            assert_eq!(streamed, pieces, "{key}: streamed text vs llama.cpp pieces");
        }
    }
    assert!(failures.is_empty(), "{key}:\n{}", failures.join("\n"));
}

#[test]
fn gemma3_matches_llama_cpp() {
    check_model("gemma3");
    if let Some((tok, _)) = load("gemma3") {
        assert_eq!(tok.kind(), "llama");
        assert_eq!(tok.bos(), Some(2));
        assert_eq!(tok.eos(), Some(1));
        assert_eq!(tok.eog_ids(), &[1, 106]);
        assert_eq!(tok.token_id("<end_of_turn>"), Some(106));
        assert_eq!(tok.vocab_size(), 262144);
    }
}

#[test]
fn smollm2_matches_llama_cpp() {
    check_model("smollm2");
    if let Some((tok, _)) = load("smollm2") {
        assert_eq!(tok.kind(), "gpt2");
        assert!(tok.is_eog(2) && tok.is_eog(0), "{:?}", tok.eog_ids());
        assert!(!tok.add_bos_default());
    }
}

#[test]
fn qwen2_matches_llama_cpp() {
    check_model("qwen2");
    if let Some((tok, _)) = load("qwen2") {
        assert!(tok.is_eog(151645) && tok.is_eog(151643), "{:?}", tok.eog_ids());
        assert_eq!(tok.eos(), Some(151645));
    }
}

/// Special tokens: parsed only when asked, user-defined ones always.
#[test]
fn special_token_parsing() {
    let Some((tok, _)) = load("qwen2") else { return };
    let im_start = tok.token_id("<|im_start|>").unwrap();
    let with = tok.encode("<|im_start|>user", false, true);
    assert_eq!(with[0], im_start);
    let without = tok.encode("<|im_start|>user", false, false);
    assert!(!without.contains(&im_start) && without.len() > 3, "{without:?}");
    // <tool_call> is user-defined in Qwen's vocabulary: always one token.
    let tool = tok.token_id("<tool_call>").unwrap();
    assert_eq!(tok.encode("a<tool_call>b", false, false)[1], tool);
    assert_eq!(tok.decode(&[im_start], false), "");
    assert_eq!(tok.decode(&[im_start], true), "<|im_start|>");
}
