//! The tokenizer embedded in a UMT5 GGUF (`tokenizer.ggml.model = t5`, llama.cpp's Unigram
//! "UGM" tokenizer) turned back into the Hugging Face `tokenizer.json` it describes, which
//! [`Tokenizer::from_tokenizer_json`] reads: the inverse of `umt5_vocab` (what `weft convert`
//! and llama.cpp's T5 converter write).
//!
//! The pieces: a Unigram model over the pieces and scores (the trailing unused `[PADn]`
//! pieces the converter pads the vocabulary with are left out, since they only fill embedding
//! rows), the control / unknown pieces as special added tokens; the normalizer is the
//! precompiled charsmap (SentencePiece's compiled NFKC rules) or, in a file without one, NFKC
//! itself (SentencePiece's default rule, what a charsmap compiles), then the collapse of runs of
//! spaces when `remove_extra_whitespaces`; a Metaspace pre-tokenizer whose dummy prefix follows
//! `add_space_prefix`; `</s>` appended when `add_eos_token`.

use base64::Engine;
use serde_json::{json, Value as Json};

use crate::gguf::{Gguf, Value};
use crate::tokenizer::Tokenizer;

/// SentencePiece token types, as llama.cpp numbers them.
const UNKNOWN: i64 = 2;
const CONTROL: i64 = 3;
const UNUSED: i64 = 5;
const BYTE: i64 = 6;

/// The `tokenizer.json` (as JSON) that the `t5` tokenizer keys of `g` describe.
pub fn tokenizer_json(g: &Gguf) -> Result<Json, String> {
    if g.get_str("tokenizer.ggml.model") != Some("t5") {
        return Err(format!(
            "tokenizer.ggml.model is {:?}, not \"t5\" (UMT5's Unigram tokenizer)",
            g.get_str("tokenizer.ggml.model").unwrap_or("missing")
        ));
    }
    let array = |key: &str| g.get_array(key).ok_or_else(|| format!("{key} is missing"));
    let tokens = array("tokenizer.ggml.tokens")?;
    let scores = array("tokenizer.ggml.scores")?;
    let types = array("tokenizer.ggml.token_type")?;
    if scores.len() != tokens.len() || types.len() != tokens.len() {
        return Err(format!(
            "{} tokens, {} scores and {} token types",
            tokens.len(),
            scores.len(),
            types.len()
        ));
    }
    let ty = |i: usize| types[i].as_i64().unwrap_or(1);
    // The converter pads the vocabulary to the embedding rows with unused pieces at the end.
    let mut n = tokens.len();
    while n > 0 && ty(n - 1) == UNUSED {
        n -= 1;
    }
    let mut vocab = Vec::with_capacity(n);
    let mut added = Vec::new();
    for i in 0..n {
        let piece = tokens[i].as_str().ok_or("a token is not a string")?;
        let score = scores[i].as_f64().ok_or("a score is not a number")?;
        vocab.push(json!([piece, score]));
        if matches!(ty(i), CONTROL | UNKNOWN) {
            added.push(json!({
                "id": i, "content": piece, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true,
            }));
        }
    }
    let id = |key: &str| g.get_u64(key).filter(|&i| (i as usize) < n);
    let unk = id("tokenizer.ggml.unknown_token_id")
        .or_else(|| (0..n).find(|&i| ty(i) == UNKNOWN).map(|i| i as u64));

    let mut normalizers = Vec::new();
    match g.get_array("tokenizer.ggml.precompiled_charsmap") {
        Some(bytes) if !bytes.is_empty() => {
            let bytes: Vec<u8> = bytes
                .iter()
                .map(|b| match b {
                    Value::U8(b) => Ok(*b),
                    Value::I8(b) => Ok(*b as u8),
                    _ => Err("the precompiled charsmap is not bytes".to_string()),
                })
                .collect::<Result<_, _>>()?;
            let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
            normalizers.push(json!({"type": "Precompiled", "precompiled_charsmap": b64}));
        }
        _ => normalizers.push(json!({"type": "NFKC"})),
    }
    if g.get_bool("tokenizer.ggml.remove_extra_whitespaces") == Some(true) {
        normalizers.push(json!({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}));
    }
    let scheme = if g.get_bool("tokenizer.ggml.add_space_prefix") != Some(false) {
        "always"
    } else {
        "never"
    };
    let metaspace = json!({"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": scheme, "split": true});
    let eos = id("tokenizer.ggml.eos_token_id");
    let post = match (g.get_bool("tokenizer.ggml.add_eos_token"), eos) {
        (Some(true), Some(eos)) => {
            let text = tokens[eos as usize].as_str().unwrap_or("</s>");
            let a = json!({"Sequence": {"id": "A", "type_id": 0}});
            let b = json!({"Sequence": {"id": "B", "type_id": 0}});
            let e = json!({"SpecialToken": {"id": text, "type_id": 0}});
            json!({
                "type": "TemplateProcessing",
                "single": [a, e],
                "pair": [a, e, b, e],
                "special_tokens": {text: {"id": text, "ids": [eos], "tokens": [text]}},
            })
        }
        _ => Json::Null,
    };
    let byte_fallback = (0..n).any(|i| ty(i) == BYTE);
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": metaspace,
        "post_processor": post,
        "decoder": metaspace,
        "model": {"type": "Unigram", "unk_id": unk, "vocab": vocab, "byte_fallback": byte_fallback},
    }))
}

/// The tokenizer a UMT5 GGUF embeds.
pub fn from_gguf(g: &Gguf) -> Result<Tokenizer, String> {
    let json = tokenizer_json(g)?;
    let bytes = serde_json::to_vec(&json).map_err(|e| e.to_string())?;
    Tokenizer::from_tokenizer_json(&bytes).map_err(|e| e.to_string())
}
