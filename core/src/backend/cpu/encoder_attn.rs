//! Bidirectional attention within each span of a step (encoders: BERT, the vision towers), the
//! flash-attention way: a block of query rows goes over the span's keys one tile at a time,
//! keeping per row the running maximum score, the running sum of exponentials and the running
//! weighted sum of values, rescaled whenever the maximum grows (the online softmax). So only a
//! block × tile of scores exists at a time — a vision tower's span has thousands of patches, and
//! a whole span's score matrix (4096² floats for one Gemma 3 image: 64 MiB per head) would go
//! through memory instead of staying in the core's L2 — and work items are (span, head, query
//! block), enough of them to keep every thread busy on one image.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::attention::SyncPtr;
use super::gemm_f32::{self, Packed};
use super::pool::ThreadPool;
use super::simd;
use crate::backend::SeqSpan;

/// Query rows per work item: their scores against one key tile (96 × 512 floats, 192 KiB)
/// stay in L2 beside the tile's keys and values, and a multiple of the GEMM's 6-row tiles.
const QUERY_BLOCK: usize = 96;
/// Keys per tile: a multiple of the GEMM's 32-row panels, so a tile is a run of whole panels.
const KEY_TILE: usize = 512;

/// Shapes of one [`encoder_attention`] call.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub scale: f32,
}

/// One (span, key/value head)'s keys (scaled) and values, packed for the f32 GEMM kernel.
struct KeyValues {
    keys: Packed,
    values: Packed,
}

/// Bidirectional attention within each span (see `Op::EncoderAttention`). `q` is
/// `rows × n_head·head_dim`, `k` and `v` are `rows × n_head_kv·head_dim`; every row of a span
/// (padding included) attends to the span's `valid` first rows. Work items are (span, head,
/// query block) triples taken from a shared counter. Where the f32 GEMM kernel runs, a block's
/// scores and weighted sums are GEMM products against key tiles packed once per (span,
/// key/value head), by the first item that needs them; elsewhere they are dot products and
/// `axpy`s per query row. With `keys` (cross-attention), span `i`'s rows attend to the valid
/// rows of `keys[i]` in `k` / `v` (another row set) instead.
#[allow(clippy::too_many_arguments)]
pub fn encoder_attention(
    pool: &ThreadPool,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    s: AttnShape,
    spans: &[SeqSpan],
    keys: Option<&[SeqSpan]>,
    out: &mut [f32],
) {
    let qc = s.n_head * s.head_dim;
    // Items span by span; within a span head by head, so that consecutive items share keys.
    let mut firsts = Vec::with_capacity(spans.len());
    let mut items = 0;
    for span in spans {
        firsts.push(items);
        items += s.n_head * (span.len as usize).div_ceil(QUERY_BLOCK);
    }
    let gemm = gemm_f32::available();
    let packed: Vec<OnceLock<KeyValues>> = (0..if gemm { spans.len() * s.n_head_kv } else { 0 })
        .map(|_| OnceLock::new())
        .collect();
    let out_ptr = SyncPtr(out.as_mut_ptr());
    let next = AtomicUsize::new(0);
    let job = |_: usize| {
        let out_ptr = &out_ptr;
        let mut scratch = Scratch::default();
        loop {
            let item = next.fetch_add(1, Ordering::Relaxed);
            if item >= items {
                break;
            }
            let si = firsts.partition_point(|&f| f <= item) - 1;
            let span = &spans[si];
            let blocks = (span.len as usize).div_ceil(QUERY_BLOCK);
            let (h, b) = ((item - firsts[si]) / blocks, (item - firsts[si]) % blocks);
            let first = span.start as usize + b * QUERY_BLOCK;
            let rows = first..(first + QUERY_BLOCK).min((span.start + span.len) as usize);
            let it = Item {
                q,
                k,
                v,
                s,
                keys: keys.map_or(span, |ks| &ks[si]),
                h,
            };
            let mut write = |r: usize, row: &[f32]| {
                // SAFETY: row r, head h of `out` belongs to this work item alone.
                let o = unsafe {
                    std::slice::from_raw_parts_mut(
                        out_ptr.0.add(r * qc + h * s.head_dim),
                        row.len(),
                    )
                };
                o.copy_from_slice(row);
            };
            if gemm {
                let kv = packed[si * s.n_head_kv + it.kv_head()].get_or_init(|| it.pack());
                it.tiles(kv, rows, &mut scratch, &mut write);
            } else {
                it.dots(rows, &mut scratch, &mut write);
            }
        }
    };
    if items <= 1 {
        job(0);
    } else {
        pool.run(&job);
    }
}

/// Buffers one thread reuses across its work items.
#[derive(Default)]
struct Scratch {
    queries: Vec<f32>,
    scores: Vec<f32>,
    /// One tile's weighted sums of values (GEMM path).
    part: Vec<f32>,
    /// The running weighted sums of values, a row per query.
    acc: Vec<f32>,
    /// Per query row: the largest score so far, the sum of exponentials relative to it, and
    /// the factor the last tile rescaled the earlier ones by.
    max: Vec<f32>,
    sum: Vec<f32>,
    rescale: Vec<f32>,
}

/// One (span, head) of [`encoder_attention`].
struct Item<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    s: AttnShape,
    /// Where the keys and values lie: the span's own rows, or its key span.
    keys: &'a SeqSpan,
    h: usize,
}

impl Item<'_> {
    fn kv_head(&self) -> usize {
        self.h / (self.s.n_head / self.s.n_head_kv)
    }

    /// Key/value row width, and the offset of this head's first key/value row in `k`, `v`.
    fn kv_at(&self) -> (usize, usize) {
        let kc = self.s.n_head_kv * self.s.head_dim;
        (
            kc,
            self.keys.start as usize * kc + self.kv_head() * self.s.head_dim,
        )
    }

    /// This head's query columns of row `r`.
    fn query(&self, r: usize) -> &[f32] {
        let (qc, hd) = (self.s.n_head * self.s.head_dim, self.s.head_dim);
        &self.q[r * qc + self.h * hd..r * qc + (self.h + 1) * hd]
    }

    /// The span's valid keys times the scale, and its values transposed (so that weights ·
    /// values is a product against a packed weight too).
    fn pack(&self) -> KeyValues {
        let ((kc, at), hd, valid) = (self.kv_at(), self.s.head_dim, self.keys.valid as usize);
        KeyValues {
            keys: gemm_f32::pack_strided(&self.k[at..], valid, hd, kc, self.s.scale),
            values: gemm_f32::pack_transposed(&self.v[at..], valid, hd, kc),
        }
    }

    /// Query rows `rows` over the keys tile by tile with GEMM-kernel products: scores =
    /// (scale·Q)·Kᵀ, their exponentials relative to the running maximum, sums = P·V.
    fn tiles(
        &self,
        kv: &KeyValues,
        rows: Range<usize>,
        buf: &mut Scratch,
        write: &mut impl FnMut(usize, &[f32]),
    ) {
        let (hd, valid, n) = (self.s.head_dim, self.keys.valid as usize, rows.len());
        buf.queries.clear();
        for r in rows.clone() {
            buf.queries.extend_from_slice(self.query(r));
        }
        reset(&mut buf.acc, n * hd, 0.0);
        reset(&mut buf.max, n, f32::NEG_INFINITY);
        reset(&mut buf.sum, n, 0.0);
        reset(&mut buf.rescale, n, 0.0);
        buf.scores.resize(n * KEY_TILE.min(valid), 0.0);
        buf.part.resize(n * hd, 0.0);
        let (keys, values) = (kv.keys.panels(), kv.values.panels());
        for k0 in (0..valid).step_by(KEY_TILE) {
            let kt = KEY_TILE.min(valid - k0);
            let scores = &mut buf.scores[..n * kt];
            gemm_f32::product_serial(keys.rows(k0..k0 + kt), &buf.queries, n, scores, kt);
            for (i, row) in scores.chunks_exact_mut(kt).enumerate() {
                (buf.rescale[i], buf.sum[i]) = online_softmax(row, &mut buf.max[i], buf.sum[i]);
            }
            gemm_f32::product_serial(values.cols(k0..k0 + kt), scores, n, &mut buf.part, hd);
            let acc = buf.acc.chunks_exact_mut(hd);
            for ((a, p), &c) in acc.zip(buf.part.chunks_exact(hd)).zip(&buf.rescale) {
                for (a, &p) in a.iter_mut().zip(p) {
                    *a = *a * c + p;
                }
            }
        }
        for (i, a) in buf.acc.chunks_exact_mut(hd).enumerate() {
            normalize(a, buf.sum[i]);
            write(rows.start + i, a);
        }
    }

    /// Query rows `rows` with a dot product per (query, key) pair and an `axpy` per key (CPUs
    /// without the GEMM kernel); one row's scores over all the keys at a time.
    fn dots(&self, rows: Range<usize>, buf: &mut Scratch, write: &mut impl FnMut(usize, &[f32])) {
        let ((kc, at), hd, valid) = (self.kv_at(), self.s.head_dim, self.keys.valid as usize);
        fn row(m: &[f32], at: usize, hd: usize) -> &[f32] {
            &m[at..at + hd]
        }
        buf.scores.resize(valid, 0.0);
        for r in rows {
            let qr = self.query(r);
            for (j, sc) in buf.scores.iter_mut().enumerate() {
                *sc = simd::dot(qr, row(self.k, at + j * kc, hd)) * self.s.scale;
            }
            let mut max = f32::NEG_INFINITY;
            let (_, sum) = online_softmax(&mut buf.scores, &mut max, 0.0);
            reset(&mut buf.acc, hd, 0.0);
            for (j, &p) in buf.scores.iter().enumerate() {
                simd::axpy(&mut buf.acc, p, row(self.v, at + j * kc, hd));
            }
            normalize(&mut buf.acc, sum);
            write(r, &buf.acc);
        }
    }
}

/// `v`'s first `n` elements, all `x`.
fn reset(v: &mut Vec<f32>, n: usize, x: f32) {
    v.clear();
    v.resize(n, x);
}

/// One tile of a row's online softmax: raises `max` to the tile's largest score, replaces the
/// scores by their exponentials relative to it, and returns the factor that rescales what was
/// summed before (e^(old max − new max), 0 on the first tile) and the new sum.
fn online_softmax(row: &mut [f32], max: &mut f32, sum: f32) -> (f32, f32) {
    let m = max.max(simd::max(row));
    let rescale = (*max - m).exp();
    *max = m;
    let tile = simd::exp_sum(row, m);
    (rescale, sum * rescale + tile)
}

/// `acc /= sum` (left at zero when a span has no valid key: nothing was summed).
fn normalize(acc: &mut [f32], sum: f32) {
    let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
    acc.iter_mut().for_each(|a| *a *= inv);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [−2, 2).
    fn fill(len: usize, m: usize) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * m % 97) as f32 - 48.0) / 24.0)
            .collect()
    }

    /// Row r, head h of plain attention in f64: softmax of scaled dot products over the span's
    /// valid keys, then the weighted sum of values.
    fn reference(q: &[f32], k: &[f32], v: &[f32], s: AttnShape, span: &SeqSpan) -> Vec<f64> {
        cross_reference(q, k, v, s, span, span)
    }

    /// [`reference`] with the keys in `keys` (of `k` / `v`) rather than in the span's rows.
    fn cross_reference(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        s: AttnShape,
        span: &SeqSpan,
        key: &SeqSpan,
    ) -> Vec<f64> {
        let (hd, qc, kc) = (s.head_dim, s.n_head * s.head_dim, s.n_head_kv * s.head_dim);
        let mut out = vec![0f64; q.len()];
        for h in 0..s.n_head {
            let kh = h / (s.n_head / s.n_head_kv);
            for r in span.start as usize..(span.start + span.len) as usize {
                let keys = key.start as usize..(key.start + key.valid) as usize;
                let scores: Vec<f64> = keys
                    .clone()
                    .map(|j| {
                        (0..hd)
                            .map(|d| q[r * qc + h * hd + d] as f64 * k[j * kc + kh * hd + d] as f64)
                            .sum::<f64>()
                            * s.scale as f64
                    })
                    .collect();
                let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
                let sum: f64 = e.iter().sum();
                for d in 0..hd {
                    out[r * qc + h * hd + d] = keys
                        .clone()
                        .zip(&e)
                        .map(|(j, w)| w / sum * v[j * kc + kh * hd + d] as f64)
                        .sum();
                }
            }
        }
        out
    }

    /// Both paths against the f64 reference: two heads sharing one key/value head, head width
    /// 40 (not a multiple of 32), a span over several query blocks and key tiles.
    #[test]
    fn tiles_and_dots_match_plain_attention() {
        let s = AttnShape {
            n_head: 2,
            n_head_kv: 1,
            head_dim: 40,
            scale: 0.35,
        };
        // 13 query blocks (the last partial); 1100 valid keys = two full key tiles and a
        // partial one, whose last 32-key panel is partial too; 60 padding rows after them.
        let span = SeqSpan {
            start: 3,
            len: 1160,
            valid: 1100,
        };
        let n = 3 + 1160 + 2;
        let (q, k, v) = (fill(n * 80, 31), fill(n * 40, 17), fill(n * 40, 23));
        let want = reference(&q, &k, &v, s, &span);
        let run = |gemm: bool| {
            let mut out = vec![0f32; n * 80];
            let mut buf = Scratch::default();
            for h in 0..2 {
                let it = Item {
                    q: &q,
                    k: &k,
                    v: &v,
                    s,
                    keys: &span,
                    h,
                };
                let mut write = |r: usize, row: &[f32]| {
                    out[r * 80 + h * 40..r * 80 + (h + 1) * 40].copy_from_slice(row)
                };
                let kv = it.pack();
                let len = span.len as usize;
                for b in 0..len.div_ceil(QUERY_BLOCK) {
                    let first = 3 + b * QUERY_BLOCK;
                    let rows = first..(first + QUERY_BLOCK).min(3 + len);
                    if gemm {
                        it.tiles(&kv, rows, &mut buf, &mut write);
                    } else {
                        it.dots(rows, &mut buf, &mut write);
                    }
                }
            }
            out
        };
        let mut paths = vec![run(false)];
        if gemm_f32::available() {
            paths.push(run(true));
        }
        for got in paths {
            let worst = got
                .iter()
                .zip(&want)
                .map(|(&x, &y)| (x as f64 - y).abs())
                .fold(0f64, f64::max);
            assert!(worst < 2e-6, "largest difference {worst:e}");
            assert!(
                got[..3 * 80]
                    .iter()
                    .chain(&got[(n - 2) * 80..])
                    .all(|&x| x == 0.0),
                "rows outside the span are untouched"
            );
        }
    }

    /// Cross-attention: 700 query rows in two spans over key spans of another, shorter row
    /// set (the second with padding), on the pool, against the f64 reference.
    #[test]
    fn cross_attention_reads_the_key_spans() {
        let s = AttnShape {
            n_head: 2,
            n_head_kv: 2,
            head_dim: 24,
            scale: 0.3,
        };
        let spans = [
            SeqSpan {
                start: 0,
                len: 600,
                valid: 600,
            },
            SeqSpan {
                start: 600,
                len: 100,
                valid: 100,
            },
        ];
        let keys = [
            SeqSpan {
                start: 0,
                len: 530,
                valid: 530,
            },
            SeqSpan {
                start: 530,
                len: 20,
                valid: 13,
            },
        ];
        let (n, nk) = (700, 550);
        let (q, k, v) = (fill(n * 48, 11), fill(nk * 48, 37), fill(nk * 48, 41));
        let mut out = vec![f32::NAN; n * 48];
        encoder_attention(
            &ThreadPool::new(2),
            &q,
            &k,
            &v,
            s,
            &spans,
            Some(&keys),
            &mut out,
        );
        for (span, key) in spans.iter().zip(&keys) {
            let want = cross_reference(&q, &k, &v, s, span, key);
            for i in span.start as usize * 48..(span.start + span.len) as usize * 48 {
                assert!((out[i] as f64 - want[i]).abs() < 2e-6, "{i}");
            }
        }
    }

    #[test]
    fn attention_within_spans_only() {
        // Two spans of one head of width 2: a row's output is a mix of its own span's values.
        let pool = ThreadPool::new(2);
        let q = vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let k = q.clone();
        let v = vec![1.0, 2.0, 3.0, 4.0, 100.0, 200.0];
        let spans = [
            SeqSpan {
                start: 0,
                len: 2,
                valid: 2,
            },
            SeqSpan {
                start: 2,
                len: 1,
                valid: 1,
            },
        ];
        let shape = AttnShape {
            n_head: 1,
            n_head_kv: 1,
            head_dim: 2,
            scale: 1.0,
        };
        let mut out = vec![0.0; 6];
        encoder_attention(&pool, &q, &k, &v, shape, &spans, None, &mut out);
        // Span 2 has one row: its output is its own value.
        assert_eq!(&out[4..], &[100.0, 200.0]);
        // Row 0 weighs row 0 by e^1 and row 1 by e^0.
        let w0 = 1f32.exp() / (1f32.exp() + 1.0);
        assert!((out[0] - (w0 * 1.0 + (1.0 - w0) * 3.0)).abs() < 1e-6);
    }

    #[test]
    fn threads_and_spans_match_the_reference() {
        // Two spans (the second past several query blocks), four heads over two key/value
        // heads, through the pool: every (span, head, block) item lands in its own place.
        let s = AttnShape {
            n_head: 4,
            n_head_kv: 2,
            head_dim: 32,
            scale: 0.2,
        };
        let spans = [
            SeqSpan {
                start: 0,
                len: 40,
                valid: 40,
            },
            SeqSpan {
                start: 40,
                len: 300,
                valid: 290,
            },
        ];
        let n = 340;
        let (q, k, v) = (fill(n * 128, 13), fill(n * 64, 19), fill(n * 64, 29));
        let mut out = vec![f32::NAN; n * 128];
        encoder_attention(&ThreadPool::new(2), &q, &k, &v, s, &spans, None, &mut out);
        for span in &spans {
            let want = reference(&q, &k, &v, s, span);
            let rows = span.start as usize * 128..(span.start + span.len) as usize * 128;
            for i in rows {
                assert!(
                    (out[i] as f64 - want[i]).abs() < 2e-6,
                    "{i}: {} vs {}",
                    out[i],
                    want[i]
                );
            }
        }
    }
}
