//! Inputs to token sequences: tokenization with the model's special tokens, truncation to the
//! longest input, and the checks on token-id inputs.

use super::EmbedError;
use crate::tokenizer::Tokenizer;

/// One input: text, or token ids of a text (the model's special tokens are added around them
/// as around a text's).
#[derive(Clone, Debug, PartialEq)]
pub enum EmbedInput {
    Text(String),
    Tokens(Vec<u32>),
}

impl From<&str> for EmbedInput {
    fn from(s: &str) -> Self {
        EmbedInput::Text(s.to_string())
    }
}

impl From<String> for EmbedInput {
    fn from(s: String) -> Self {
        EmbedInput::Text(s)
    }
}

/// The special tokens a model puts around a sequence (e.g. `[CLS]` … `[SEP]`, or a BOS).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Wrapping {
    pub prefix: Vec<u32>,
    pub suffix: Vec<u32>,
}

impl Wrapping {
    /// What `tokenizer.encode(_, add_special = true)` adds around a text's ids.
    pub fn of(tokenizer: &Tokenizer) -> Self {
        let probe = "a";
        let full = tokenizer.encode(probe, true, false);
        let plain = tokenizer.encode(probe, false, false);
        match (0..=full.len().saturating_sub(plain.len()))
            .find(|&p| full.get(p..p + plain.len()) == Some(&plain[..]))
        {
            Some(p) => Wrapping {
                prefix: full[..p].to_vec(),
                suffix: full[p + plain.len()..].to_vec(),
            },
            None => Wrapping::default(),
        }
    }

    fn len(&self) -> usize {
        self.prefix.len() + self.suffix.len()
    }
}

/// The ids of input `index`, wrapped, cut to `max` tokens when `truncate` (keeping the
/// special tokens at both ends), else an error when longer. Also whether it was cut.
pub fn sequence(
    tokenizer: &Tokenizer,
    wrap: &Wrapping,
    index: usize,
    input: &EmbedInput,
    max: usize,
    truncate: bool,
    n_vocab: usize,
) -> Result<Vec<u32>, EmbedError> {
    let plain = match input {
        EmbedInput::Text(t) => tokenizer.encode(t, false, false),
        EmbedInput::Tokens(ids) => {
            if let Some(&id) = ids.iter().find(|&&id| id as usize >= n_vocab) {
                return Err(EmbedError::BadToken { index, id, n_vocab });
            }
            ids.clone()
        }
    };
    let total = plain.len() + wrap.len();
    if total == 0 {
        return Err(EmbedError::Empty { index });
    }
    let keep = if total > max {
        if !truncate {
            return Err(EmbedError::TooLong {
                index,
                tokens: total,
                max,
            });
        }
        max.saturating_sub(wrap.len())
    } else {
        plain.len()
    };
    let mut ids = Vec::with_capacity(keep + wrap.len());
    ids.extend_from_slice(&wrap.prefix);
    ids.extend_from_slice(&plain[..keep]);
    ids.extend_from_slice(&wrap.suffix);
    if ids.is_empty() {
        return Err(EmbedError::Empty { index });
    }
    Ok(ids)
}
