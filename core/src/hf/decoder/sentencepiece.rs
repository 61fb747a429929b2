//! Gemma's SentencePiece `tokenizer.model` as llama.cpp's `llama` tokenizer keys (tokens,
//! scores, token types), following `_create_vocab_sentencepiece` of llama.cpp's converter:
//! pieces by id, padded to `config.vocab_size`, then `tokenizer_config.json`'s
//! `added_tokens_decoder` marking control and user-defined tokens.
//!
//! The model file is a protobuf `ModelProto`; only its repeated `pieces` (field 1: `piece`
//! string, `score` float, `type` enum) matter here, so the few lines of wire-format reading
//! below stand in for a protobuf code generator and the `.proto` file.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value as Json;

use super::config::DecoderConfig;
use super::vocab::{CONTROL, NORMAL, UNUSED, USER_DEFINED};
use crate::gguf::Value;
use crate::hf::HfError;

pub struct SpVocab {
    tokens: Vec<String>,
    scores: Vec<f32>,
    types: Vec<i32>,
}

impl SpVocab {
    pub fn ids(&self) -> HashMap<String, u32> {
        let mut ids = HashMap::new();
        for (i, t) in self.tokens.iter().enumerate() {
            ids.entry(t.clone()).or_insert(i as u32);
        }
        ids
    }

    pub fn into_metadata(self) -> Vec<(String, Value)> {
        vec![
            (
                "tokenizer.ggml.tokens".into(),
                Value::Array(self.tokens.into_iter().map(Value::String).collect()),
            ),
            (
                "tokenizer.ggml.scores".into(),
                Value::Array(self.scores.into_iter().map(Value::F32).collect()),
            ),
            (
                "tokenizer.ggml.token_type".into(),
                Value::Array(self.types.into_iter().map(Value::I32).collect()),
            ),
            ("tokenizer.ggml.add_space_prefix".into(), Value::Bool(false)),
        ]
    }
}

/// A protobuf reader over one message's bytes.
struct Wire<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Wire<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.at)?;
            self.at += 1;
            v |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    /// The next field: (number, wire type, bytes for length-delimited / fixed, varint value).
    fn field(&mut self) -> Option<(u64, &'a [u8], u64)> {
        let key = self.varint()?;
        let (num, wt) = (key >> 3, key & 7);
        match wt {
            0 => Some((num, &[], self.varint()?)),
            1 => Some((num, self.take(8)?, 0)),
            2 => {
                let n = self.varint()? as usize;
                Some((num, self.take(n)?, 0))
            }
            5 => Some((num, self.take(4)?, 0)),
            _ => None,
        }
    }
}

/// (piece, score, SentencePiece type) for each piece of a `ModelProto`.
fn pieces(bytes: &[u8]) -> Option<Vec<(String, f32, u64)>> {
    let mut out = Vec::new();
    let mut w = Wire { b: bytes, at: 0 };
    while w.at < bytes.len() {
        let (num, data, _) = w.field()?;
        if num != 1 {
            continue;
        }
        let (mut piece, mut score, mut ty) = (String::new(), 0f32, 1u64);
        let mut p = Wire { b: data, at: 0 };
        while p.at < data.len() {
            let (n, d, v) = p.field()?;
            match n {
                1 => piece = String::from_utf8_lossy(d).into_owned(),
                2 => score = f32::from_le_bytes(d.try_into().ok()?),
                3 => ty = v,
                _ => {}
            }
        }
        out.push((piece, score, ty));
    }
    Some(out)
}

pub fn read_vocab(path: &Path, config: &DecoderConfig, tc: &Json) -> Result<SpVocab, HfError> {
    let bytes = std::fs::read(path).map_err(|e| HfError::io(path, e))?;
    let list = pieces(&bytes)
        .filter(|l| !l.is_empty())
        .ok_or_else(|| HfError::Config {
            path: path.display().to_string(),
            message: "not a SentencePiece model (no pieces could be read)".into(),
        })?;
    let n = config.vocab_size.unwrap_or(list.len()).max(list.len());
    let mut v = SpVocab {
        tokens: (0..n).map(|i| format!("[PAD{i}]")).collect(),
        scores: vec![-10000.0; n],
        types: vec![UNUSED; n],
    };
    for (i, (piece, score, ty)) in list.into_iter().enumerate() {
        v.tokens[i] = piece;
        v.scores[i] = score;
        // SentencePiece: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte;
        // the converter keeps all but user-defined, which it reads as normal.
        v.types[i] = match ty {
            2 | 3 | 5 | 6 => ty as i32,
            _ => NORMAL,
        };
    }
    if let Some(added) = tc["added_tokens_decoder"].as_object() {
        for (id, data) in added {
            let (Ok(id), Some(text)) = (id.parse::<usize>(), data["content"].as_str()) else {
                continue;
            };
            if id >= n {
                continue;
            }
            if data["special"].as_bool() == Some(true) || super::vocab::looks_special(text) {
                v.types[id] = CONTROL;
                v.tokens[id] = text.to_string();
            } else {
                v.types[id] = USER_DEFINED;
                v.tokens[id] = text.replace('\u{2581}', " ");
            }
            v.scores[id] = -1000.0;
        }
    }
    Ok(v)
}
