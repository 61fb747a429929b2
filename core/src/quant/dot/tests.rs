//! vec_dot against the f64 dot of dequantized rows, SIMD against scalar, and the activation
//! quantizers (SIMD and portable) against llama.cpp's rounding, on random rows of every
//! supported type.

use super::*;
use crate::quant::{dequantize_to_vec, quantize, quantize_to_vec};

/// A small xorshift generator (also used by the wasm simd128 tests).
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    pub(super) fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

/// Byte offsets of f16 scale fields, per type (random bits elsewhere are all valid).
pub(super) fn f16_fields(ty: GgmlType) -> &'static [usize] {
    use GgmlType::*;
    match ty {
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL | IQ4_XS => &[0],
        Q4_1 | Q5_1 | Q4_K | Q5_K => &[0, 2],
        Q2_K => &[80, 82],
        Q3_K => &[108],
        Q6_K => &[208],
        _ => &[],
    }
}

/// A random weight row: random block bits with sane f16 scales; float types from values.
fn random_row(ty: GgmlType, n: usize, rng: &mut Rng) -> Vec<u8> {
    if matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
        let x: Vec<f32> = (0..n).map(|_| rng.uniform()).collect();
        return quantize_to_vec(ty, &x).unwrap();
    }
    let size = ty.type_size();
    let mut row: Vec<u8> = (0..n / ty.block_size() * size)
        .map(|_| rng.next_u64() as u8)
        .collect();
    for block in row.chunks_mut(size) {
        for &off in f16_fields(ty) {
            let v = rng.uniform() * 0.01;
            block[off..off + 2].copy_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes());
        }
    }
    row
}

pub(super) fn activation(n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n)
        .map(|i| rng.uniform() * if i % 97 == 0 { 30.0 } else { 1.0 })
        .collect()
}

/// The activation row in the vec-dot type of `w`, and its dequantized values.
fn act_for(w: GgmlType, x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let at = vec_dot_type(w);
    let bytes = quantize_to_vec(at, x).unwrap();
    let back = dequantize_to_vec(at, &bytes, x.len()).unwrap();
    (bytes, back)
}

/// (exact f64 dot, sum of |w_i * a_i|) of two dequantized rows.
fn reference(w: &[f32], a: &[f32]) -> (f64, f64) {
    w.iter().zip(a).fold((0.0, 0.0), |(s, m), (p, q)| {
        let v = *p as f64 * *q as f64;
        (s + v, m + v.abs())
    })
}

/// Q8_1 stores s = d * sum(q) as f16, and Q4_1 / Q5_1 dots use it for their min term
/// (as GGML does), so those dots may differ from the dequantized dot by |m| * half an f16
/// ulp of s per block.
fn q8_1_sum_rounding(w: GgmlType, row: &[u8], act: &[u8]) -> f64 {
    if vec_dot_type(w) != GgmlType::Q8_1 {
        return 0.0;
    }
    let f16 = |b: &[u8], i: usize| half::f16::from_le_bytes([b[i], b[i + 1]]).to_f32() as f64;
    row.chunks(w.type_size())
        .zip(act.chunks(36))
        .map(|(bw, ba)| f16(bw, 2).abs() * (f16(ba, 2).abs() / 2048.0 + 3e-8))
        .sum()
}

const TYPES: [GgmlType; 15] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::IQ4_NL,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_XS,
];

#[test]
fn vec_dot_matches_dequantized_dot() {
    let mut rng = Rng(0x5eed);
    for ty in TYPES {
        assert!(supports_vec_dot(ty));
        let sizes: &[usize] = if ty.block_size() == 256 {
            &[256, 512, 256 * 11, 4864]
        } else if ty.block_size() == 32 {
            &[32, 96, 800, 4096 + 32]
        } else {
            &[1, 7, 33, 100, 1000]
        };
        for &n in sizes {
            let w = random_row(ty, n, &mut rng);
            let wf = dequantize_to_vec(ty, &w, n).unwrap();
            let (a, af) = act_for(ty, &activation(n, &mut rng));
            let (exact, mag) = reference(&wf, &af);
            // Integer sums are exact; only a few f32 roundings per block remain.
            let tol = 1e-5 * mag + q8_1_sum_rounding(ty, &w, &a) + 1e-30;
            let fast = vec_dot(ty, &w, &a, n) as f64;
            let slow = vec_dot_scalar(ty, &w, &a, n) as f64;
            assert!(
                (fast - exact).abs() <= tol,
                "{ty} n={n}: {fast} vs {exact} (tol {tol})"
            );
            assert!(
                (slow - exact).abs() <= tol,
                "{ty} n={n}: scalar {slow} vs {exact}"
            );
            if has_simd_kernel(ty) && ty.block_size() == 256 {
                // K-quant SIMD kernels reduce each block exactly, like the scalar ones.
                assert_eq!(fast.to_bits(), slow.to_bits(), "{ty} n={n}");
            } else {
                assert!((fast - slow).abs() <= 1e-5 * mag.max(1e-30), "{ty} n={n}");
            }
        }
    }
}

/// llama.cpp's CPU activation quantizers, element by element: inverse scale 127/amax, round
/// half to even (its AVX2 Q8_0/Q8_1 code and its Q8_K reference); Q8_K keeps 1/(127/amax)
/// as the scale, Q8_0/Q8_1 amax/127 in f16. The model the SIMD quantizers must equal.
fn llama_cpp_activation(ty: GgmlType, x: &[f32]) -> Vec<u8> {
    let bs = ty.block_size();
    let mut out = Vec::new();
    for b in x.chunks_exact(bs) {
        let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        let id = if amax == 0.0 { 0.0 } else { 127.0 / amax };
        let q: Vec<i8> = b
            .iter()
            .map(|v| (v * id).round_ties_even().clamp(-127.0, 127.0) as i8)
            .collect();
        let f16 = |v: f32| half::f16::from_f32(v).to_le_bytes();
        match ty {
            GgmlType::Q8_0 => out.extend(f16(amax / 127.0)),
            GgmlType::Q8_1 => {
                let d = amax / 127.0;
                let sum: i32 = q.iter().map(|&v| v as i32).sum();
                out.extend(f16(d));
                out.extend(f16(d * sum as f32));
            }
            _ => {
                let d = if amax == 0.0 { 0.0 } else { 1.0 / id };
                out.extend(d.to_le_bytes());
            }
        }
        out.extend(q.iter().map(|&v| v as u8));
        if ty == GgmlType::Q8_K {
            for g in q.chunks(16) {
                out.extend((g.iter().map(|&v| v as i16).sum::<i16>()).to_le_bytes());
            }
        }
    }
    out
}

#[test]
fn activation_quantizers_round_as_llama_cpp() {
    let mut rng = Rng(42);
    for ty in [GgmlType::Q8_0, GgmlType::Q8_K, GgmlType::Q8_1] {
        for n in [256usize, 512, 4096] {
            let mut x = activation(n, &mut rng);
            // Exact ties: with amax 127 the scale is 1, so k + 0.5 sits on a rounding tie
            // (half to even here, half away from zero in GGML's reference quantizer).
            x[0] = 127.0;
            for (i, v) in x.iter_mut().enumerate().take(256).skip(1) {
                *v = (i as f32 - 128.0) / 2.0;
            }
            x[300 % n] = 0.0;
            let size = n / ty.block_size() * ty.type_size();
            let (mut fast, mut portable, mut slow) =
                (vec![0u8; size], vec![0u8; size], vec![0u8; size]);
            quantize_activation_to(ty, &x, &mut fast).unwrap();
            quantize_activation_portable(ty, &x, &mut portable);
            quantize(ty, &x, &mut slow).unwrap();
            let want = llama_cpp_activation(ty, &x);
            assert_eq!(fast, want, "{ty} n={n}");
            assert_eq!(portable, want, "{ty} n={n}: portable");
            assert_ne!(fast, slow, "{ty} n={n}: the ties should round differently");
            // Either way both encode the same values to within one quantization step.
            let (a, b) = (
                dequantize_to_vec(ty, &fast, n).unwrap(),
                dequantize_to_vec(ty, &slow, n).unwrap(),
            );
            for (blk, (fa, fb)) in a
                .chunks(ty.block_size())
                .zip(b.chunks(ty.block_size()))
                .enumerate()
            {
                let amax = x[blk * ty.block_size()..][..ty.block_size()]
                    .iter()
                    .fold(0f32, |m, v| m.max(v.abs()));
                for (u, v) in fa.iter().zip(fb) {
                    assert!(
                        (u - v).abs() <= amax / 127.0 * 1.01,
                        "{ty} n={n}: {u} vs {v}"
                    );
                }
            }
        }
    }
    // All-zero rows quantize to zero scales and quants.
    let z = quantize_to_vec(GgmlType::Q8_K, &[0.0; 256]).unwrap();
    assert!(z.iter().all(|b| *b == 0));
}

#[test]
#[should_panic(expected = "vec_dot")]
fn wrong_lengths_are_reported() {
    vec_dot(GgmlType::Q8_0, &[0u8; 34], &[0u8; 33], 32);
}

#[test]
fn vec_dot_rows_equals_row_by_row() {
    let mut rng = Rng(77);
    for ty in TYPES {
        let n = 512;
        let rows = 5;
        let w: Vec<u8> = (0..rows)
            .flat_map(|_| random_row(ty, n, &mut rng))
            .collect();
        let (a, _) = act_for(ty, &activation(n, &mut rng));
        let mut out = vec![0f32; rows];
        vec_dot_rows(ty, &w, &a, n, &mut out);
        let row_bytes = w.len() / rows;
        for (r, o) in out.iter().enumerate() {
            let one = vec_dot(ty, &w[r * row_bytes..(r + 1) * row_bytes], &a, n);
            assert_eq!(o.to_bits(), one.to_bits(), "{ty} row {r}");
        }
    }
}

#[test]
fn vec_dot_multi_equals_single_columns() {
    let mut rng = Rng(1234);
    for ty in TYPES {
        for cols in [1usize, 3, 4, 9] {
            let n = 768;
            let w = random_row(ty, n, &mut rng);
            let wf = dequantize_to_vec(ty, &w, n).unwrap();
            let mut acts = Vec::new();
            let mut mags = Vec::new();
            for _ in 0..cols {
                let (a, af) = act_for(ty, &activation(n, &mut rng));
                mags.push(reference(&wf, &af).1);
                acts.extend_from_slice(&a);
            }
            let mut out = vec![0f32; cols];
            vec_dot_multi(ty, &w, &acts, n, &mut out);
            let ab = acts.len() / cols;
            for c in 0..cols {
                let one = vec_dot(ty, &w, &acts[c * ab..(c + 1) * ab], n);
                // Same bits: a token's logits must not depend on how many other tokens
                // (other sequences of a batch) share its product.
                let _ = &mags;
                assert_eq!(out[c].to_bits(), one.to_bits(), "{ty} cols {cols} col {c}");
            }
        }
    }
}

#[test]
fn quantize_activation_uses_the_vec_dot_type() {
    let x: Vec<f32> = (0..512).map(|i| (i as f32 * 0.1).sin()).collect();
    let mut buf = Vec::new();
    for ty in TYPES {
        quantize_activation(ty, &x, &mut buf).unwrap();
        let at = vec_dot_type(ty);
        let mut want = vec![0u8; buf.len()];
        quantize_activation_to(at, &x, &mut want).unwrap();
        assert_eq!(buf, want, "{ty}");
        assert_eq!(buf.len(), at.bytes_for(512).unwrap() as usize, "{ty}");
    }
    assert!(quantize_activation(GgmlType::Q4_K, &x[..100], &mut buf).is_err());
}

#[test]
fn vec_dot_tile_equals_multi_and_rows() {
    let mut rng = Rng(777);
    // 544 elements: an odd number of 32-element blocks (the kernels pair blocks).
    for (ty, n) in TYPES
        .into_iter()
        .flat_map(|ty| [(ty, 512), (ty, 544)])
        .filter(|&(ty, n)| n % ty.block_size() == 0)
    {
        for (n_rows, n_tok) in [
            (1usize, 1usize),
            (3, 1),
            (9, 1),
            (2, 5),
            (5, 8),
            (4, 3),
            (3, 16),
            (2, 19),
        ] {
            let w: Vec<u8> = (0..n_rows)
                .flat_map(|_| random_row(ty, n, &mut rng))
                .collect();
            let acts: Vec<u8> = (0..n_tok)
                .flat_map(|_| act_for(ty, &activation(n, &mut rng)).0)
                .collect();
            let mut tile = vec![f32::NAN; n_rows * n_tok];
            vec_dot_tile(ty, &w, &acts, n, n_tok, &mut tile);
            let rb = w.len() / n_rows;
            for r in 0..n_rows {
                // The tile must agree bit for bit with the per-row multi-token entry point.
                let mut want = vec![0f32; n_tok];
                vec_dot_multi(ty, &w[r * rb..(r + 1) * rb], &acts, n, &mut want);
                for t in 0..n_tok {
                    let (got, want) = (tile[r * n_tok + t], want[t]);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{ty} {n_rows}x{n_tok} ({r}, {t}): {got} vs {want}"
                    );
                }
            }
        }
    }
}

/// The GEMM tiles against [`vec_dot`], bit for bit, for every type they serve: odd block
/// counts (the lane kernels pair blocks; the K kernels take super-blocks two at a time), row
/// and token counts that are not multiples of the micro-tiles, and buffers reused across
/// types and sizes.
#[test]
fn gemm_tile_equals_vec_dot() {
    use GgmlType::*;
    let mut rng = Rng(4242);
    let mut acts_layout = GemmActs::new();
    let mut scratch = GemmScratch::new();
    #[cfg(target_arch = "x86_64")]
    let expected = gemm::has_avx512_vnni() && kernel_level() >= 2;
    #[cfg(not(target_arch = "x86_64"))]
    let expected = false;
    let mut ran = 0;
    for ty in [Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL, Q4_K, Q6_K] {
        assert_eq!(has_gemm_kernel(ty), expected, "{ty}");
        let sizes: &[usize] = if ty.block_size() == 256 {
            &[256, 768, 1280]
        } else {
            &[32, 224, 640]
        };
        for &n in sizes {
            for (n_rows, n_tok) in [(1usize, 4usize), (5, 17), (9, 8), (16, 33), (3, 5), (7, 16)] {
                let w: Vec<u8> = (0..n_rows)
                    .flat_map(|_| random_row(ty, n, &mut rng))
                    .collect();
                let acts: Vec<u8> = (0..n_tok)
                    .flat_map(|_| act_for(ty, &activation(n, &mut rng)).0)
                    .collect();
                if !acts_layout.prepare_any(ty, &acts, n, n_tok) {
                    assert!(!expected, "{ty} n={n}: no GEMM for {n_tok} tokens");
                    continue;
                }
                ran += 1;
                let mut out = vec![f32::NAN; n_rows * n_tok];
                gemm_tile(&acts_layout, &w, &mut scratch, &mut out);
                let (rb, ab) = (w.len() / n_rows, acts.len() / n_tok);
                for r in 0..n_rows {
                    for t in 0..n_tok {
                        let one = vec_dot(ty, &w[r * rb..][..rb], &acts[t * ab..][..ab], n);
                        let got = out[r * n_tok + t];
                        assert_eq!(
                            got.to_bits(),
                            one.to_bits(),
                            "{ty} n={n} {n_rows}x{n_tok} ({r}, {t}): {got} vs {one}"
                        );
                    }
                }
            }
        }
    }
    assert!(!expected || ran > 0);
}

/// Large activations and weights at the ends of their ranges (Q8_0 weights of -128, Q6_K
/// scales of -128, activation blocks with a +-127 quant everywhere) stay exact in the GEMM's
/// offset arithmetic.
#[test]
fn gemm_tile_extremes_equal_vec_dot() {
    use GgmlType::*;
    let mut rng = Rng(99);
    let mut acts_layout = GemmActs::new();
    let mut scratch = GemmScratch::new();
    for ty in [Q8_0, Q5_0, Q4_1, Q4_K, Q6_K] {
        let n = 512;
        let (n_rows, n_tok) = (6, 20);
        let mut w: Vec<u8> = (0..n_rows)
            .flat_map(|_| random_row(ty, n, &mut rng))
            .collect();
        match ty {
            // All quants -128 (scales kept).
            Q8_0 => w.chunks_mut(34).for_each(|b| b[2..].fill(0x80)),
            // All scales -128, all 6-bit quants 0 (q - 32 = -32).
            Q6_K => w.chunks_mut(210).for_each(|b| {
                b[..192].fill(0);
                b[192..208].fill(0x80)
            }),
            _ => {}
        }
        // Every activation at +-amax: quants +-127.
        let acts: Vec<u8> = (0..n_tok)
            .flat_map(|t| {
                let x: Vec<f32> = (0..n)
                    .map(|i| if (i + t) % 3 == 0 { -3.0 } else { 3.0 })
                    .collect();
                act_for(ty, &x).0
            })
            .collect();
        if !acts_layout.prepare_any(ty, &acts, n, n_tok) {
            continue;
        }
        let mut out = vec![f32::NAN; n_rows * n_tok];
        gemm_tile(&acts_layout, &w, &mut scratch, &mut out);
        let (rb, ab) = (w.len() / n_rows, acts.len() / n_tok);
        for r in 0..n_rows {
            for t in 0..n_tok {
                let one = vec_dot(ty, &w[r * rb..][..rb], &acts[t * ab..][..ab], n);
                assert_eq!(
                    out[r * n_tok + t].to_bits(),
                    one.to_bits(),
                    "{ty} ({r}, {t})"
                );
            }
        }
    }
}

#[test]
fn row_kernels_equal_the_one_row_kernel() {
    // Token generation dots many rows with one activation row (`vec_dot_tile` with one
    // token, or the leftover tokens of a prompt tile): every row must get `vec_dot`'s bits,
    // for even and odd block counts and any row count.
    let mut rng = Rng(4242);
    for ty in TYPES {
        for n in [32usize, 96, 640, 672] {
            if !n.is_multiple_of(ty.block_size()) {
                continue;
            }
            for (n_rows, n_tok) in [
                (1usize, 1usize),
                (5, 1),
                (37, 1),
                (6, 3),
                (7, 15),
                (3, 2),
                (2, 8),
            ] {
                let w: Vec<u8> = (0..n_rows)
                    .flat_map(|_| random_row(ty, n, &mut rng))
                    .collect();
                let acts: Vec<Vec<u8>> = (0..n_tok)
                    .map(|_| act_for(ty, &activation(n, &mut rng)).0)
                    .collect();
                let all: Vec<u8> = acts.concat();
                let mut tile = vec![f32::NAN; n_rows * n_tok];
                vec_dot_tile(ty, &w, &all, n, n_tok, &mut tile);
                let rb = w.len() / n_rows;
                for r in 0..n_rows {
                    for (t, a) in acts.iter().enumerate() {
                        let one = vec_dot(ty, &w[r * rb..(r + 1) * rb], a, n);
                        let got = tile[r * n_tok + t];
                        assert_eq!(
                            got.to_bits(),
                            one.to_bits(),
                            "{ty} n={n} {n_rows}x{n_tok} row {r} token {t}: {got} vs {one}"
                        );
                    }
                }
            }
        }
    }
}
