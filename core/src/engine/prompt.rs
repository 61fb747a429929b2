//! Prompts that hold embedding rows as well as token ids: an image's projector output takes
//! the place of token embeddings at its positions.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::{Engine, EngineError, Row};

/// One piece of a prompt.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptPiece {
    /// Token ids, embedded by the model.
    Tokens(Vec<u32>),
    /// `n` rows of `n_embd` values (row-major) given as they are, in place of token
    /// embeddings (not scaled as a model may scale its token rows). With `bidirectional`, the
    /// rows attend to each other both ways (Gemma 3's image tokens), so they are evaluated in
    /// one step.
    Embeddings {
        data: Arc<[f32]>,
        n: usize,
        bidirectional: bool,
    },
}

/// A prompt made of pieces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prompt {
    pub pieces: Vec<PromptPiece>,
}

/// Top bit of a cache key that stands for an embedding row rather than a token id.
const EMBD_KEY: u32 = 1 << 31;

impl Prompt {
    /// A text-only prompt.
    pub fn tokens(ids: &[u32]) -> Self {
        Prompt {
            pieces: vec![PromptPiece::Tokens(ids.to_vec())],
        }
    }

    /// Positions the prompt takes.
    pub fn len(&self) -> usize {
        self.pieces
            .iter()
            .map(|p| match p {
                PromptPiece::Tokens(t) => t.len(),
                PromptPiece::Embeddings { n, .. } => *n,
            })
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One key per position, what prefix reuse compares: token ids as they are; an embedding
    /// row as a hash of its piece's values and its index, top bit set (no token id has it).
    /// Two different images with the same placeholder tokens so get different keys.
    pub fn cache_keys(&self) -> Vec<u32> {
        let mut keys = Vec::with_capacity(self.len());
        for p in &self.pieces {
            match p {
                PromptPiece::Tokens(t) => keys.extend_from_slice(t),
                PromptPiece::Embeddings { data, n, .. } => {
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    data.len().hash(&mut h);
                    for v in data.iter() {
                        v.to_bits().hash(&mut h);
                    }
                    let base = h.finish();
                    keys.extend((0..*n as u64).map(|i| {
                        let mut hi = std::collections::hash_map::DefaultHasher::new();
                        (base, i).hash(&mut hi);
                        EMBD_KEY | (hi.finish() as u32 & !EMBD_KEY)
                    }));
                }
            }
        }
        keys
    }

    /// The token id of each position; `placeholder` at embedding rows (the penalties'
    /// history and checks need an id there).
    pub fn ids(&self, placeholder: u32) -> Vec<u32> {
        let mut ids = Vec::with_capacity(self.len());
        for p in &self.pieces {
            match p {
                PromptPiece::Tokens(t) => ids.extend_from_slice(t),
                PromptPiece::Embeddings { n, .. } => {
                    ids.extend(std::iter::repeat_n(placeholder, *n))
                }
            }
        }
        ids
    }

    /// Where a reused prefix of `n` positions may end: not inside a piece of embedding rows
    /// (its rows are evaluated together), so `n` moves back to that piece's start.
    pub fn clamp_reuse(&self, n: usize) -> usize {
        let mut at = 0;
        for p in &self.pieces {
            let len = match p {
                PromptPiece::Tokens(t) => t.len(),
                PromptPiece::Embeddings { n, .. } => *n,
            };
            if let PromptPiece::Embeddings { .. } = p {
                if n > at && n < at + len {
                    return at;
                }
            }
            at += len;
        }
        n
    }

    /// The prompt from position `skip` on (`skip` must not fall inside an embedding piece).
    pub fn from(&self, skip: usize) -> Prompt {
        let mut left = skip;
        let mut pieces = Vec::new();
        for p in &self.pieces {
            match p {
                PromptPiece::Tokens(t) => {
                    let k = left.min(t.len());
                    left -= k;
                    if k < t.len() {
                        pieces.push(PromptPiece::Tokens(t[k..].to_vec()));
                    }
                }
                PromptPiece::Embeddings { n, .. } => {
                    if left >= *n {
                        left -= n;
                    } else {
                        pieces.push(p.clone());
                    }
                }
            }
        }
        Prompt { pieces }
    }
}

/// One step of a prompt: its rows, the embedding rows it is given, bidirectional ranges.
struct PromptStep {
    rows: Vec<Row>,
    given_rows: Vec<u32>,
    given: Vec<f32>,
    bidirectional: Vec<(u32, u32)>,
}

impl Engine {
    /// Appends `prompt` to a sequence (in steps of at most `max_batch` rows; a bidirectional
    /// embedding piece is never split) and returns the logits after its last position.
    /// Checked before any work: non-empty, fits the room left, embedding rows as wide as the
    /// model, token ids in the vocabulary.
    pub fn prefill_prompt(&mut self, seq: u32, prompt: &Prompt) -> Result<Vec<f32>, EngineError> {
        let mut last = Vec::new();
        for s in self.prompt_steps(seq, prompt)? {
            let plan = self.plan_step_with(&s.rows, |g| {
                if !s.given_rows.is_empty() {
                    g.row_embeddings = Some(crate::backend::RowEmbeddings {
                        rows: s.given_rows.clone(),
                        data: s.given.clone().into(),
                    });
                }
                g.bidirectional = s.bidirectional.clone();
            })?;
            let result = self.backend.execute(&plan.graph, &plan.batch());
            if let Some(l) = self.finish_step(&plan, result)?.pop() {
                last = l;
            }
        }
        Ok(last)
    }

    fn prompt_steps(&self, seq: u32, prompt: &Prompt) -> Result<Vec<PromptStep>, EngineError> {
        let n = prompt.len();
        if n == 0 {
            return Err(EngineError::Invalid("empty prompt".into()));
        }
        self.seqs.check_room(seq, n)?;
        let (d, max) = (self.model.info().n_embd, self.cfg.max_batch);
        let n_vocab = self.model.info().n_vocab;
        let mut steps: Vec<PromptStep> = Vec::new();
        let new_step = || PromptStep {
            rows: Vec::new(),
            given_rows: Vec::new(),
            given: Vec::new(),
            bidirectional: Vec::new(),
        };
        let mut cur = new_step();
        let mut done = 0;
        for p in &prompt.pieces {
            match p {
                PromptPiece::Tokens(t) => {
                    if let Some(bad) = t.iter().find(|&&id| id as usize >= n_vocab) {
                        return Err(EngineError::Invalid(format!(
                            "token id {bad} is outside the vocabulary of {n_vocab}"
                        )));
                    }
                    for &token in t {
                        if cur.rows.len() == max {
                            steps.push(std::mem::replace(&mut cur, new_step()));
                        }
                        done += 1;
                        cur.rows.push(Row {
                            seq,
                            token,
                            logits: done == n,
                        });
                    }
                }
                PromptPiece::Embeddings {
                    data,
                    n: rows,
                    bidirectional,
                } => {
                    if data.len() != rows * d {
                        return Err(EngineError::Invalid(format!(
                            "{} embedding values do not make {rows} rows of the model's width {d}",
                            data.len()
                        )));
                    }
                    // The CPU and wgpu backends read a step's bidirectional ranges; another
                    // (CUDA so far) would silently attend causally.
                    if *bidirectional && !matches!(self.backend.name(), "cpu" | "wgpu") {
                        return Err(EngineError::Invalid(format!(
                            "embedding rows attending to each other (image tokens) need the CPU \
                             or wgpu backend for now, not {}",
                            self.backend.name()
                        )));
                    }
                    if *bidirectional && *rows > max {
                        return Err(EngineError::Invalid(format!(
                            "{rows} embedding rows attending to each other do not fit a step of \
                             {max} rows"
                        )));
                    }
                    if *bidirectional && cur.rows.len() + rows > max {
                        steps.push(std::mem::replace(&mut cur, new_step()));
                    }
                    let start = cur.rows.len() as u32;
                    for row in data.chunks_exact(d) {
                        if cur.rows.len() == max {
                            steps.push(std::mem::replace(&mut cur, new_step()));
                        }
                        done += 1;
                        cur.given_rows.push(cur.rows.len() as u32);
                        cur.given.extend_from_slice(row);
                        // Any id works: the row's embedding is replaced.
                        cur.rows.push(Row {
                            seq,
                            token: 0,
                            logits: done == n,
                        });
                    }
                    if *bidirectional {
                        cur.bidirectional.push((start, cur.rows.len() as u32));
                    }
                }
            }
        }
        if !cur.rows.is_empty() {
            steps.push(cur);
        }
        Ok(steps)
    }
}
