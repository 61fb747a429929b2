//! The CPU key/value cache and causal attention over it.

use std::sync::atomic::{AtomicUsize, Ordering};

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::attn_kernels;
use super::pool::{PhaseBarrier, ThreadPool};
use crate::backend::{
    copy_plan, BackendError, BlockTables, KvCacheSpec, KvDtype, KvLayerSpec, Result, KV_BLOCK,
};

/// Cached keys or values of one layer, `[positions][n_kv_head · head_dim]`: the pool's
/// `n_blocks · KV_BLOCK` positions for a full-attention layer, `n_seq · capacity` ring
/// positions for a sliding-window one.
enum Store {
    F16(Vec<f16>),
    F32(Vec<f32>),
}

impl Store {
    fn new(dtype: KvDtype, len: usize) -> Self {
        match dtype {
            KvDtype::F16 => Store::F16(vec![f16::ZERO; len]),
            KvDtype::F32 => Store::F32(vec![0.0; len]),
        }
    }

    fn write(&mut self, at: usize, src: &[f32]) {
        match self {
            Store::F16(d) => d[at..at + src.len()].convert_from_f32_slice(src),
            Store::F32(d) => d[at..at + src.len()].copy_from_slice(src),
        }
    }

    /// Copies `len` elements from `from` to `to` (non-overlapping).
    fn copy(&mut self, from: usize, to: usize, len: usize) {
        match self {
            Store::F16(d) => d.copy_within(from..from + len, to),
            Store::F32(d) => d.copy_within(from..from + len, to),
        }
    }

    /// Copies `out.len()` elements starting at `at` into `out` as f32.
    fn read(&self, at: usize, out: &mut [f32]) {
        match self {
            Store::F16(d) => {
                let n = out.len();
                // Whole-slice conversion uses F16C eight lanes at a time where available.
                d[at..at + n].convert_to_f32_slice(out);
            }
            Store::F32(d) => out.copy_from_slice(&d[at..at + out.len()]),
        }
    }
}

struct Layer {
    spec: KvLayerSpec,
    k: Store,
    v: Store,
}

impl Layer {
    /// Storage position of `seq`'s position `pos`: its ring slot, or its place in the pool
    /// block the table maps (None when unmapped).
    fn slot(&self, tables: &BlockTables, seq: usize, pos: usize) -> Option<usize> {
        match self.spec.window {
            Some(_) => Some(seq * self.spec.capacity + pos % self.spec.capacity),
            None => tables.slot(seq, pos),
        }
    }
}

/// A whole cache: every layer, every sequence slot, and the block tables.
pub struct KvStorage {
    n_seq: usize,
    dtype: KvDtype,
    layers: Vec<Layer>,
    tables: BlockTables,
}

impl KvStorage {
    /// Allocates zeroed storage for `spec`.
    pub fn new(spec: &KvCacheSpec) -> Result<Self> {
        if spec.n_seq == 0 {
            return Err(BackendError::Unsupported(
                "a KV cache needs at least one sequence slot".into(),
            ));
        }
        let layers = spec
            .layers
            .iter()
            .map(|l| {
                let per_pos_k = l.n_kv_head * l.head_dim_k;
                let per_pos_v = l.n_kv_head * l.head_dim_v;
                let slots = match l.window {
                    Some(_) => spec.n_seq * l.capacity,
                    None => spec.n_blocks() * KV_BLOCK,
                };
                Layer {
                    spec: l.clone(),
                    k: Store::new(spec.dtype, slots * per_pos_k),
                    v: Store::new(spec.dtype, slots * per_pos_v),
                }
            })
            .collect();
        Ok(KvStorage {
            n_seq: spec.n_seq,
            dtype: spec.dtype,
            layers,
            tables: BlockTables::new(spec),
        })
    }

    /// Replaces one sequence's block table.
    pub fn set_table(&mut self, seq: u32, table: &[u32]) -> Result<()> {
        self.tables.set(seq, table)
    }

    /// Copies sequence `src`'s positions `0..n` into `dst`, every layer
    /// ([`crate::backend::Backend::copy_prefix`]).
    pub fn copy_prefix(&mut self, src: u32, dst: u32, n: usize) -> Result<()> {
        let specs = self.layers.iter().map(|l| &l.spec);
        let runs = copy_plan(specs, self.n_seq, &self.tables, src, dst, n)?;
        for (l, runs) in self.layers.iter_mut().zip(runs) {
            let wk = l.spec.n_kv_head * l.spec.head_dim_k;
            let wv = l.spec.n_kv_head * l.spec.head_dim_v;
            for r in runs {
                l.k.copy(r.src * wk, r.dst * wk, r.len * wk);
                l.v.copy(r.src * wv, r.dst * wv, r.len * wv);
            }
        }
        Ok(())
    }

    fn layer(&self, layer: usize) -> Result<&Layer> {
        self.layers
            .get(layer)
            .ok_or_else(|| BackendError::InvalidStep(format!("the KV cache has no layer {layer}")))
    }

    /// Writes rows of keys and values at their sequences and positions.
    pub fn store(
        &mut self,
        layer: usize,
        k: &[f32],
        v: &[f32],
        positions: &[u32],
        seqs: &[u32],
    ) -> Result<()> {
        let n_seq = self.n_seq;
        self.layer(layer)?;
        let l = &mut self.layers[layer];
        let wk = l.spec.n_kv_head * l.spec.head_dim_k;
        let wv = l.spec.n_kv_head * l.spec.head_dim_v;
        if k.len() != positions.len() * wk || v.len() != positions.len() * wv {
            return Err(BackendError::InvalidStep(format!(
                "layer {layer}: key/value rows do not match the cache width"
            )));
        }
        let cap = l.spec.capacity;
        for (r, (&pos, &seq)) in positions.iter().zip(seqs).enumerate() {
            if seq as usize >= n_seq {
                return Err(BackendError::InvalidStep(format!(
                    "sequence slot {seq} does not exist (the cache has {n_seq})"
                )));
            }
            if l.spec.window.is_none() && pos as usize >= cap {
                return Err(BackendError::ContextFull {
                    seq,
                    pos: pos as usize,
                    capacity: cap,
                });
            }
            let slot = l
                .slot(&self.tables, seq as usize, pos as usize)
                .ok_or_else(|| unmapped(layer, seq, pos))?;
            l.k.write(slot * wk, &k[r * wk..(r + 1) * wk]);
            l.v.write(slot * wv, &v[r * wv..(r + 1) * wv]);
        }
        Ok(())
    }

    /// Causal attention of `q` rows (`n_head` heads each) over the cache into `out`.
    ///
    /// Each row's result is a fixed function of its own query, position and cached keys and
    /// values (every score and every output sum is formed in the same order whichever rows
    /// share a block and however the work is split across threads), so a sequence's output
    /// does not depend on the other sequences of a batch or on the thread count.
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    pub fn attend(
        &self,
        pool: &ThreadPool,
        layer: usize,
        q: &[f32],
        n_head: usize,
        scale: f32,
        positions: &[u32],
        seqs: &[u32],
        out: &mut [f32],
    ) -> Result<()> {
        self.attend_until(
            pool, layer, q, n_head, scale, positions, positions, seqs, out,
        )
    }

    /// [`attend`](Self::attend) where row `r` sees the cached positions up to `ends[r]`
    /// (at least its own position; more for rows that attend to later rows of the step,
    /// e.g. an image's tokens), the window still counted back from its own position.
    #[allow(clippy::too_many_arguments)]
    pub fn attend_until(
        &self,
        pool: &ThreadPool,
        layer: usize,
        q: &[f32],
        n_head: usize,
        scale: f32,
        positions: &[u32],
        ends: &[u32],
        seqs: &[u32],
        out: &mut [f32],
    ) -> Result<()> {
        let l = self.layer(layer)?;
        let s = &l.spec;
        let (hk, hv, n_kv) = (s.head_dim_k, s.head_dim_v, s.n_kv_head);
        if n_kv == 0 || !n_head.is_multiple_of(n_kv) || q.len() != positions.len() * n_head * hk {
            return Err(BackendError::InvalidStep(format!(
                "layer {layer}: {n_head} query heads of {hk} do not fit {n_kv} key/value heads"
            )));
        }
        if out.len() != positions.len() * n_head * hv || seqs.len() != positions.len() {
            return Err(BackendError::InvalidStep(format!(
                "layer {layer}: attention output or sequence ids do not match the query rows"
            )));
        }
        if ends.len() != positions.len() {
            return Err(BackendError::InvalidStep(format!(
                "layer {layer}: {} attention ends for {} rows",
                ends.len(),
                positions.len()
            )));
        }
        for ((&pos, &end), &seq) in positions.iter().zip(ends).zip(seqs) {
            let visible = span(s, pos as usize).start..end as usize + 1;
            if seq as usize >= self.n_seq || end < pos || visible.len() > s.capacity {
                return Err(BackendError::InvalidStep(format!(
                    "layer {layer}: sequence {seq} position {pos} (attending to {end}) is \
                     outside the cache"
                )));
            }
            // Tables are mapped from their start, so a mapped last position means every
            // position the row attends to is.
            if l.slot(&self.tables, seq as usize, end as usize).is_none() {
                return Err(unmapped(layer, seq, end));
            }
        }
        let group = n_head / n_kv;
        let nth = pool.n_threads();
        let job = Job {
            layer: l,
            tables: &self.tables,
            q,
            n_head,
            group,
            scale,
            positions,
            ends,
            seqs,
            round_q: self.dtype == KvDtype::F16,
            fast: attn_kernels::use_avx512(hk, hv),
            out: SyncPtr(out.as_mut_ptr()),
        };
        // Query blocks: runs of rows of one sequence at consecutive positions, small enough
        // to leave a few blocks per thread.
        let max_rows = (BLOCK_QUERIES / group).clamp(1, MAX_BLOCK_ROWS);
        let rows = max_rows.min(positions.len().div_ceil(4 * nth)).max(1);
        let mut blocks = Vec::new();
        let mut r = 0;
        while r < positions.len() {
            let mut e = r + 1;
            while e < positions.len()
                && e - r < rows
                && seqs[e] == seqs[r]
                && positions[e - 1].checked_add(1) == Some(positions[e])
            {
                e += 1;
            }
            blocks.push(job.block(r, e));
            r = e;
        }
        let n_tasks = blocks.len() * n_kv;
        let longest = blocks.iter().map(|b| b.u1 - b.u0).max().unwrap_or(0);
        // Too few tasks to share evenly (one sequence's token: a single task per key/value
        // head): split each task across the threads instead.
        let uneven = n_tasks < nth || (n_tasks < 4 * nth && !n_tasks.is_multiple_of(nth));
        if nth > 1 && uneven && longest >= SPLIT_MIN_KEYS {
            job.split(pool, &blocks);
            return Ok(());
        }
        // Tasks are taken from a shared counter, latest blocks first: a causal row's work
        // grows with its position, so fixed contiguous shares would leave the thread holding
        // the early rows idle for most of a prefill chunk; longest-first keeps the tail short.
        let next = AtomicUsize::new(0);
        pool.run(&|_| {
            let mut scratch = Scratch::default();
            loop {
                let taken = next.fetch_add(1, Ordering::Relaxed);
                if taken >= n_tasks {
                    break;
                }
                let task = n_tasks - 1 - taken;
                job.run_block(&blocks[task / n_kv], task % n_kv, &mut scratch);
            }
        });
        Ok(())
    }
}

/// Query vectors (rows × heads of a group) per block: their keys and values are converted to
/// f32 once per block, and the kernels' tiles take 4 of them at a time.
const BLOCK_QUERIES: usize = 32;
/// Most rows in one query block.
const MAX_BLOCK_ROWS: usize = 16;
/// Positions per converted key/value block (64 rows of a 256-wide head: 64 KiB, which stays
/// in the L2 cache while every query of the block uses it).
const KEY_BLOCK: usize = 64;
/// Fewest keys for which one row's attention is split across threads (below this the
/// barriers cost more than the second thread saves).
const SPLIT_MIN_KEYS: usize = 64;
/// Output dims per work item when one row's weighted sum is split across threads.
const SPLIT_DIMS: usize = 64;

/// One `attend` call: the inputs every task reads.
struct Job<'a> {
    layer: &'a Layer,
    tables: &'a BlockTables,
    q: &'a [f32],
    n_head: usize,
    group: usize,
    scale: f32,
    positions: &'a [u32],
    /// Last position each row sees (its own, or later for a bidirectional range).
    ends: &'a [u32],
    seqs: &'a [u32],
    /// Queries and weights are rounded to f16 when the cache is f16 (llama.cpp multiplies in
    /// the cache's type).
    round_q: bool,
    fast: bool,
    out: SyncPtr,
}

/// Rows `r0..r1` (one sequence, consecutive positions) and the union `u0..u1` of the
/// positions they attend to.
struct QBlock {
    r0: usize,
    r1: usize,
    seq: usize,
    u0: usize,
    u1: usize,
}

/// Per-thread buffers, reused across tasks.
#[derive(Default)]
struct Scratch {
    /// Query vectors of a block, `[nq][hk]`.
    q: Vec<f32>,
    /// Converted key or value rows.
    kv: Vec<f32>,
    /// Scores, then weights, `[nq][u1 - u0]`.
    s: Vec<f32>,
    /// Output sums.
    o: Vec<f32>,
    lo: Vec<usize>,
    hi: Vec<usize>,
    half: Vec<f16>,
}

impl Job<'_> {
    fn spec(&self) -> &KvLayerSpec {
        &self.layer.spec
    }

    fn block(&self, r0: usize, r1: usize) -> QBlock {
        let s = self.spec();
        let u0 = span(s, self.positions[r0] as usize).start;
        QBlock {
            r0,
            r1,
            seq: self.seqs[r0] as usize,
            u0,
            u1: self.ends[r0..r1]
                .iter()
                .max()
                .map_or(0, |&e| e as usize + 1),
        }
    }

    /// Positions query vector `qi` of block `b` attends to.
    fn row_span(&self, b: &QBlock, qi: usize) -> std::ops::Range<usize> {
        let r = b.r0 + qi / self.group;
        span(self.spec(), self.positions[r] as usize).start..self.ends[r] as usize + 1
    }

    /// The block's query vectors for key/value head `kvh`, `[nq][hk]`.
    fn load_queries(&self, b: &QBlock, kvh: usize, dst: &mut Vec<f32>, half: &mut Vec<f16>) {
        let hk = self.spec().head_dim_k;
        let w = self.group * hk;
        dst.clear();
        for r in b.r0..b.r1 {
            let q0 = (r * self.n_head + kvh * self.group) * hk;
            dst.extend_from_slice(&self.q[q0..q0 + w]);
        }
        if self.round_q {
            round_to_f16(dst, half);
        }
    }

    /// Dims `d0..d0 + nd` of head `kvh` of the cached rows at positions `p0..p0 + n` of the
    /// block's sequence, as f32 `[n][nd]`.
    #[allow(clippy::too_many_arguments)]
    fn load_rows(
        &self,
        values: bool,
        b: &QBlock,
        kvh: usize,
        p0: usize,
        n: usize,
        d0: usize,
        nd: usize,
        dst: &mut Vec<f32>,
    ) {
        let s = self.spec();
        let (store, hd) = if values {
            (&self.layer.v, s.head_dim_v)
        } else {
            (&self.layer.k, s.head_dim_k)
        };
        dst.resize(n * nd, 0.0);
        for (i, row) in dst.chunks_exact_mut(nd).enumerate() {
            // Checked mapped before the job started.
            let slot = self.layer.slot(self.tables, b.seq, p0 + i).unwrap_or(0);
            store.read((slot * s.n_kv_head + kvh) * hd + d0, row);
        }
    }

    /// Softmax of one query's scores over its span, then the f16 rounding of the weights.
    fn normalize(&self, w: &mut [f32], half: &mut Vec<f16>) {
        super::ops::softmax(w);
        if self.round_q {
            round_to_f16(w, half);
        }
    }

    /// Key range (relative to a block starting at `p0` of `nk` positions) of each query.
    fn ranges(&self, b: &QBlock, q0: usize, nq: usize, p0: usize, nk: usize, sc: &mut Scratch) {
        sc.lo.clear();
        sc.hi.clear();
        for qi in q0..q0 + nq {
            let sp = self.row_span(b, qi);
            let lo = sp.start.clamp(p0, p0 + nk) - p0;
            let hi = sp.end.clamp(p0, p0 + nk) - p0;
            sc.lo.push(lo);
            sc.hi.push(hi.max(lo));
        }
    }

    /// Copies output sums `o` (`nq` queries from `q0`, dims `d0..d0 + nd`, rows of `nd`) of
    /// head group `kvh` into the output.
    fn write_out(&self, b: &QBlock, kvh: usize, q0: usize, d0: usize, nd: usize, o: &[f32]) {
        let hv = self.spec().head_dim_v;
        for (i, row) in o.chunks_exact(nd).enumerate() {
            let qi = q0 + i;
            let (r, g) = (b.r0 + qi / self.group, qi % self.group);
            let at = (r * self.n_head + kvh * self.group + g) * hv + d0;
            // SAFETY: every (row, head, dims) of `out` is written by exactly one task or
            // work item, and `out` outlives the pool job.
            unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), self.out.0.add(at), nd) };
        }
    }

    /// All of one block for one key/value head, on one thread.
    fn run_block(&self, b: &QBlock, kvh: usize, sc: &mut Scratch) {
        let s = self.spec();
        let (hk, hv) = (s.head_dim_k, s.head_dim_v);
        let nq = (b.r1 - b.r0) * self.group;
        let u = b.u1 - b.u0;
        self.load_queries(b, kvh, &mut sc.q, &mut sc.half);
        sc.s.resize(nq * u, 0.0);
        for p0 in (b.u0..b.u1).step_by(KEY_BLOCK) {
            let nk = KEY_BLOCK.min(b.u1 - p0);
            self.load_rows(false, b, kvh, p0, nk, 0, hk, &mut sc.kv);
            let out = &mut sc.s[p0 - b.u0..];
            attn_kernels::scores(&sc.q, nq, &sc.kv, nk, hk, self.scale, out, u, self.fast);
        }
        for qi in 0..nq {
            let sp = self.row_span(b, qi);
            let w = &mut sc.s[qi * u + sp.start - b.u0..qi * u + sp.end - b.u0];
            self.normalize(w, &mut sc.half);
        }
        sc.o.clear();
        sc.o.resize(nq * hv, 0.0);
        for p0 in (b.u0..b.u1).step_by(KEY_BLOCK) {
            let nk = KEY_BLOCK.min(b.u1 - p0);
            self.load_rows(true, b, kvh, p0, nk, 0, hv, &mut sc.kv);
            self.ranges(b, 0, nq, p0, nk, sc);
            attn_kernels::weighted_sum(
                &sc.s[p0 - b.u0..],
                u,
                nq,
                &sc.lo,
                &sc.hi,
                &sc.kv,
                hv,
                nk,
                hv,
                &mut sc.o,
                hv,
                self.fast,
            );
        }
        self.write_out(b, kvh, 0, 0, hv, &sc.o);
    }

    /// Attention for fewer tasks than threads (token generation of one sequence): every
    /// thread takes part in three phases, split by keys (scores), by query (softmax) and by
    /// output dims (weighted sums). Each score and each output sum is formed exactly as in
    /// [`Job::run_block`], so the split changes no bits.
    fn split(&self, pool: &ThreadPool, blocks: &[QBlock]) {
        let s = self.spec();
        let (hk, hv, n_kv) = (s.head_dim_k, s.head_dim_v, s.n_kv_head);
        // (block, kv head, query count, key count, offset of its scores, of its queries)
        let mut tasks = Vec::new();
        let (mut s_len, mut q_all) = (0, Vec::new());
        let mut half = Vec::new();
        let mut qb = Vec::new();
        for (bi, b) in blocks.iter().enumerate() {
            for kvh in 0..n_kv {
                let nq = (b.r1 - b.r0) * self.group;
                let u = b.u1 - b.u0;
                tasks.push((bi, kvh, nq, u, s_len, q_all.len()));
                s_len += nq * u;
                self.load_queries(b, kvh, &mut qb, &mut half);
                q_all.extend_from_slice(&qb);
            }
        }
        // Output dims per weighted-sum item: at most SPLIT_DIMS, at least two items per
        // query tile for narrow heads (multiples of 16, the kernels' width).
        let dims = (hv / 2 / 16 * 16).clamp(16, SPLIT_DIMS);
        let mut keys = Vec::new();
        let mut rows = Vec::new();
        let mut sums = Vec::new();
        for (t, &(_, _, nq, u, _, _)) in tasks.iter().enumerate() {
            keys.extend((0..u).step_by(KEY_BLOCK).map(|k0| (t, k0)));
            rows.extend((0..nq).map(|qi| (t, qi)));
            for q0 in (0..nq).step_by(4) {
                sums.extend((0..hv).step_by(dims).map(|d0| (t, q0, d0)));
            }
        }
        let mut scores = vec![0f32; s_len];
        let s_ptr = SyncPtr(scores.as_mut_ptr());
        let (next1, next2, next3) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        let barrier = PhaseBarrier::new(pool.n_threads());
        pool.run(&|_| {
            let s_ptr = &s_ptr;
            let mut sc = Scratch::default();
            let mut tile = Vec::new();
            while let Some(&(t, k0)) = keys.get(next1.fetch_add(1, Ordering::Relaxed)) {
                let (bi, kvh, nq, u, so, qo) = tasks[t];
                let b = &blocks[bi];
                let nk = KEY_BLOCK.min(u - k0);
                self.load_rows(false, b, kvh, b.u0 + k0, nk, 0, hk, &mut sc.kv);
                tile.resize(nq * nk, 0.0);
                let q = &q_all[qo..qo + nq * hk];
                attn_kernels::scores(q, nq, &sc.kv, nk, hk, self.scale, &mut tile, nk, self.fast);
                for qi in 0..nq {
                    // SAFETY: each (query, key block) of `scores` is written by one item only.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            tile[qi * nk..].as_ptr(),
                            s_ptr.0.add(so + qi * u + k0),
                            nk,
                        )
                    };
                }
            }
            barrier.wait(1);
            while let Some(&(t, qi)) = rows.get(next2.fetch_add(1, Ordering::Relaxed)) {
                let (bi, _, _, u, so, _) = tasks[t];
                let b = &blocks[bi];
                let sp = self.row_span(b, qi);
                let at = so + qi * u + sp.start - b.u0;
                // SAFETY: each query's weights are a disjoint part of `scores`, and no other
                // thread reads `scores` until the next barrier.
                let w = unsafe { std::slice::from_raw_parts_mut(s_ptr.0.add(at), sp.len()) };
                self.normalize(w, &mut sc.half);
            }
            barrier.wait(2);
            // SAFETY: from here on `scores` is only read.
            let weights = unsafe { std::slice::from_raw_parts(s_ptr.0 as *const f32, s_len) };
            while let Some(&(t, q0, d0)) = sums.get(next3.fetch_add(1, Ordering::Relaxed)) {
                let (bi, kvh, nq, u, so, _) = tasks[t];
                let b = &blocks[bi];
                let tq = (nq - q0).min(4);
                let nd = dims.min(hv - d0);
                sc.o.clear();
                sc.o.resize(tq * nd, 0.0);
                for p0 in (b.u0..b.u1).step_by(KEY_BLOCK) {
                    let nk = KEY_BLOCK.min(b.u1 - p0);
                    self.load_rows(true, b, kvh, p0, nk, d0, nd, &mut sc.kv);
                    self.ranges(b, q0, tq, p0, nk, &mut sc);
                    attn_kernels::weighted_sum(
                        &weights[so + q0 * u + p0 - b.u0..],
                        u,
                        tq,
                        &sc.lo,
                        &sc.hi,
                        &sc.kv,
                        nd,
                        nk,
                        nd,
                        &mut sc.o,
                        nd,
                        self.fast,
                    );
                }
                self.write_out(b, kvh, q0, d0, nd, &sc.o);
            }
        });
    }
}

fn unmapped(layer: usize, seq: u32, pos: u32) -> BackendError {
    BackendError::InvalidStep(format!(
        "layer {layer}: sequence {seq} position {pos} has no KV block (its table does not map it)"
    ))
}

/// Cached positions visible from `pos`: from the window start (or 0) to `pos`.
fn span(s: &KvLayerSpec, pos: usize) -> std::ops::Range<usize> {
    let lo = match s.window {
        Some(w) => (pos + 1).saturating_sub(w),
        None => 0,
    };
    lo..pos + 1
}

/// Rounds every value to the nearest f16 (ties to even), in place.
fn round_to_f16(v: &mut [f32], half: &mut Vec<f16>) {
    half.clear();
    half.resize(v.len(), f16::ZERO);
    half.convert_from_f32_slice(v);
    half.convert_to_f32_slice(v);
}

/// A raw output pointer shared by pool threads that write disjoint ranges.
pub struct SyncPtr(pub *mut f32);
unsafe impl Sync for SyncPtr {}
unsafe impl Send for SyncPtr {}
