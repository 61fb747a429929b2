//! The wasm simd128 kernels against the portable ones, bit for bit, on random rows. These run
//! only in a wasm32 `+simd128` build, under node (scripts/test-wasm.sh): native builds have
//! no simd128 code to test.

use wasm_bindgen_test::wasm_bindgen_test;

use super::tests::{activation, f16_fields, Rng};
use super::*;

/// Little-endian bytes of a random finite f16 in (-scale, scale).
fn f16_bytes(rng: &mut Rng, scale: f32) -> [u8; 2] {
    half::f16::from_f32(rng.uniform() * scale).to_le_bytes()
}

/// The weight types with simd128 kernels.
const TYPES: [GgmlType; 9] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::IQ4_NL,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

/// `nb` blocks of random bytes of type `ty` with finite f16 (and Q8_K f32) scales.
fn random_blocks(ty: GgmlType, nb: usize, rng: &mut Rng) -> Vec<u8> {
    let size = ty.type_size();
    let mut row: Vec<u8> = (0..nb * size).map(|_| rng.next_u64() as u8).collect();
    for block in row.chunks_mut(size) {
        match ty {
            GgmlType::Q8_0 => block[0..2].copy_from_slice(&f16_bytes(rng, 0.05)),
            GgmlType::Q8_1 => {
                block[0..2].copy_from_slice(&f16_bytes(rng, 0.05));
                block[2..4].copy_from_slice(&f16_bytes(rng, 3.0));
            }
            GgmlType::Q8_K => block[0..4].copy_from_slice(&(rng.uniform() * 0.05).to_le_bytes()),
            _ => {
                for &off in f16_fields(ty) {
                    block[off..off + 2].copy_from_slice(&f16_bytes(rng, 0.01));
                }
            }
        }
    }
    row
}

/// Sets every quant of activation blocks of type `at` to 64..=127, so block sums are large
/// (beyond 2^13): then d_w * d_a * s rounds, and a kernel that changed the order of that
/// product would be caught (with mixed signs, sums are mostly small and exact either way).
fn positive_quants(at: GgmlType, a: &mut [u8]) {
    let (start, end) = match at {
        GgmlType::Q8_0 => (2, 34),
        GgmlType::Q8_1 => (4, 36),
        _ => (4, 260),
    };
    for block in a.chunks_mut(at.type_size()) {
        for q in &mut block[start..end] {
            *q = (*q | 0x40) & 0x7F;
        }
    }
}

#[wasm_bindgen_test]
fn simd128_kernels_are_used() {
    for ty in TYPES {
        assert!(has_simd_kernel(ty), "{ty}");
    }
    // Token generation's 4-row kernels (reached through `vec_dot_tile`).
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
    ] {
        assert!(wasm_util::rows_kernel(ty).is_some(), "{ty}");
    }
}

#[wasm_bindgen_test]
fn simd128_dots_equal_portable_bits() {
    let mut rng = Rng(0x05ee_d0a5);
    for ty in TYPES {
        let at = vec_dot_type(ty);
        for nb in [1usize, 2, 3, 5, 8, 17, 36] {
            let n = nb * ty.block_size();
            for trial in 0..4 {
                let w = random_blocks(ty, nb, &mut rng);
                // Quantized real-looking activations, and raw random activation bytes (quants
                // of -128 included, which the quantizer never makes: the kernels must still be
                // exact for them).
                let a = if trial % 2 == 0 {
                    let mut a = vec![0u8; at.bytes_for(n as u64).unwrap() as usize];
                    quantize_activation_to(at, &activation(n, &mut rng), &mut a).unwrap();
                    a
                } else {
                    let mut a = random_blocks(at, nb * ty.block_size() / at.block_size(), &mut rng);
                    if trial == 3 {
                        positive_quants(at, &mut a);
                    }
                    a
                };
                let fast = vec_dot(ty, &w, &a, n);
                let slow = vec_dot_scalar(ty, &w, &a, n);
                assert!(fast.is_finite(), "{ty} nb={nb}: {fast}");
                assert_eq!(
                    fast.to_bits(),
                    slow.to_bits(),
                    "{ty} nb={nb} trial {trial}: {fast} vs {slow}"
                );
            }
        }
    }
}

#[wasm_bindgen_test]
fn simd128_rows_and_tiles_equal_portable_bits() {
    let mut rng = Rng(99);
    for ty in TYPES {
        let at = vec_dot_type(ty);
        // Odd block counts for the 32-element types (7 * 32 = 224 is not a K-quant row);
        // 4, 5 and 9 rows: whole groups for the 4-row kernels plus leftover single rows.
        for (n, rows, toks) in [
            (256usize, 4usize, 1usize),
            (768, 5, 3),
            (1280, 9, 1),
            (224, 6, 2),
        ] {
            if n % ty.block_size() != 0 {
                continue;
            }
            let w = random_blocks(ty, rows * n / ty.block_size(), &mut rng);
            let ab = at.bytes_for(n as u64).unwrap() as usize;
            let mut acts = vec![0u8; ab * toks];
            for (t, a) in acts.chunks_mut(ab).enumerate() {
                quantize_activation_to(at, &activation(n, &mut rng), a).unwrap();
                if t == 1 {
                    positive_quants(at, a);
                }
            }
            let mut tile = vec![0f32; rows * toks];
            vec_dot_tile(ty, &w, &acts, n, toks, &mut tile);
            let rb = w.len() / rows;
            for r in 0..rows {
                for t in 0..toks {
                    let want = vec_dot_scalar(ty, &w[r * rb..][..rb], &acts[t * ab..][..ab], n);
                    let got = tile[r * toks + t];
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{ty} n={n} ({r}, {t}): {got} vs {want}"
                    );
                }
            }
        }
    }
}

#[wasm_bindgen_test]
fn simd128_activation_quantizers_equal_portable_bytes() {
    let mut rng = Rng(7);
    for at in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        for n in [256usize, 512, 1536] {
            let mut x = activation(n, &mut rng);
            // Exact rounding ties (amax 127 gives scale 1), an all-zero block, a NaN and
            // infinities: the simd128 code must treat every one as the portable code does.
            x[0] = 127.0;
            for (i, v) in x.iter_mut().enumerate().take(256).skip(1) {
                *v = (i as f32 - 128.0) / 2.0;
            }
            if n >= 512 {
                x[256..512].fill(0.0);
                x[300] = -0.0;
            }
            if n >= 1536 {
                x[600] = f32::NAN;
                x[700] = f32::INFINITY;
                x[1000] = f32::NEG_INFINITY;
                x[1100] = 1e-40;
            }
            let size = n / at.block_size() * at.type_size();
            let (mut fast, mut portable) = (vec![0u8; size], vec![0u8; size]);
            quantize_activation_to(at, &x, &mut fast).unwrap();
            quantize_activation_portable(at, &x, &mut portable);
            assert_eq!(fast, portable, "{at} n={n}");
        }
    }
}
