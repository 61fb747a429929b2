//! Constrained decoding: a token filter that keeps the output a valid prefix of a JSON value
//! (of a schema), and the lazy walk that finds the most likely token it allows.
//!
//! Checking all 150k tokens of a large vocabulary every step would cost more than the model's
//! step on small models, so nothing masks the vocabulary: the sampler proposes tokens in its
//! own order and the filter checks only those ([`Sampler::sample_constrained`]
//! (super::Sampler::sample_constrained)). Most steps the first proposal passes.

use std::sync::Arc;

use super::json_acceptor::JsonAcceptor;
use super::json_schema::JsonSchema;
use crate::tokenizer::Tokenizer;

/// The bytes each token adds to the output (control tokens add none), computed once per model.
pub struct TokenTexts {
    texts: Vec<Box<[u8]>>,
    eog: Vec<bool>,
}

impl TokenTexts {
    pub fn new(tok: &Tokenizer) -> Self {
        let n = tok.vocab_size();
        TokenTexts {
            texts: (0..n as u32)
                .map(|id| tok.token_bytes(id, false).into_boxed_slice())
                .collect(),
            eog: (0..n as u32).map(|id| tok.is_eog(id)).collect(),
        }
    }

    /// Output bytes of `id` (empty for control tokens and ids outside the vocabulary).
    pub fn get(&self, id: u32) -> &[u8] {
        self.texts.get(id as usize).map_or(&[], |t| t)
    }

    /// Whether `id` ends generation.
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.get(id as usize).copied().unwrap_or(false)
    }
}

/// Keeps a sequence's output valid JSON: which tokens may come next, and when to stop.
pub struct JsonConstraint {
    acc: JsonAcceptor,
    texts: Arc<TokenTexts>,
    /// Per first byte, whether the acceptor takes it at this position (0 unknown, 1 yes,
    /// 2 no): a token whose first byte is refused needs no further look.
    first: [u8; 256],
}

impl JsonConstraint {
    pub fn new(schema: Arc<JsonSchema>, texts: Arc<TokenTexts>) -> Self {
        JsonConstraint {
            acc: JsonAcceptor::new(schema),
            texts,
            first: [0; 256],
        }
    }

    /// Whether `id` may come next: an end-of-generation token once the value may end, any
    /// other token when its bytes keep the output a valid prefix.
    pub fn allows(&mut self, id: u32) -> bool {
        if self.texts.is_eog(id) {
            return self.acc.can_end();
        }
        let text = self.texts.get(id);
        let Some(&b0) = text.first() else {
            return false;
        };
        match self.first[b0 as usize] {
            2 => return false,
            0 => {
                let ok = self.acc.accepts_byte(b0);
                self.first[b0 as usize] = if ok { 1 } else { 2 };
                if !ok {
                    return false;
                }
            }
            _ => {}
        }
        text.len() == 1 || self.acc.try_feed(text).is_some()
    }

    /// Records the chosen token.
    pub fn advance(&mut self, id: u32) {
        if self.texts.is_eog(id) {
            return;
        }
        let texts = self.texts.clone();
        if self.acc.feed(texts.get(id)) {
            self.first = [0; 256];
        }
    }

    /// Whether the value is complete (generation should stop).
    pub fn is_complete(&self) -> bool {
        self.acc.is_complete()
    }
}

/// The most likely token `allow` accepts, looking at candidates in logit order (higher first,
/// lower id on ties) and sorting only as far as needed. None when it accepts no finite-logit
/// token.
pub fn best_allowed(logits: &[f32], allow: &mut dyn FnMut(u32) -> bool) -> Option<u32> {
    // The usual case: the top token passes; one linear scan, no allocation.
    let top = super::argmax(logits);
    if logits[top as usize] > f32::NEG_INFINITY && allow(top) {
        return Some(top);
    }
    let mut ids: Vec<u32> = (0..logits.len() as u32)
        .filter(|&i| i != top && logits[i as usize] > f32::NEG_INFINITY)
        .collect();
    let order = |a: &u32, b: &u32| {
        logits[*b as usize]
            .total_cmp(&logits[*a as usize])
            .then(a.cmp(b))
    };
    let mut from = 0;
    let mut chunk = 64;
    while from < ids.len() {
        let end = (from + chunk).min(ids.len());
        let rest = &mut ids[from..];
        if end - from < rest.len() {
            rest.select_nth_unstable_by(end - from - 1, order);
        }
        rest[..end - from].sort_unstable_by(order);
        if let Some(&id) = ids[from..end].iter().find(|&&id| allow(id)) {
            return Some(id);
        }
        from = end;
        chunk *= 8;
    }
    None
}
