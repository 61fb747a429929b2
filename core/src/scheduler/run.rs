//! The scheduling loop and the handle clients submit through.

mod media;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

use super::request::{Event, Failure, Finish, MediaPrompt, Request};
use super::sequence::{Outcome, Sequence};
use super::slots::{self, Slot};
use super::stats::Stats;
use crate::backend::{BackendError, KV_BLOCK};
use crate::engine::{Engine, EngineError, Row};
use crate::generation::SequenceState;
use crate::sampler::TokenTexts;
use crate::tokenizer::Tokenizer;

/// Scheduler settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Requests allowed to wait for a slot; more are refused ([`SubmitError::QueueFull`]).
    pub queue: usize,
    /// Most rows per step (decode rows plus prompt chunks); capped by the engine's batch size.
    pub step_tokens: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            queue: 64,
            step_tokens: 256,
        }
    }
}

/// Why a request was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("the queue is full ({0} requests waiting); retry later")]
    QueueFull(usize),
    #[error("the server is shutting down")]
    ShuttingDown,
}

enum Msg {
    Submit(Box<Request>, Instant),
    Shutdown,
}

/// A cloneable way in to a running [`Scheduler`].
#[derive(Clone)]
pub struct Handle {
    tx: mpsc::Sender<Msg>,
    stats: Arc<Stats>,
    /// Most requests waiting for a slot; changeable while running ([`Handle::set_queue`]).
    queue: Arc<AtomicUsize>,
    closing: Arc<AtomicBool>,
}

impl Handle {
    /// Queues a request; its events go to its sink. Refused when the queue is full.
    pub fn submit(&self, req: Request) -> Result<(), SubmitError> {
        if self.closing.load(Relaxed) {
            return Err(SubmitError::ShuttingDown);
        }
        let before = self.stats.waiting.fetch_add(1, Relaxed) as usize;
        if before >= self.queue.load(Relaxed) {
            self.stats.waiting.fetch_sub(1, Relaxed);
            self.stats.requests_rejected.fetch_add(1, Relaxed);
            return Err(SubmitError::QueueFull(before));
        }
        self.tx
            .send(Msg::Submit(Box::new(req), Instant::now()))
            .map_err(|_| {
                self.stats.waiting.fetch_sub(1, Relaxed);
                SubmitError::ShuttingDown
            })
    }

    /// Stops taking requests: waiting ones fail, running ones finish, then the loop returns.
    pub fn shutdown(&self) {
        self.closing.store(true, Relaxed);
        let _ = self.tx.send(Msg::Shutdown);
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Relaxed)
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// Changes how many requests may wait for a slot (at least 1). Requests already waiting
    /// stay; a smaller limit refuses new ones until fewer wait.
    pub fn set_queue(&self, n: usize) {
        self.queue.store(n.max(1), Relaxed);
    }

    /// How many requests may wait for a slot.
    pub fn queue_capacity(&self) -> usize {
        self.queue.load(Relaxed)
    }
}

/// Owns the engine and runs the batching loop ([`Scheduler::run`]).
pub struct Scheduler {
    engine: Engine,
    tokenizer: Arc<Tokenizer>,
    cfg: SchedulerConfig,
    rx: mpsc::Receiver<Msg>,
    stats: Arc<Stats>,
    slots: Vec<Slot>,
    rewind_limit: usize,
    /// Requests without a slot yet: the request, when it was submitted, and the queue place
    /// it was last told (0: none yet).
    waiting: VecDeque<(Request, Instant, usize)>,
    /// Sequences whose cache was taken back when the block pool ran out, oldest submission
    /// first; they get slots before any waiting request.
    preempted: VecDeque<Sequence>,
    active: Vec<Sequence>,
    closing: bool,
    clock: u64,
    /// Token texts for constrained decoding, built on the first request that needs them.
    texts: Option<Arc<TokenTexts>>,
    /// Whether a new sequence may start from a copy of another slot's cached prefix (false
    /// once the backend said it cannot copy).
    copy_prefixes: bool,
}

/// Where a sequence starts ([`Scheduler::place`]).
struct Place {
    slot: usize,
    /// Cached tokens of the slot's own cache it keeps.
    reuse: usize,
    /// Another slot and how many of its cached positions to copy, when that is longer.
    donor: Option<(usize, usize)>,
}

impl Place {
    /// Cached positions the sequence starts with.
    fn cached(&self) -> usize {
        self.donor.map_or(self.reuse, |d| d.1)
    }
}

/// Fewest prompt tokens a request waits for another sequence to evaluate (to copy them)
/// rather than evaluating them itself: a step's wait is worth it only for a real share.
const LEADER_MIN: usize = 16;

impl Scheduler {
    /// Takes every sequence slot of `engine` (one per concurrent request).
    pub fn new(
        mut engine: Engine,
        tokenizer: Arc<Tokenizer>,
        cfg: SchedulerConfig,
    ) -> Result<(Scheduler, Handle), EngineError> {
        let n_seq = engine.config().kv.n_seq;
        for _ in 0..n_seq {
            engine.new_sequence()?;
        }
        let stats = Arc::new(Stats::default());
        stats
            .kv_capacity
            .store((engine.seqs().n_blocks() * KV_BLOCK) as u64, Relaxed);
        let (tx, rx) = mpsc::channel();
        let handle = Handle {
            tx,
            stats: stats.clone(),
            queue: Arc::new(AtomicUsize::new(cfg.queue.max(1))),
            closing: Arc::new(AtomicBool::new(false)),
        };
        let cfg = SchedulerConfig {
            step_tokens: cfg.step_tokens.clamp(1, engine.config().max_batch),
            ..cfg
        };
        let rewind_limit = engine.rewind_limit();
        Ok((
            Scheduler {
                engine,
                tokenizer,
                cfg,
                rx,
                stats,
                slots: vec![Slot::default(); n_seq],
                rewind_limit,
                waiting: VecDeque::new(),
                preempted: VecDeque::new(),
                active: Vec::new(),
                closing: false,
                clock: 0,
                texts: None,
                copy_prefixes: true,
            },
            handle,
        ))
    }

    /// Runs until [`Handle::shutdown`] (or every handle is dropped) and the running requests
    /// have finished.
    pub fn run(mut self) {
        loop {
            if self.active.is_empty() && self.waiting.is_empty() && self.preempted.is_empty() {
                if self.closing {
                    return;
                }
                match self.rx.recv() {
                    Ok(m) => self.take(m),
                    Err(_) => return,
                }
            }
            while let Ok(m) = self.rx.try_recv() {
                self.take(m);
            }
            if self.closing {
                for (mut r, _, _) in self.waiting.drain(..) {
                    self.stats.waiting.fetch_sub(1, Relaxed);
                    self.stats.requests_failed.fetch_add(1, Relaxed);
                    r.sink.send(Event::Failed(Failure::ShuttingDown));
                }
            }
            self.admit();
            self.report_queue();
            self.drop_cancelled();
            if !self.active.is_empty() {
                self.step();
            }
            self.stats.running.store(self.active.len() as u64, Relaxed);
            let seqs = self.engine.seqs();
            let used = (seqs.n_blocks() - seqs.free_blocks()) * KV_BLOCK;
            self.stats.kv_used.store(used as u64, Relaxed);
        }
    }

    fn take(&mut self, m: Msg) {
        match m {
            Msg::Submit(r, t) => self.waiting.push_back((*r, t, 0)),
            Msg::Shutdown => self.closing = true,
        }
    }

    /// Gives free slots to preempted sequences, then to waiting requests in arrival order,
    /// while the block pool has room for what each must feed.
    fn admit(&mut self) {
        while let Some(s) = self.preempted.front() {
            let Some(place) = self.place(&s.feed, s.req.media.as_deref()) else {
                return;
            };
            if !self.make_room_for(&place, s.feed.len()) {
                return;
            }
            let Some(mut s) = self.preempted.pop_front() else {
                return;
            };
            let reuse = match self.start_slot(&place) {
                Ok(r) => r,
                Err(e) => {
                    self.stats.requests_failed.fetch_add(1, Relaxed);
                    s.req
                        .sink
                        .send(Event::Failed(Failure::Engine(e.to_string())));
                    continue;
                }
            };
            self.slots[place.slot].busy = true;
            s.slot = place.slot;
            s.fed = reuse;
            self.active.push(s);
        }
        while let Some((req, _, _)) = self.waiting.front() {
            let Some(place) = self.place(&req.prompt, req.media.as_deref()) else {
                return;
            };
            if self.leader_ahead(&req.prompt, place.cached()) {
                return;
            }
            // A prompt too long for any context is refused below, whatever the pool holds.
            let len = req.prompt.len().min(self.engine.config().kv.n_ctx - 1);
            if !self.make_room_for(&place, len) {
                return;
            }
            let Some((mut req, submitted, _)) = self.waiting.pop_front() else {
                return;
            };
            self.stats.waiting.fetch_sub(1, Relaxed);
            if let Err(msg) = self.check(&req) {
                self.stats.requests_failed.fetch_add(1, Relaxed);
                req.sink.send(Event::Failed(Failure::Rejected(msg)));
                continue;
            }
            let tok = &self.tokenizer;
            let texts = &mut self.texts;
            let ids = media::ids(&req);
            let state = SequenceState::new(&req.params(), &ids, || {
                texts
                    .get_or_insert_with(|| Arc::new(TokenTexts::new(tok)))
                    .clone()
            });
            let state = match state {
                Ok(s) => s,
                Err(e) => {
                    self.stats.requests_failed.fetch_add(1, Relaxed);
                    req.sink
                        .send(Event::Failed(Failure::Rejected(e.to_string())));
                    continue;
                }
            };
            let reuse = match self.start_slot(&place) {
                Ok(r) => r,
                Err(e) => {
                    self.stats.requests_failed.fetch_add(1, Relaxed);
                    req.sink.send(Event::Failed(Failure::Engine(e.to_string())));
                    continue;
                }
            };
            let slot = place.slot;
            self.slots[slot].busy = true;
            let st = &self.stats;
            st.requests_started.fetch_add(1, Relaxed);
            st.cached_prompt_tokens.fetch_add(reuse as u64, Relaxed);
            if reuse > 0 {
                st.prefix_cache_hits.fetch_add(1, Relaxed);
            }
            let started = Event::Started {
                prompt_tokens: req.prompt.len(),
                cached_tokens: reuse,
            };
            let mut seq = Sequence::new(req, state, slot, reuse, submitted);
            if seq.req.sink.send(started) {
                self.active.push(seq);
            } else {
                seq.finish(Finish::Cancelled);
                self.release(slot, Finish::Cancelled);
            }
        }
    }

    /// Where `tokens` would start: a free slot and how much of its own cache it keeps, and
    /// another slot (running or idle) whose cache shares a longer start, to copy from. With
    /// `media`, a reused start never ends inside an image's rows (they are evaluated together).
    fn place(&self, tokens: &[u32], media: Option<&MediaPrompt>) -> Option<Place> {
        let clamp = |n: usize| media.map_or(n, |m| m.prompt.clamp_reuse(n));
        let (slot, reuse) = slots::choose(&self.slots, tokens, self.rewind_limit)?;
        let reuse = clamp(reuse);
        let donor = self
            .copy_prefixes
            .then(|| slots::donor(&self.slots, slot, tokens, self.rewind_limit))
            .flatten()
            .map(|(d, n)| (d, clamp(n)))
            .filter(|&(_, n)| n > reuse);
        Some(Place { slot, reuse, donor })
    }

    /// Whether a running sequence is still evaluating a prompt that starts like `tokens` for
    /// at least [`LEADER_MIN`] more tokens than the `cached` ones a slot offers now: then the
    /// request waits (a step or so) and copies that start once it is cached, rather than
    /// evaluating it a second time. Many chats with one system prompt arriving together
    /// evaluate it once.
    fn leader_ahead(&self, tokens: &[u32], cached: usize) -> bool {
        if !self.copy_prefixes {
            return false;
        }
        let usable = tokens.len().saturating_sub(1);
        self.active.iter().any(|s| {
            let shared = slots::common_prefix(&s.feed, tokens).min(usable);
            s.prefilling() && s.fed < shared && shared >= cached + LEADER_MIN
        })
    }

    /// Fills the slot of `place` with the cached start it chose and returns how many positions
    /// that is. A copy the backend cannot make falls back to an empty slot (and, when the
    /// backend cannot copy at all, copies are not tried again).
    fn start_slot(&mut self, place: &Place) -> Result<usize, EngineError> {
        let slot = place.slot;
        if let Some((from, n)) = place.donor {
            match self.engine.copy_prefix(from as u32, slot as u32, n) {
                Ok(()) => {
                    let start = self.slots[from].cached[..n].to_vec();
                    self.slots[slot].cached = start;
                    self.stats.prefix_copies.fetch_add(1, Relaxed);
                    return Ok(n);
                }
                Err(e) => {
                    if matches!(e, EngineError::Backend(BackendError::Unsupported(_))) {
                        self.copy_prefixes = false;
                    }
                    self.engine.truncate(slot as u32, 0)?;
                    self.slots[slot].cached.clear();
                    return Ok(0);
                }
            }
        }
        self.engine.truncate(slot as u32, place.reuse)?;
        self.slots[slot].cached.truncate(place.reuse);
        Ok(place.reuse)
    }

    /// Tells each waiting request its place in the queue (1: next) when it changed.
    fn report_queue(&mut self) {
        let pending = self.waiting.len();
        for (i, (req, _, told)) in self.waiting.iter_mut().enumerate() {
            if *told != i + 1 {
                *told = i + 1;
                req.sink.send(Event::Queued {
                    position: i + 1,
                    pending,
                });
            }
        }
    }

    /// Reasons a request cannot run at all.
    fn check(&self, req: &Request) -> Result<(), String> {
        if let Some(m) = &req.media {
            if m.prompt.len() != req.prompt.len() {
                return Err("the prompt's keys do not match its pieces".into());
            }
        }
        match prompt_problem(
            &media::ids(req),
            self.engine.config().kv.n_ctx,
            self.engine.model_info().n_vocab,
        ) {
            Some(msg) => Err(msg),
            None => Ok(()),
        }
    }

    /// Whether the slot of `place`, keeping the cached start it chose, can take `len` tokens
    /// and one more without touching what running sequences still need; frees the caches of
    /// idle slots (least recently used first, never the slot's own or the one it copies from)
    /// to make it so.
    fn make_room_for(&mut self, place: &Place, len: usize) -> bool {
        let slot = place.slot;
        // A copy empties the slot first; its own prefix keeps its blocks.
        let kept = match place.donor {
            Some(_) => 0,
            None => place.reuse.div_ceil(KV_BLOCK),
        };
        let keep = [Some(slot), place.donor.map(|d| d.0)];
        loop {
            let seqs = self.engine.seqs();
            let held = seqs.held_blocks(slot as u32).unwrap_or(0);
            let need = (len + 1).div_ceil(KV_BLOCK).saturating_sub(kept);
            let free = seqs.free_blocks() + held.saturating_sub(kept);
            if need + self.committed() <= free {
                return true;
            }
            if !self.drop_idle_cache(&keep) {
                return false;
            }
        }
    }

    /// Blocks running sequences will still take to feed what they have left (and decode once).
    fn committed(&self) -> usize {
        let seqs = self.engine.seqs();
        self.active
            .iter()
            .filter(|s| s.prefilling())
            .map(|s| {
                let left = s.feed.len() - s.fed + 1;
                seqs.blocks_needed(s.slot as u32, left).unwrap_or(0)
            })
            .sum()
    }

    /// Forgets the cache of the least recently used idle slot that holds blocks (other than
    /// those in `keep`); false when there is none.
    fn drop_idle_cache(&mut self, keep: &[Option<usize>]) -> bool {
        let victim = self
            .slots
            .iter()
            .enumerate()
            .filter(|&(i, s)| !s.busy && !s.cached.is_empty() && !keep.contains(&Some(i)))
            .min_by_key(|(_, s)| s.last_used)
            .map(|(i, _)| i);
        let Some(i) = victim else {
            return false;
        };
        let _ = self.engine.truncate(i as u32, 0);
        self.slots[i].cached.clear();
        true
    }

    /// Takes the cache back from the most recently submitted running sequence (when another
    /// one runs too): its blocks are freed and it waits at the front of the queue to be fed
    /// again. False when there is none to take.
    fn preempt_youngest(&mut self) -> bool {
        if self.active.len() < 2 {
            return false;
        }
        let Some(i) = (0..self.active.len()).max_by_key(|&i| self.active[i].submitted) else {
            return false;
        };
        let mut s = self.active.swap_remove(i);
        let slot = &mut self.slots[s.slot];
        let cached = std::mem::take(&mut slot.cached);
        slot.busy = false;
        let _ = self.engine.truncate(s.slot as u32, 0);
        s.preempt(cached);
        self.stats.preemptions.fetch_add(1, Relaxed);
        let at = self
            .preempted
            .iter()
            .position(|p| p.submitted > s.submitted)
            .unwrap_or(self.preempted.len());
        self.preempted.insert(at, s);
        true
    }

    /// Frees blocks until every decoding sequence can take its next position: idle caches
    /// first, then running sequences, youngest first.
    fn make_room_to_decode(&mut self) {
        loop {
            let seqs = self.engine.seqs();
            let need: usize = self
                .active
                .iter()
                .filter(|s| s.pending.is_some() && !s.prefilling())
                .map(|s| seqs.blocks_needed(s.slot as u32, 1).unwrap_or(0))
                .sum();
            if need <= seqs.free_blocks() {
                return;
            }
            if !self.drop_idle_cache(&[]) && !self.preempt_youngest() {
                return;
            }
        }
    }

    fn drop_cancelled(&mut self) {
        let mut i = 0;
        while i < self.preempted.len() {
            if self.preempted[i].req.sink.is_closed() {
                if let Some(s) = self.preempted.remove(i) {
                    s.finish(Finish::Cancelled);
                    self.stats.requests_cancelled.fetch_add(1, Relaxed);
                }
            } else {
                i += 1;
            }
        }
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].req.sink.is_closed() {
                let s = self.active.swap_remove(i);
                let slot = s.slot;
                s.finish(Finish::Cancelled);
                self.release(slot, Finish::Cancelled);
            } else {
                i += 1;
            }
        }
    }

    fn release(&mut self, slot: usize, finish: Finish) {
        self.clock += 1;
        let s = &mut self.slots[slot];
        s.busy = false;
        s.last_used = self.clock;
        let counter = match finish {
            Finish::Cancelled => &self.stats.requests_cancelled,
            _ => &self.stats.requests_finished,
        };
        counter.fetch_add(1, Relaxed);
    }

    /// One engine step over every active sequence.
    fn step(&mut self) {
        self.make_room_to_decode();
        self.prefill_media();
        if self.active.is_empty() {
            return;
        }
        let mut budget = self.cfg.step_tokens;
        let mut rows: Vec<Row> = Vec::new();
        // (active index, rows fed) per sequence in this step, and which ones want logits.
        let mut fed: Vec<(usize, usize)> = Vec::new();
        let mut wants: Vec<usize> = Vec::new();
        let seqs = self.engine.seqs();
        let mut free = seqs.free_blocks();
        for (i, s) in self.active.iter().enumerate() {
            if s.prefilling() {
                continue;
            }
            if let Some(t) = s.pending {
                if budget == 0 {
                    break;
                }
                let need = seqs.blocks_needed(s.slot as u32, 1).unwrap_or(0);
                if need > free {
                    continue;
                }
                free -= need;
                rows.push(Row {
                    seq: s.slot as u32,
                    token: t,
                    logits: true,
                });
                fed.push((i, 1));
                wants.push(i);
                budget -= 1;
            }
        }
        for (i, s) in self.active.iter().enumerate() {
            if budget == 0 {
                break;
            }
            if !s.prefilling() || s.req.media.is_some() {
                continue;
            }
            let feed = &s.feed;
            // As many tokens as the budget and the free blocks allow (the rest of its last
            // block plus whole free blocks).
            let slot = s.slot as u32;
            let len = seqs.len(slot).unwrap_or(0);
            let held = seqs.held_blocks(slot).unwrap_or(0);
            let fits = (held + free) * KV_BLOCK - len;
            let n = (feed.len() - s.fed).min(budget).min(fits);
            if n == 0 {
                continue;
            }
            free -= seqs.blocks_needed(slot, n).unwrap_or(0);
            let last = s.fed + n == feed.len() && s.feed_wants_logits();
            for (k, &t) in feed[s.fed..s.fed + n].iter().enumerate() {
                rows.push(Row {
                    seq: slot,
                    token: t,
                    logits: last && k + 1 == n,
                });
            }
            fed.push((i, n));
            if last {
                wants.push(i);
            }
            budget -= n;
        }
        if rows.is_empty() {
            // Every running sequence waits for blocks: free some, and try again next turn.
            if !self.drop_idle_cache(&[]) && !self.preempt_youngest() {
                self.fail_stuck();
            }
            return;
        }
        self.stats.steps.fetch_add(1, Relaxed);
        let out = match self.engine.step(&rows) {
            Ok(o) => o,
            Err(e) => return self.fail_step(&fed, e),
        };
        for &(i, n) in &fed {
            let s = &mut self.active[i];
            let slot = &mut self.slots[s.slot];
            if !s.prefilling() {
                if let Some(t) = s.pending.take() {
                    slot.cached.push(t);
                }
            } else {
                let p = &s.feed[s.fed..s.fed + n];
                slot.cached.extend_from_slice(p);
                s.fed += n;
                if s.feed_wants_logits() {
                    self.stats.prompt_tokens.fetch_add(n as u64, Relaxed);
                }
            }
        }
        // Logit rows come back in row order: decode rows first, then the prefill ends.
        let mut wants_sorted = wants.clone();
        wants_sorted.sort_by_key(|&i| rows_order(&fed, i));
        let mut done: Vec<(usize, Finish)> = Vec::new();
        for (i, logits) in wants_sorted.into_iter().zip(out) {
            if let Some(f) = self.take_logits(i, logits) {
                done.push((i, f));
            }
        }
        // Remove from the back so indices stay valid.
        done.sort_by_key(|d| std::cmp::Reverse(d.0));
        for (i, f) in done {
            self.end(i, f);
        }
    }

    /// Samples active sequence `i`'s next token from `logits`; `Some` when it finished.
    fn take_logits(&mut self, i: usize, logits: Vec<f32>) -> Option<Finish> {
        let n_ctx = self.engine.config().kv.n_ctx;
        let s = &mut self.active[i];
        let room = self.slots[s.slot].cached.len() < n_ctx;
        let prev = s.last_token;
        let generated = s.generated();
        let outcome = s.accept(logits, &self.tokenizer, room);
        if let Some(t) = s.last_token {
            match prev {
                None => self.stats.ttft.observe((t - s.submitted).as_secs_f64()),
                Some(p) => self.stats.inter_token.observe((t - p).as_secs_f64()),
            }
        }
        self.stats
            .generation_tokens
            .fetch_add((s.generated() - generated) as u64, Relaxed);
        match outcome {
            Outcome::Finished(f) => Some(f),
            Outcome::Continue => None,
        }
    }

    /// Ends active sequence `i` (swapped out of `active`) and frees its slot.
    fn end(&mut self, i: usize, f: Finish) {
        let s = self.active.swap_remove(i);
        let slot = s.slot;
        let e2e = s.submitted.elapsed().as_secs_f64();
        let f = s.finish(f);
        self.stats.e2e.observe(e2e);
        self.release(slot, f);
    }

    /// A lone running sequence that cannot get blocks even with every other cache freed (the
    /// pool is always at least one full context, so this means a bookkeeping fault): it fails
    /// rather than the loop spinning.
    fn fail_stuck(&mut self) {
        let fed: Vec<(usize, usize)> = (0..self.active.len()).map(|i| (i, 0)).collect();
        let e = EngineError::Invalid("no KV blocks are left for the only running sequence".into());
        self.fail_step(&fed, e);
    }

    /// An engine error fails every sequence of the step; their slots start empty next time.
    fn fail_step(&mut self, fed: &[(usize, usize)], e: EngineError) {
        let mut idx: Vec<usize> = fed.iter().map(|&(i, _)| i).collect();
        idx.sort_unstable_by(|a, b| b.cmp(a));
        for i in idx {
            let mut s = self.active.swap_remove(i);
            let _ = self.engine.truncate(s.slot as u32, 0);
            self.slots[s.slot].cached.clear();
            self.slots[s.slot].busy = false;
            self.stats.requests_failed.fetch_add(1, Relaxed);
            s.req
                .sink
                .send(Event::Failed(Failure::Engine(e.to_string())));
        }
    }
}

/// Position of sequence `i`'s rows in the step (rows are laid out in `fed` order).
fn rows_order(fed: &[(usize, usize)], i: usize) -> usize {
    fed.iter().position(|&(j, _)| j == i).unwrap_or(usize::MAX)
}

/// Why a prompt cannot be generated from at all (empty, no room left in a context of `n_ctx`
/// for an answer, ids outside a vocabulary of `n_vocab`); None when it can.
pub(crate) fn prompt_problem(prompt: &[u32], n_ctx: usize, n_vocab: usize) -> Option<String> {
    if prompt.is_empty() {
        return Some("the prompt is empty".into());
    }
    if prompt.len() >= n_ctx {
        return Some(format!(
            "the prompt has {} tokens but the context holds {n_ctx}",
            prompt.len()
        ));
    }
    prompt
        .iter()
        .find(|&&t| t as usize >= n_vocab)
        .map(|bad| format!("token id {bad} is outside the vocabulary of {n_vocab}"))
}
