//! Attention over the KV cache: against an f64 reference (causal, sliding window, GQA,
//! several sequences, f16 and f32 caches), and bit-identical results for one row whatever
//! else shares its call and however many threads run it; the block kernels against the
//! portable ones.

use super::attention::KvStorage;
use super::attn_kernels::{scores, use_avx512, weighted_sum};
use super::pool::ThreadPool;
use crate::backend::{KvCacheSpec, KvDtype, KvLayerSpec};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize, amp: f32) -> Vec<f32> {
        (0..n).map(|_| self.next() * amp).collect()
    }
}

/// A cache geometry and the rows stored in it.
struct Case {
    n_head: usize,
    n_kv: usize,
    hk: usize,
    hv: usize,
    window: Option<usize>,
    capacity: usize,
    dtype: KvDtype,
}

impl Case {
    fn spec(&self, n_seq: usize) -> KvCacheSpec {
        KvCacheSpec {
            layers: vec![KvLayerSpec {
                n_kv_head: self.n_kv,
                head_dim_k: self.hk,
                head_dim_v: self.hv,
                capacity: self.capacity,
                window: self.window,
            }],
            n_seq,
            dtype: self.dtype,
            pool_blocks: None,
        }
    }
}

fn round(v: f32, f16: bool) -> f64 {
    if f16 {
        half::f16::from_f32(v).to_f64()
    } else {
        v as f64
    }
}

/// Fills sequences `0..n_seq` with `len` positions each of random keys/values; returns the
/// stored (possibly f16-rounded) keys and values as f64, `[seq][pos][n_kv · hd]`.
#[allow(clippy::type_complexity)]
fn fill(
    c: &Case,
    kv: &mut KvStorage,
    n_seq: usize,
    len: usize,
    rng: &mut Rng,
) -> (Vec<Vec<Vec<f64>>>, Vec<Vec<Vec<f64>>>) {
    let f16 = c.dtype == KvDtype::F16;
    let (mut ks, mut vs) = (Vec::new(), Vec::new());
    for seq in 0..n_seq {
        let (mut kk, mut vv) = (Vec::new(), Vec::new());
        // Stored in chunks, as prefill steps do (a ring of a sliding layer keeps the last
        // `capacity` positions).
        let mut p = 0;
        while p < len {
            let n = 7.min(len - p);
            let k = rng.vec(n * c.n_kv * c.hk, 1.0);
            let v = rng.vec(n * c.n_kv * c.hv, 2.0);
            let pos: Vec<u32> = (p..p + n).map(|x| x as u32).collect();
            kv.store(0, &k, &v, &pos, &vec![seq as u32; n]).unwrap();
            for i in 0..n {
                let w = c.n_kv * c.hk;
                kk.push(
                    k[i * w..(i + 1) * w]
                        .iter()
                        .map(|&x| round(x, f16))
                        .collect(),
                );
                let w = c.n_kv * c.hv;
                vv.push(
                    v[i * w..(i + 1) * w]
                        .iter()
                        .map(|&x| round(x, f16))
                        .collect(),
                );
            }
            p += n;
        }
        ks.push(kk);
        vs.push(vv);
    }
    (ks, vs)
}

/// Attention of one query row in f64 from the stored keys and values.
#[allow(clippy::too_many_arguments)]
fn reference(
    c: &Case,
    q: &[f32],
    pos: usize,
    keys: &[Vec<f64>],
    values: &[Vec<f64>],
    scale: f32,
) -> Vec<f64> {
    let f16 = c.dtype == KvDtype::F16;
    let group = c.n_head / c.n_kv;
    let lo = c.window.map_or(0, |w| (pos + 1).saturating_sub(w));
    let mut out = vec![0f64; c.n_head * c.hv];
    for h in 0..c.n_head {
        let kvh = h / group;
        let qh: Vec<f64> = q[h * c.hk..(h + 1) * c.hk]
            .iter()
            .map(|&x| round(x, f16))
            .collect();
        let s: Vec<f64> = (lo..=pos)
            .map(|p| {
                let k = &keys[p][kvh * c.hk..(kvh + 1) * c.hk];
                qh.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() * scale as f64
            })
            .collect();
        let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = e.iter().sum();
        for (j, p) in (lo..=pos).enumerate() {
            let v = &values[p][kvh * c.hv..(kvh + 1) * c.hv];
            for d in 0..c.hv {
                out[h * c.hv + d] += e[j] / z * v[d];
            }
        }
    }
    out
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in [KvDtype::F16, KvDtype::F32] {
        // Gemma-like: 4 query heads on one KV head of 256, sliding window.
        v.push(Case {
            n_head: 4,
            n_kv: 1,
            hk: 256,
            hv: 256,
            window: Some(40),
            capacity: 40 + 16,
            dtype,
        });
        // Global layer, GQA 3 (SmolLM2-like), head 64.
        v.push(Case {
            n_head: 9,
            n_kv: 3,
            hk: 64,
            hv: 64,
            window: None,
            capacity: 200,
            dtype,
        });
        // Head sizes the AVX-512 kernels do not take (portable path), different K and V.
        v.push(Case {
            n_head: 2,
            n_kv: 2,
            hk: 24,
            hv: 40,
            window: None,
            capacity: 200,
            dtype,
        });
    }
    v
}

#[test]
fn attention_matches_f64_reference_and_is_batch_invariant() {
    let mut rng = Rng(0x1234_5678);
    let scale = 0.125;
    for c in cases() {
        let n_seq = 3;
        let len = 150;
        let mut kv = KvStorage::new(&c.spec(n_seq)).unwrap();
        let (keys, values) = fill(&c, &mut kv, n_seq, len, &mut rng);
        // A mixed batch: a run of consecutive positions of sequence 0 (a prefill chunk),
        // single rows of the others, and a second run of sequence 2.
        let lo_ok = c.window.map_or(0, |w| len - (c.capacity - w).min(len));
        let mut rows: Vec<(u32, u32)> = Vec::new();
        for p in (len - 20).max(lo_ok)..len {
            rows.push((p as u32, 0));
        }
        rows.push(((len - 1) as u32, 1));
        if c.window.is_none() {
            // An early position (on a sliding layer it has been overwritten by now).
            rows.push((5, 1));
        }
        for p in len - 9..len {
            rows.push((p as u32, 2));
        }
        let pos: Vec<u32> = rows.iter().map(|r| r.0).collect();
        let seqs: Vec<u32> = rows.iter().map(|r| r.1).collect();
        let q = rng.vec(rows.len() * c.n_head * c.hk, 1.5);
        let w = c.n_head * c.hv;
        let mut full = vec![f32::NAN; rows.len() * w];
        let pool2 = ThreadPool::new(2);
        kv.attend(&pool2, 0, &q, c.n_head, scale, &pos, &seqs, &mut full)
            .unwrap();
        let tol = if c.dtype == KvDtype::F16 { 4e-3 } else { 1e-4 };
        for (r, &(p, s)) in rows.iter().enumerate() {
            let qr = &q[r * c.n_head * c.hk..(r + 1) * c.n_head * c.hk];
            let want = reference(
                &c,
                qr,
                p as usize,
                &keys[s as usize],
                &values[s as usize],
                scale,
            );
            for (d, (&g, &e)) in full[r * w..(r + 1) * w].iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - e).abs() <= tol,
                    "{:?} row {r} (seq {s} pos {p}) elem {d}: {g} vs {e}",
                    c.dtype
                );
            }
            // The same row alone, on 1 and 3 threads (alone it may take the split path):
            // the same bits.
            for threads in [1, 3] {
                let pool = ThreadPool::new(threads);
                let mut alone = vec![f32::NAN; w];
                kv.attend(&pool, 0, qr, c.n_head, scale, &[p], &[s], &mut alone)
                    .unwrap();
                for (d, (a, b)) in alone.iter().zip(&full[r * w..(r + 1) * w]).enumerate() {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "row {r} elem {d} alone on {threads} threads"
                    );
                }
            }
        }
        // The whole batch on 1 and 3 threads: the same bits again.
        for threads in [1, 3] {
            let pool = ThreadPool::new(threads);
            let mut again = vec![f32::NAN; rows.len() * w];
            kv.attend(&pool, 0, &q, c.n_head, scale, &pos, &seqs, &mut again)
                .unwrap();
            assert!(
                again
                    .iter()
                    .zip(&full)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{threads} threads"
            );
        }
    }
}

#[test]
fn attention_rejects_bad_rows() {
    let c = &cases()[0];
    let kv = KvStorage::new(&c.spec(2)).unwrap();
    let pool = ThreadPool::new(1);
    let q = vec![0f32; c.n_head * c.hk];
    let mut out = vec![0f32; c.n_head * c.hv];
    assert!(kv
        .attend(&pool, 0, &q, c.n_head, 1.0, &[0], &[2], &mut out)
        .is_err());
    assert!(kv
        .attend(&pool, 1, &q, c.n_head, 1.0, &[0], &[0], &mut out)
        .is_err());
    assert!(kv
        .attend(&pool, 0, &q, 3, 1.0, &[0], &[0], &mut out)
        .is_err());
}

#[test]
fn block_kernels_equal_portable_ones() {
    let mut rng = Rng(99);
    for &(hk, nd) in &[(16usize, 16usize), (64, 48), (256, 256), (32, 80)] {
        let fast = use_avx512(hk, nd);
        for &(nq, nk) in &[(1usize, 1usize), (3, 5), (4, 4), (9, 70), (16, 64)] {
            let q = rng.vec(nq * hk, 1.0);
            let k = rng.vec(nk * hk, 1.0);
            let stride = nk + 3;
            let (mut a, mut b) = (vec![0f32; nq * stride], vec![0f32; nq * stride]);
            scores(&q, nq, &k, nk, hk, 0.3, &mut a, stride, fast);
            scores(&q, nq, &k, nk, hk, 0.3, &mut b, stride, false);
            assert!(
                a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                "scores hk {hk} {nq}x{nk}"
            );
            let w = rng.vec(nq * stride, 1.0);
            let v = rng.vec(nk * nd, 2.0);
            let lo: Vec<usize> = (0..nq).map(|i| (i * 3) % nk.max(1) / 2).collect();
            let hi: Vec<usize> = (0..nq).map(|i| nk - (i % 3).min(nk - lo[i])).collect();
            let init = rng.vec(nq * nd, 0.5);
            let (mut a, mut b) = (init.clone(), init.clone());
            weighted_sum(&w, stride, nq, &lo, &hi, &v, nd, nk, nd, &mut a, nd, fast);
            weighted_sum(&w, stride, nq, &lo, &hi, &v, nd, nk, nd, &mut b, nd, false);
            assert!(
                a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                "weighted sums nd {nd} {nq}x{nk}"
            );
            // And the sums are what they should be.
            for qi in 0..nq {
                for d in 0..nd {
                    let want: f64 = init[qi * nd + d] as f64
                        + (lo[qi]..hi[qi])
                            .map(|j| w[qi * stride + j] as f64 * v[j * nd + d] as f64)
                            .sum::<f64>();
                    assert!((a[qi * nd + d] as f64 - want).abs() < 1e-3);
                }
            }
        }
    }
}

#[test]
fn bidirectional_rows_see_up_to_their_end() {
    let mut rng = Rng(0x0bad_cafe);
    let scale = 0.125;
    for c in cases().into_iter().filter(|c| c.window.is_none()) {
        let len = 120;
        let mut kv = KvStorage::new(&c.spec(1)).unwrap();
        let (keys, values) = fill(&c, &mut kv, 1, len, &mut rng);
        // Rows len-30..len-10 attend to each other (all see up to len-11); the rest causal.
        let pos: Vec<u32> = (len as u32 - 40..len as u32).collect();
        let ends: Vec<u32> = pos
            .iter()
            .map(|&p| {
                if (len - 30..len - 10).contains(&(p as usize)) {
                    len as u32 - 11
                } else {
                    p
                }
            })
            .collect();
        let seqs = vec![0; pos.len()];
        let q = rng.vec(pos.len() * c.n_head * c.hk, 1.5);
        let w = c.n_head * c.hv;
        let mut out = vec![f32::NAN; pos.len() * w];
        let pool = ThreadPool::new(2);
        kv.attend_until(&pool, 0, &q, c.n_head, scale, &pos, &ends, &seqs, &mut out)
            .unwrap();
        let tol = if c.dtype == KvDtype::F16 { 4e-3 } else { 1e-4 };
        for (r, &e) in ends.iter().enumerate() {
            let qr = &q[r * c.n_head * c.hk..(r + 1) * c.n_head * c.hk];
            // Without a window, seeing up to `e` is the causal result at position `e`.
            let want = reference(&c, qr, e as usize, &keys[0], &values[0], scale);
            for (d, (&g, &x)) in out[r * w..(r + 1) * w].iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - x).abs() <= tol,
                    "row {r} (end {e}) elem {d}: {g} vs {x}"
                );
            }
        }
        // An end before the row's own position is refused.
        let mut bad = ends.clone();
        bad[0] = pos[0] - 1;
        assert!(kv
            .attend_until(&pool, 0, &q, c.n_head, scale, &pos, &bad, &seqs, &mut out)
            .is_err());
    }
}
