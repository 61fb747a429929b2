//! Prompts that hold embedding rows as well as token ids: an image's projector output takes
//! the place of token embeddings at its positions.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::{mrope, Engine, EngineError, Row};

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
    /// Says that the next piece, [`PromptPiece::Embeddings`] of `rows × cols` rows, is an
    /// image's tokens row by row. Models with multimodal rotary positions (Qwen2-VL's M-RoPE)
    /// give them grid positions and continue the text after them from the largest + 1; other
    /// models ignore it. Takes no position itself.
    ImageGrid { rows: usize, cols: usize },
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
                PromptPiece::ImageGrid { .. } => 0,
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
                PromptPiece::ImageGrid { .. } => {}
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
                PromptPiece::ImageGrid { .. } => {}
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
                PromptPiece::ImageGrid { .. } => 0,
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
                // Kept with the image it describes (when nothing before it is left).
                PromptPiece::ImageGrid { .. } => {
                    if left == 0 {
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
    /// Rotary positions of the rows, for models with M-RoPE (else empty).
    rope: Vec<[u32; 4]>,
    /// The rotary shifts in force after this step's images: (cache position, shift).
    shifts: Vec<(usize, i64)>,
}

impl Engine {
    /// Appends `prompt` to a sequence (in steps of at most `max_batch` rows; a bidirectional
    /// embedding piece is never split) and returns the logits after its last position.
    /// Checked before any work: non-empty, fits the room left, embedding rows as wide as the
    /// model, token ids in the vocabulary.
    pub fn prefill_prompt(&mut self, seq: u32, prompt: &Prompt) -> Result<Vec<f32>, EngineError> {
        let mut last = Vec::new();
        for s in self.prompt_steps(seq, prompt)? {
            let plan = self.plan_prompt_step(&s)?;
            let result = self.backend.execute(&plan.graph, &plan.batch());
            if let Some(l) = self.finish_step(&plan, result)?.pop() {
                last = l;
            }
            for &(from, shift) in &s.shifts {
                self.rope_shifts.push(seq, from, shift);
            }
        }
        Ok(last)
    }

    /// [`prefill_prompt`](Self::prefill_prompt), awaiting each step's readback instead of
    /// blocking on it (the browser's path: WebGPU cannot block).
    pub async fn prefill_prompt_async(
        &mut self,
        seq: u32,
        prompt: &Prompt,
    ) -> Result<Vec<f32>, EngineError> {
        let mut last = Vec::new();
        for s in self.prompt_steps(seq, prompt)? {
            let plan = self.plan_prompt_step(&s)?;
            let result = match self.backend.submit(&plan.graph, &plan.batch()) {
                Ok(p) => p.wait().await,
                Err(e) => Err(e),
            };
            if let Some(l) = self.finish_step(&plan, result)?.pop() {
                last = l;
            }
            for &(from, shift) in &s.shifts {
                self.rope_shifts.push(seq, from, shift);
            }
        }
        Ok(last)
    }

    /// Plans one step of a prompt: its rows, with the embedding rows, bidirectional ranges
    /// and rotary positions it is given.
    fn plan_prompt_step(
        &mut self,
        s: &PromptStep,
    ) -> Result<super::step_async::StepPlan, EngineError> {
        self.plan_step_with(&s.rows, |g| {
            if !s.given_rows.is_empty() {
                g.row_embeddings = Some(crate::backend::RowEmbeddings {
                    rows: s.given_rows.clone(),
                    data: s.given.clone().into(),
                });
            }
            g.bidirectional = s.bidirectional.clone();
            if !s.rope.is_empty() {
                g.rope_positions = Some(s.rope.clone().into());
            }
        })
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
            rope: Vec::new(),
            shifts: Vec::new(),
        };
        let mut cur = new_step();
        let mut done = 0;
        // M-RoPE: the next row's cache position, the rotary shift in force, a pending grid.
        let mrope = self.model.rope_sections().is_some();
        let mut at = self.seqs.len(seq)?;
        let mut shift = self.rope_shifts.at(seq, at);
        let mut grid: Option<(usize, usize)> = None;
        let needs_rope = mrope
            && (shift != 0
                || prompt
                    .pieces
                    .iter()
                    .any(|p| matches!(p, PromptPiece::ImageGrid { .. })));
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
                        if mrope {
                            cur.rope.push([(at as i64 + shift) as u32; 4]);
                        }
                        at += 1;
                    }
                }
                PromptPiece::ImageGrid { rows, cols } => {
                    if grid.is_some() {
                        return Err(EngineError::Invalid(
                            "an image grid must be followed by its embedding rows".into(),
                        ));
                    }
                    grid = Some((*rows, *cols));
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
                    let image = grid.take();
                    let mut rope: Box<dyn Iterator<Item = [u32; 4]>> = match image {
                        Some((r, c)) if r * c != *rows => {
                            return Err(EngineError::Invalid(format!(
                                "an image grid of {r} x {c} tokens does not match its {rows} \
                                 embedding rows"
                            )))
                        }
                        Some((r, c)) => {
                            Box::new(mrope::image_rows((at as i64 + shift) as u32, r, c))
                        }
                        None => {
                            let first = at as i64 + shift;
                            Box::new((0..*rows as i64).map(move |i| [(first + i) as u32; 4]))
                        }
                    };
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
                        if let (true, Some(p)) = (mrope, rope.next()) {
                            cur.rope.push(p);
                        }
                    }
                    at += rows;
                    if let (true, Some((r, c))) = (mrope, image) {
                        // Text after the image goes on from its largest rotary position + 1.
                        shift += r.max(c) as i64 - *rows as i64;
                        cur.shifts.push((at, shift));
                    }
                    if *bidirectional {
                        cur.bidirectional.push((start, cur.rows.len() as u32));
                    }
                }
            }
        }
        if grid.is_some() {
            return Err(EngineError::Invalid(
                "an image grid must be followed by its embedding rows".into(),
            ));
        }
        if !cur.rows.is_empty() {
            steps.push(cur);
        }
        // Rotary positions equal to the cache positions need no special op (nor a backend
        // that has it).
        if !needs_rope {
            for s in &mut steps {
                s.rope.clear();
            }
        }
        Ok(steps)
    }
}
