//! The vocabulary read from GGUF metadata (`tokenizer.ggml.*`), with llama.cpp's rules for
//! token attributes, special ids, add-BOS defaults and end-of-generation ids.

use super::bpe::BpeMerges;
use super::eog::{self, first_of};
use super::pretok::PreTokenizer;
use super::special::SpecialMatcher;
use super::table::TextTable;
use super::TokenizerError;
use crate::gguf::{Gguf, Value};

/// Token attribute bits (llama.cpp's `llama_token_attr`).
pub(crate) mod attr {
    pub const UNKNOWN: u16 = 1 << 0;
    pub const UNUSED: u16 = 1 << 1;
    pub const NORMAL: u16 = 1 << 2;
    pub const CONTROL: u16 = 1 << 3;
    pub const USER_DEFINED: u16 = 1 << 4;
    pub const BYTE: u16 = 1 << 5;
    pub const LSTRIP: u16 = 1 << 7;
    pub const RSTRIP: u16 = 1 << 8;
}

/// Which algorithm turns text into ids.
#[derive(Clone, Debug)]
pub(crate) enum Algo {
    /// SentencePiece BPE over scores with `<0xXX>` byte fallback (`llama`).
    Spm,
    /// Byte-level BPE with ranked merges (`gpt2`).
    Bpe {
        merges: Box<BpeMerges>,
        pre: PreTokenizer,
        ignore_merges: bool,
    },
    /// WordPiece, greedy longest match (`bert`).
    Wpm,
}

/// A GGUF-described vocabulary and everything needed to encode and decode with it.
#[derive(Clone, Debug)]
pub(crate) struct GgufVocab {
    pub model: String,
    pub pre: Option<String>,
    pub texts: TextTable,
    pub n_vocab: usize,
    pub scores: Vec<f32>,
    pub attrs: Vec<u16>,
    pub algo: Algo,
    pub special: SpecialMatcher,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub unk: Option<u32>,
    pub sep: Option<u32>,
    pub pad: Option<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_sep: bool,
    pub add_space_prefix: bool,
    pub eog: Vec<u32>,
    pub max_token_len: usize,
}

fn bad(key: &str, msg: impl Into<String>) -> TokenizerError {
    TokenizerError::BadMetadata {
        key: key.to_string(),
        msg: msg.into(),
    }
}

impl GgufVocab {
    pub fn from_gguf(g: &Gguf) -> Result<Self, TokenizerError> {
        let model_key = "tokenizer.ggml.model";
        let model = g
            .get_str(model_key)
            .ok_or(TokenizerError::Missing(model_key))?
            .to_string();
        let pre = g.get_str("tokenizer.ggml.pre").map(str::to_string);

        let tokens_key = "tokenizer.ggml.tokens";
        let tokens = g
            .get_array(tokens_key)
            .ok_or(TokenizerError::Missing(tokens_key))?;
        if tokens.is_empty() {
            return Err(bad(tokens_key, "the vocabulary is empty"));
        }
        let n = tokens.len();
        let total: usize = tokens.iter().map(|v| v.as_str().map_or(0, str::len)).sum();
        let mut texts = TextTable::with_capacity(n, total);
        let mut max_token_len = 0;
        for (i, v) in tokens.iter().enumerate() {
            let s = v
                .as_str()
                .ok_or_else(|| bad(tokens_key, format!("entry {i} is a {}", v.type_name())))?;
            if s.is_empty() {
                // llama.cpp renames empty tokens so that they can never match text.
                let name = format!("[EMPTY_{i}]");
                texts.push(name.as_bytes());
                max_token_len = max_token_len.max(name.len());
            } else {
                texts.push(s.as_bytes());
                max_token_len = max_token_len.max(s.len());
            }
        }

        let mut scores = vec![0.0f32; n];
        if let Some(arr) = g.get_array("tokenizer.ggml.scores") {
            for (slot, v) in scores.iter_mut().zip(arr) {
                *slot = v.as_f64().unwrap_or(0.0) as f32;
            }
        }
        let mut attrs = vec![attr::NORMAL; n];
        if let Some(arr) = g.get_array("tokenizer.ggml.token_type") {
            for (slot, v) in attrs.iter_mut().zip(arr) {
                *slot = match v.as_i64() {
                    Some(1) => attr::NORMAL,
                    Some(2) => attr::UNKNOWN,
                    Some(3) => attr::CONTROL,
                    Some(4) => attr::USER_DEFINED,
                    Some(5) => attr::UNUSED,
                    Some(6) => attr::BYTE,
                    _ => 0,
                };
            }
        }

        // Defaults per model type, then metadata overrides (llama.cpp's load order).
        type Id = Option<u32>;
        let (mut bos, mut eos, mut unk, mut sep, mut pad): (Id, Id, Id, Id, Id);
        let mut add_bos;
        let mut add_eos = false;
        let mut add_sep = false;
        let mut add_space_prefix;
        let algo = match model.as_str() {
            "llama" => {
                (bos, eos, unk, sep, pad) = (Some(1), Some(2), Some(0), None, None);
                add_bos = true;
                add_space_prefix = true;
                Algo::Spm
            }
            "gpt2" => {
                (bos, eos, unk, sep, pad) = (Some(11), Some(11), None, None, None);
                add_bos = false;
                add_space_prefix = false;
                let merges_key = "tokenizer.ggml.merges";
                let merges = g
                    .get_array(merges_key)
                    .ok_or(TokenizerError::Missing(merges_key))?;
                let (pre_tok, ignore_merges, pre_add_bos) = PreTokenizer::for_name(pre.as_deref());
                if pre_add_bos {
                    add_bos = true;
                }
                let merges = Box::new(BpeMerges::build(&mut texts, merges)?);
                Algo::Bpe {
                    merges,
                    pre: pre_tok,
                    ignore_merges,
                }
            }
            "bert" => {
                (bos, eos, unk, sep, pad) = (Some(101), None, Some(100), Some(102), Some(0));
                add_bos = true;
                add_sep = true;
                add_space_prefix = false;
                Algo::Wpm
            }
            other => return Err(TokenizerError::Unsupported(other.to_string())),
        };
        if let Some(b) = g.get_bool("tokenizer.ggml.add_space_prefix") {
            add_space_prefix = b;
        }

        let id_key = |key: &'static str, slot: &mut Option<u32>| {
            if let Some(v) = g.get(key).and_then(Value::as_u64) {
                if (v as usize) < n {
                    *slot = Some(v as u32);
                }
            }
        };
        let mut eot = None;
        let mut eom = None;
        let (mut fim_pad, mut fim_rep, mut fim_sep) = (None, None, None);
        id_key("tokenizer.ggml.bos_token_id", &mut bos);
        id_key("tokenizer.ggml.eos_token_id", &mut eos);
        id_key("tokenizer.ggml.eot_token_id", &mut eot);
        id_key("tokenizer.ggml.eom_token_id", &mut eom);
        id_key("tokenizer.ggml.unknown_token_id", &mut unk);
        id_key("tokenizer.ggml.seperator_token_id", &mut sep);
        id_key("tokenizer.ggml.padding_token_id", &mut pad);
        id_key("tokenizer.ggml.fim_pad_token_id", &mut fim_pad);
        id_key("tokenizer.ggml.fim_rep_token_id", &mut fim_rep);
        id_key("tokenizer.ggml.fim_sep_token_id", &mut fim_sep);
        if let Some(b) = g.get_bool("tokenizer.ggml.add_bos_token") {
            add_bos = b;
        }
        if let Some(b) = g.get_bool("tokenizer.ggml.add_eos_token") {
            add_eos = b;
        }
        if let Some(b) = g.get_bool("tokenizer.ggml.add_sep_token") {
            add_sep = b;
        }

        // Tokens found by text are forced to be control tokens, as llama.cpp does.
        let find = |t: &str| texts.get(t.as_bytes()).filter(|&id| (id as usize) < n);
        let by_text = |slot: &mut Option<u32>, list: &[&str], attrs: &mut Vec<u16>| {
            if slot.is_none() {
                *slot = first_of(list, &find);
                if let Some(id) = *slot {
                    attrs[id as usize] |= attr::CONTROL;
                }
            }
        };
        by_text(&mut eot, eog::EOT_TEXTS, &mut attrs);
        by_text(&mut eom, eog::EOM_TEXTS, &mut attrs);
        by_text(&mut fim_pad, eog::FIM_PAD_TEXTS, &mut attrs);
        by_text(&mut fim_rep, eog::FIM_REP_TEXTS, &mut attrs);
        by_text(&mut fim_sep, eog::FIM_SEP_TEXTS, &mut attrs);
        // Control tokens named "unused" are also unused.
        for (id, a) in attrs.iter_mut().enumerate() {
            if *a & attr::CONTROL != 0 && texts.text(id as u32).windows(6).any(|w| w == b"unused") {
                *a |= attr::UNUSED;
            }
        }
        let named = eog::Named {
            eos,
            eot,
            eom,
            fim_pad,
            fim_rep,
            fim_sep,
        };
        let ends =
            eog::end_of_generation(&named, &find, &|id| attrs[id as usize] & attr::CONTROL != 0);
        for &id in &ends.by_text {
            attrs[id as usize] |= attr::CONTROL;
        }
        // gpt-oss renders these structural tokens as text.
        for t in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(id) = find(t) {
                attrs[id as usize] = attr::USER_DEFINED;
            }
        }
        if let Some(end) = ends.demoted_end {
            attrs[end as usize] = attr::USER_DEFINED;
        }
        let eog = ends.ids;

        let special = SpecialMatcher::build(&texts, &attrs);
        Ok(GgufVocab {
            model,
            pre,
            texts,
            n_vocab: n,
            scores,
            attrs,
            algo,
            special,
            bos,
            eos,
            eot,
            unk,
            sep,
            pad,
            add_bos,
            add_eos,
            add_sep,
            add_space_prefix,
            eog,
            max_token_len,
        })
    }

    /// The id of a vocabulary text (not the extra strings BPE merges intern).
    pub fn token_id(&self, text: &[u8]) -> Option<u32> {
        self.texts
            .get(text)
            .filter(|&id| (id as usize) < self.n_vocab)
    }
}
