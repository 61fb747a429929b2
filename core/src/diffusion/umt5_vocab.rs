//! The tokenizer of a UMT5 GGUF, as llama.cpp's T5 converter embeds it (`tokenizer.ggml.model
//! = t5`, its Unigram "UGM" tokenizer): pieces, scores and SentencePiece token types, the
//! normalizer's precompiled charsmap, space-prefix and whitespace flags, special ids. llama.cpp
//! reads these from `spiece.model`; a diffusers pipeline ships `tokenizer.json` (T5TokenizerFast)
//! instead, which carries the same facts: the Unigram vocabulary with its scores, `unk_id`, the
//! special added tokens, a `Precompiled` normalizer (base64 charsmap) and a `Replace` of runs of
//! spaces (SentencePiece's remove_extra_whitespaces), a Metaspace pre-tokenizer (the dummy
//! prefix) and a post-processor that appends `</s>`.

use base64::Engine;

use crate::gguf::Value;

/// SentencePiece token types, as llama.cpp numbers them.
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const UNUSED: i32 = 5;
const BYTE: i32 = 6;

fn normalizers(n: &serde_json::Value) -> Vec<&serde_json::Value> {
    match n["type"].as_str() {
        Some("Sequence") => n["normalizers"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
        Some(_) => vec![n],
        None => Vec::new(),
    }
}

/// The `tokenizer.ggml.*` keys for `tokenizer.json`'s bytes, with the vocabulary padded to
/// `vocab_size` (the model's embedding rows) with unused `[PADn]` pieces as llama.cpp pads.
pub(super) fn metadata(json: &[u8], vocab_size: usize) -> Result<Vec<(String, Value)>, String> {
    let j: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| format!("tokenizer.json is not JSON: {e}"))?;
    let model = &j["model"];
    if model["type"].as_str() != Some("Unigram") {
        return Err(format!(
            "tokenizer model {} is not Unigram (UMT5's SentencePiece)",
            model["type"]
        ));
    }
    let vocab = model["vocab"]
        .as_array()
        .ok_or("tokenizer.json has no model.vocab")?;
    if vocab.len() > vocab_size {
        return Err(format!(
            "the tokenizer has {} pieces, the model only {vocab_size} embeddings",
            vocab.len()
        ));
    }
    let mut tokens = Vec::with_capacity(vocab_size);
    let mut scores = Vec::with_capacity(vocab_size);
    let mut types = Vec::with_capacity(vocab_size);
    let byte_fallback = model["byte_fallback"].as_bool() == Some(true);
    for (i, entry) in vocab.iter().enumerate() {
        let piece = entry[0].as_str().ok_or("a vocabulary entry has no piece")?;
        let score = entry[1].as_f64().ok_or("a vocabulary entry has no score")?;
        tokens.push(piece.to_string());
        scores.push(score as f32);
        let is_byte =
            byte_fallback && piece.len() == 6 && piece.starts_with("<0x") && piece.ends_with('>');
        types.push(if is_byte {
            BYTE
        } else if model["unk_id"].as_u64() == Some(i as u64) {
            UNKNOWN
        } else {
            NORMAL
        });
    }
    let mut id_of = std::collections::HashMap::new();
    for t in j["added_tokens"].as_array().into_iter().flatten() {
        let (Some(id), Some(text)) = (t["id"].as_u64(), t["content"].as_str()) else {
            continue;
        };
        id_of.insert(text.to_string(), id as u32);
        if t["special"].as_bool() == Some(true) {
            if let Some(ty) = types.get_mut(id as usize) {
                if *ty != UNKNOWN {
                    *ty = CONTROL;
                }
            }
        }
    }
    for i in tokens.len()..vocab_size {
        tokens.push(format!("[PAD{i}]"));
        scores.push(-1000.0);
        types.push(UNUSED);
    }

    let mut charsmap = None;
    let mut collapse_spaces = false;
    for n in normalizers(&j["normalizer"]) {
        match n["type"].as_str() {
            Some("Precompiled") => {
                let b64 = n["precompiled_charsmap"].as_str().unwrap_or("");
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| format!("the precompiled charsmap is not base64: {e}"))?;
                charsmap = Some(bytes);
            }
            Some("Replace") if n["pattern"]["Regex"].as_str() == Some(" {2,}") => {
                collapse_spaces = true;
            }
            _ => {}
        }
    }
    let pre = &j["pre_tokenizer"];
    let metaspace = match pre["type"].as_str() {
        Some("Sequence") => pre["pretokenizers"]
            .as_array()
            .and_then(|a| a.iter().find(|p| p["type"] == "Metaspace")),
        Some("Metaspace") => Some(pre),
        _ => None,
    };
    let add_space_prefix = metaspace.is_some_and(|m| {
        m["prepend_scheme"]
            .as_str()
            .map_or(m["add_prefix_space"].as_bool().unwrap_or(true), |s| {
                s != "never"
            })
    });
    let single = j["post_processor"]["single"].as_array();
    let is_special =
        |x: Option<&serde_json::Value>| x.is_some_and(|v| v.get("SpecialToken").is_some());
    let add_bos = is_special(single.and_then(|s| s.first()));
    let add_eos = is_special(single.and_then(|s| s.last()));

    let mut m: Vec<(String, Value)> = vec![
        ("tokenizer.ggml.model".into(), Value::String("t5".into())),
        ("tokenizer.ggml.pre".into(), Value::String("default".into())),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(tokens.into_iter().map(Value::String).collect()),
        ),
        (
            "tokenizer.ggml.scores".into(),
            Value::Array(scores.into_iter().map(Value::F32).collect()),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
        (
            "tokenizer.ggml.add_space_prefix".into(),
            Value::Bool(add_space_prefix),
        ),
        (
            "tokenizer.ggml.remove_extra_whitespaces".into(),
            Value::Bool(collapse_spaces),
        ),
    ];
    if let Some(bytes) = charsmap {
        m.push((
            "tokenizer.ggml.precompiled_charsmap".into(),
            Value::Array(bytes.into_iter().map(Value::U8).collect()),
        ));
    }
    for (key, text) in [
        ("tokenizer.ggml.eos_token_id", "</s>"),
        ("tokenizer.ggml.padding_token_id", "<pad>"),
    ] {
        if let Some(&id) = id_of.get(text) {
            m.push((key.into(), Value::U32(id)));
        }
    }
    if let Some(unk) = model["unk_id"].as_u64() {
        m.push((
            "tokenizer.ggml.unknown_token_id".into(),
            Value::U32(unk as u32),
        ));
    }
    m.push(("tokenizer.ggml.add_bos_token".into(), Value::Bool(add_bos)));
    m.push(("tokenizer.ggml.add_eos_token".into(), Value::Bool(add_eos)));
    Ok(m)
}
