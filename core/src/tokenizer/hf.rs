//! Hugging Face `tokenizer.json` through the `tokenizers` crate (native builds only).
//!
//! Two copies of the tokenizer are kept: one that splits special added tokens out of the text
//! and one that treats them as plain text (`encode_special_tokens`), which is how
//! `parse_special = false` is honoured. Non-special added tokens split in both, like
//! llama.cpp's user-defined tokens.

use std::collections::HashSet;

use super::bpe::char_to_byte;
use super::eog::{self, first_of};
use super::TokenizerError;

/// How a vocabulary string maps back to bytes, read from the `decoder` section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PieceStyle {
    /// GPT-2 byte stand-ins (`Ġ` = space).
    ByteLevel,
    /// WordPiece: `##` marks a continuation, other pieces start a word.
    WordPiece,
    /// SentencePiece: `▁` = space, `<0xXX>` = a byte.
    Metaspace,
}

pub(crate) struct HfTokenizer {
    parse: tokenizers::Tokenizer,
    literal: tokenizers::Tokenizer,
    style: PieceStyle,
    special: HashSet<u32>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eog: Vec<u32>,
    pub add_bos: bool,
}

fn err(e: impl std::fmt::Display) -> TokenizerError {
    TokenizerError::TokenizerJson(e.to_string())
}

fn decoder_types(v: &serde_json::Value, out: &mut Vec<String>) {
    if let Some(t) = v.get("type").and_then(|t| t.as_str()) {
        out.push(t.to_string());
    }
    if let Some(list) = v.get("decoders").and_then(|d| d.as_array()) {
        list.iter().for_each(|d| decoder_types(d, out));
    }
}

const EOS_NAMES: &[&str] = &[
    "<|im_end|>",
    "<|eot_id|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",
    "[SEP]",
];

impl HfTokenizer {
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, TokenizerError> {
        let json: serde_json::Value = serde_json::from_slice(bytes).map_err(err)?;
        let mut types = Vec::new();
        decoder_types(&json["decoder"], &mut types);
        let style = if types.iter().any(|t| t == "ByteLevel") {
            PieceStyle::ByteLevel
        } else if types.iter().any(|t| t == "WordPiece") {
            PieceStyle::WordPiece
        } else {
            PieceStyle::Metaspace
        };
        let parse = tokenizers::Tokenizer::from_bytes(bytes).map_err(err)?;
        let mut literal = parse.clone();
        literal.set_encode_special_tokens(true);

        let added = parse.get_added_tokens_decoder();
        let special: HashSet<u32> = added
            .iter()
            .filter(|(_, t)| t.special)
            .map(|(&id, _)| id)
            .collect();
        let named = |name: &str| parse.token_to_id(name).filter(|id| special.contains(id));
        // What the post-processor puts before a sequence tells whether BOS is added.
        let with = parse.encode("a", true).map_err(err)?;
        let without = parse.encode("a", false).map_err(err)?;
        let (with, without) = (with.get_ids(), without.get_ids());
        let first_added =
            (with.len() > without.len() && with.first() != without.first()).then(|| with[0]);
        let bos = first_added.or_else(|| {
            ["<s>", "<bos>", "<|begin_of_text|>", "[CLS]"]
                .iter()
                .find_map(|n| named(n))
        });
        let eos = EOS_NAMES.iter().find_map(|n| named(n));
        // BERT's [SEP] closes a sequence but never ends generation.
        let find = |t: &str| named(t);
        let ids = eog::Named {
            eos: eos.filter(|_| eos != named("[SEP]")),
            eot: first_of(eog::EOT_TEXTS, &find),
            eom: first_of(eog::EOM_TEXTS, &find),
            fim_pad: first_of(eog::FIM_PAD_TEXTS, &find),
            fim_rep: first_of(eog::FIM_REP_TEXTS, &find),
            fim_sep: first_of(eog::FIM_SEP_TEXTS, &find),
        };
        let eog = eog::end_of_generation(&ids, &find, &|id| special.contains(&id)).ids;
        Ok(HfTokenizer {
            parse,
            literal,
            style,
            special,
            bos,
            eos,
            eog,
            add_bos: first_added.is_some(),
        })
    }

    /// Ids for `text`; a tokenizer error (rare: malformed normaliser output) gives no ids.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let t = if parse_special {
            &self.parse
        } else {
            &self.literal
        };
        t.encode(text, add_special)
            .map(|e| e.get_ids().to_vec())
            .unwrap_or_default()
    }

    pub fn vocab_size(&self) -> usize {
        self.parse.get_vocab_size(true)
    }

    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.parse.token_to_id(text)
    }

    pub fn token_text(&self, id: u32) -> Option<String> {
        self.parse.id_to_token(id)
    }

    pub fn token_bytes(&self, id: u32, special: bool) -> Vec<u8> {
        let Some(text) = self.parse.id_to_token(id) else {
            return Vec::new();
        };
        if self.special.contains(&id) {
            return if special {
                text.into_bytes()
            } else {
                Vec::new()
            };
        }
        match self.style {
            PieceStyle::ByteLevel => {
                let mut out = Vec::with_capacity(text.len());
                for c in text.chars() {
                    match char_to_byte(c) {
                        Some(b) => out.push(b),
                        None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                    }
                }
                out
            }
            PieceStyle::WordPiece => match text.strip_prefix("##") {
                Some(rest) => rest.as_bytes().to_vec(),
                None => format!(" {text}").into_bytes(),
            },
            PieceStyle::Metaspace => {
                let hex = text.strip_prefix("<0x").and_then(|h| h.strip_suffix('>'));
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) if text.len() == 6 => vec![b],
                    _ => text.replace('\u{2581}', " ").into_bytes(),
                }
            }
        }
    }
}
