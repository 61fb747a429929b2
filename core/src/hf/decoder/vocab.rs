//! The tokenizer of a decoder folder as llama.cpp's `tokenizer.ggml.*` keys: a byte-level BPE
//! `tokenizer.json` (llama/SmolLM, qwen2) as the `gpt2` model with merges and a pre-tokenizer
//! name, or Gemma's SentencePiece `tokenizer.model` as the `llama` model with scores. Special
//! token ids, `add_bos_token` and the chat template come from `tokenizer_config.json` (and
//! `config.json` for ids it lacks), as gguf-py's `SpecialVocab` reads them.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value as Json;

use super::config::{DecoderConfig, Family};
use super::sentencepiece;
use crate::gguf::Value;
use crate::hf::config::read_json;
use crate::hf::HfError;

/// llama.cpp's token types.
pub const NORMAL: i32 = 1;
pub const CONTROL: i32 = 3;
pub const USER_DEFINED: i32 = 4;
pub const UNUSED: i32 = 5;

/// Added tokens llama.cpp treats as control tokens even when not marked special
/// (`does_token_look_special`).
pub(super) fn looks_special(t: &str) -> bool {
    matches!(t, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (t.starts_with("<|") && t.ends_with("|>"))
        || (t.starts_with("<\u{ff5c}") && t.ends_with("\u{ff5c}>"))
        || (t.starts_with("<unused") && t.ends_with('>'))
}

fn bad(path: &Path, message: impl Into<String>) -> HfError {
    HfError::Config {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// The `tokenizer.*` metadata for the folder `dir`.
pub fn metadata(dir: &Path, config: &DecoderConfig) -> Result<Vec<(String, Value)>, HfError> {
    let tc_path = dir.join("tokenizer_config.json");
    let tc: Json = if tc_path.is_file() {
        read_json(&tc_path)?
    } else {
        Json::Null
    };
    let tj_path = dir.join("tokenizer.json");
    let mut m = Vec::new();
    let tj: Json;
    let ids: HashMap<String, u32>;
    if config.family() == Family::Gemma3 {
        let sp = sentencepiece::read_vocab(&dir.join("tokenizer.model"), config, &tc)?;
        ids = sp.ids();
        tj = if tj_path.is_file() {
            read_json(&tj_path)?
        } else {
            Json::Null
        };
        m.push(("tokenizer.ggml.model".into(), Value::String("llama".into())));
        m.push(("tokenizer.ggml.pre".into(), Value::String("default".into())));
        m.extend(sp.into_metadata());
    } else {
        tj = read_json(&tj_path)?;
        let bpe = bpe_vocab(&tj_path, &tj, config)?;
        ids = bpe.ids;
        m.push(("tokenizer.ggml.model".into(), Value::String("gpt2".into())));
        let pre = pre_tokenizer(&tj_path, &tj, config.family())?;
        m.push(("tokenizer.ggml.pre".into(), Value::String(pre.into())));
        m.push(("tokenizer.ggml.tokens".into(), strings(bpe.tokens)));
        let types = bpe.types.into_iter().map(Value::I32).collect();
        m.push(("tokenizer.ggml.token_type".into(), Value::Array(types)));
        m.push(("tokenizer.ggml.merges".into(), strings(bpe.merges)));
    }
    m.extend(special_tokens(&tc, &tj, config, &ids));
    if let Some(t) = chat_template(dir, &tc) {
        m.push(("tokenizer.chat_template".into(), Value::String(t)));
    }
    Ok(m)
}

fn strings(v: Vec<String>) -> Value {
    Value::Array(v.into_iter().map(Value::String).collect())
}

struct Bpe {
    tokens: Vec<String>,
    types: Vec<i32>,
    merges: Vec<String>,
    ids: HashMap<String, u32>,
}

/// Tokens by id (the model's vocabulary and the added tokens), padded to `config.vocab_size`
/// with `[PADn]` as llama.cpp's `get_vocab_base` does, with types and merges.
fn bpe_vocab(path: &Path, tj: &Json, config: &DecoderConfig) -> Result<Bpe, HfError> {
    let model = &tj["model"];
    if model["type"].as_str() != Some("BPE") {
        return Err(bad(path, "a llama or qwen2 model needs a BPE tokenizer"));
    }
    let vocab = model["vocab"]
        .as_object()
        .ok_or_else(|| bad(path, "model.vocab is missing"))?;
    let mut by_id: HashMap<u32, (String, i32)> = HashMap::new();
    for (tok, id) in vocab {
        let id = id
            .as_u64()
            .ok_or_else(|| bad(path, "model.vocab ids must be numbers"))?;
        by_id.insert(id as u32, (tok.clone(), NORMAL));
    }
    for t in tj["added_tokens"].as_array().into_iter().flatten() {
        let (Some(id), Some(text)) = (t["id"].as_u64(), t["content"].as_str()) else {
            continue;
        };
        let ty = if t["special"].as_bool() == Some(true) || looks_special(text) {
            CONTROL
        } else {
            USER_DEFINED
        };
        by_id.insert(id as u32, (text.to_string(), ty));
    }
    let max_id = by_id.keys().max().map_or(0, |&m| m as usize + 1);
    let n = config.vocab_size.unwrap_or(max_id).max(max_id);
    let mut tokens = Vec::with_capacity(n);
    let mut types = Vec::with_capacity(n);
    let mut ids = HashMap::new();
    for i in 0..n {
        match by_id.remove(&(i as u32)) {
            Some((text, ty)) => {
                ids.insert(text.clone(), i as u32);
                tokens.push(text);
                types.push(ty);
            }
            None => {
                tokens.push(format!("[PAD{i}]"));
                types.push(UNUSED);
            }
        }
    }
    let mut merges = Vec::new();
    for m in model["merges"].as_array().into_iter().flatten() {
        match m {
            Json::String(s) => merges.push(s.clone()),
            Json::Array(pair) if pair.len() == 2 => {
                let a = pair[0].as_str().unwrap_or_default();
                let b = pair[1].as_str().unwrap_or_default();
                merges.push(format!("{a} {b}"));
            }
            _ => return Err(bad(path, "model.merges has an entry that is not a pair")),
        }
    }
    Ok(Bpe {
        tokens,
        types,
        merges,
        ids,
    })
}

const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// llama.cpp's pre-tokenizer name (`tokenizer.ggml.pre`). llama.cpp recognises a tokenizer by
/// a hash of its output on a test text; without running the Hugging Face tokenizer this
/// recognises the same few by the structure of `pre_tokenizer`, and refuses others rather
/// than write a name that would split text differently.
fn pre_tokenizer(path: &Path, tj: &Json, family: Family) -> Result<&'static str, HfError> {
    let pre = &tj["pre_tokenizer"];
    let parts: Vec<&Json> = match pre["type"].as_str() {
        Some("Sequence") => pre["pretokenizers"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
        Some(_) => vec![pre],
        None => vec![],
    };
    let kinds: Vec<&str> = parts.iter().filter_map(|p| p["type"].as_str()).collect();
    let split_regex = parts
        .iter()
        .find(|p| p["type"] == "Split")
        .and_then(|p| p["pattern"]["Regex"].as_str());
    let name = match (kinds.as_slice(), split_regex) {
        (["Split", "ByteLevel"], Some(r)) if r == QWEN2_SPLIT => Some("qwen2"),
        (["Split", "ByteLevel"], Some(r)) if r == LLAMA3_SPLIT => Some("llama-bpe"),
        (["Digits", "ByteLevel"], _) if parts[0]["individual_digits"] == true => {
            // StarCoder's scheme; SmolLM reuses it under its own name in llama.cpp.
            Some(if family == Family::Llama {
                "smollm"
            } else {
                "starcoder"
            })
        }
        (["ByteLevel"], _) => Some("gpt2"),
        _ => None,
    };
    name.ok_or_else(|| {
        bad(
            path,
            format!(
                "pre-tokenizer {} is not one the converter recognises (qwen2, llama-bpe, \
                 smollm/starcoder, gpt2)",
                kinds.join("+")
            ),
        )
    })
}

/// A token named in `tokenizer_config.json`: a string, or an AddedToken object.
fn token_text(v: &Json) -> Option<&str> {
    v.as_str().or_else(|| v["content"].as_str())
}

fn json_id(v: Option<&Json>) -> Option<u32> {
    match v? {
        Json::Number(n) => n.as_u64().map(|x| x as u32),
        Json::Array(a) => a.first().and_then(|x| x.as_u64()).map(|x| x as u32),
        _ => None,
    }
}

/// `tokenizer.ggml.{bos,eos,unknown,padding,...}_token_id` and `add_{bos,eos}_token`.
fn special_tokens(
    tc: &Json,
    tj: &Json,
    config: &DecoderConfig,
    ids: &HashMap<String, u32>,
) -> Vec<(String, Value)> {
    let mut m = Vec::new();
    for (typ, key) in [
        ("bos", "bos"),
        ("eos", "eos"),
        ("unk", "unknown"),
        ("sep", "seperator"),
        ("pad", "padding"),
        ("mask", "mask"),
    ] {
        let from_tc = token_text(&tc[format!("{typ}_token")]).and_then(|t| ids.get(t).copied());
        let from_config = match typ {
            "bos" => json_id(config.bos_token_id.as_ref()),
            "eos" => json_id(config.eos_token_id.as_ref()),
            _ => None,
        };
        if let Some(id) = from_tc.or(from_config) {
            m.push((format!("tokenizer.ggml.{key}_token_id"), Value::U32(id)));
        }
    }
    for typ in ["bos", "eos"] {
        let key = format!("add_{typ}_token");
        let on = tc[&key]
            .as_bool()
            .or_else(|| post_processor_adds(tj, typ, tc, ids));
        if let Some(on) = on {
            m.push((format!("tokenizer.ggml.{key}"), Value::Bool(on)));
        }
    }
    m
}

/// Whether `tokenizer.json`'s TemplateProcessing post-processor puts the bos/eos token around a
/// single sequence (how gguf-py decides when `tokenizer_config.json` does not say).
fn post_processor_adds(
    tj: &Json,
    typ: &str,
    tc: &Json,
    ids: &HashMap<String, u32>,
) -> Option<bool> {
    let pp = &tj["post_processor"];
    if pp["type"] != "TemplateProcessing" {
        return None;
    }
    let single = pp["single"].as_array()?;
    let tok = token_text(&tc[format!("{typ}_token")])?;
    ids.get(tok)?;
    let specials: Vec<&str> = single
        .iter()
        .filter_map(|p| p["SpecialToken"]["id"].as_str())
        .collect();
    let first_is_seq = single.first().map(|p| p.get("Sequence").is_some());
    let last_is_seq = single.last().map(|p| p.get("Sequence").is_some());
    Some(match typ {
        "bos" => first_is_seq == Some(false) && specials.first() == Some(&tok),
        _ => last_is_seq == Some(false) && specials.last() == Some(&tok),
    })
}

/// The chat template: `chat_template.jinja` when the folder has one (newer transformers),
/// else `tokenizer_config.json`'s `chat_template` (a string, or the `default` of a list).
fn chat_template(dir: &Path, tc: &Json) -> Option<String> {
    if let Ok(t) = std::fs::read_to_string(dir.join("chat_template.jinja")) {
        return Some(t);
    }
    match &tc["chat_template"] {
        Json::String(s) => Some(s.clone()),
        Json::Array(list) => list
            .iter()
            .find(|t| t["name"] == "default")
            .and_then(|t| t["template"].as_str())
            .map(str::to_string),
        _ => None,
    }
}
