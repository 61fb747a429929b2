//! wasm simd128 kernels for 4 weight rows against one activation row (token generation's
//! matrix-vector products), for the 32-element formats. The activation block is loaded and its
//! scales widened once for all 4 rows, and each block's float arithmetic runs with one row per
//! f32 lane: lane r does exactly the portable kernel's operations for row r, in the same order
//! (an f32x4 multiply or add rounds each lane as the scalar one does), so every result is
//! bit-identical to `scalar.rs`.

use core::arch::wasm32::*;

use super::super::float::f16_at;
use super::wasm_util::*;

/// Rows per call.
pub(super) const ROWS: usize = 4;

/// A 4-row kernel: (rows, activation row, number of blocks) -> one dot per row.
pub(super) type RowsFn = unsafe fn([&[u8]; ROWS], &[u8], usize) -> [f32; ROWS];

/// `[Σ lanes of s[0], ..., Σ lanes of s[3]]` (exact i32 sums).
#[inline(always)]
fn hsum4(s: [v128; 4]) -> v128 {
    let pair = |a: v128, b: v128| {
        i32x4_add(
            i32x4_shuffle::<0, 4, 1, 5>(a, b),
            i32x4_shuffle::<2, 6, 3, 7>(a, b),
        )
    };
    let (t0, t1) = (pair(s[0], s[1]), pair(s[2], s[3]));
    i32x4_add(
        i32x4_shuffle::<0, 1, 4, 5>(t0, t1),
        i32x4_shuffle::<2, 3, 6, 7>(t0, t1),
    )
}

/// The f16 at byte `at` of each row's block `i` (blocks of `size` bytes), widened exactly to
/// f32 as `float::f16_bits_to_f32` does: the 15 low bits placed 13 up and scaled by 2^112
/// (exact for normal and subnormal values), infinities and NaNs rebuilt with their payload.
#[inline(always)]
unsafe fn f16x4(rows: &[&[u8]; ROWS], i: usize, size: usize, at: usize) -> v128 {
    let h = |r: usize| {
        let p = rows[r].as_ptr().add(i * size + at);
        u16::from_le_bytes([*p, *p.add(1)]) as u32
    };
    let h = u32x4(h(0), h(1), h(2), h(3));
    let sign = i32x4_shl(v128_and(h, u32x4_splat(0x8000)), 16);
    let rest = v128_and(h, u32x4_splat(0x7fff));
    let finite = f32x4_mul(
        i32x4_shl(rest, 13),
        f32x4_splat(f32::from_bits(0x7780_0000)),
    );
    let special = v128_or(
        u32x4_splat(0x7f80_0000),
        i32x4_shl(v128_and(rest, u32x4_splat(0x3ff)), 13),
    );
    let is_special = u32x4_ge(rest, u32x4_splat(0x7c00));
    v128_or(v128_bitselect(special, finite, is_special), sign)
}

/// Shared loop for weights dotted with Q8_0 activations: `block_dot(bw, qa)` gives the exact
/// integer dot of weight block `bw` with the 32 activation quants at `qa`, in 4 i32 lanes.
#[inline(always)]
unsafe fn with_q8_0(
    rows: [&[u8]; ROWS],
    a: &[u8],
    nb: usize,
    size: usize,
    block_dot: impl Fn(*const u8, v128, v128) -> v128,
) -> [f32; ROWS] {
    let mut sum = f32x4_splat(0.0);
    for i in 0..nb {
        let ba = &a[i * 34..(i + 1) * 34];
        let (y0, y1) = (load(ba.as_ptr().add(2)), load(ba.as_ptr().add(18)));
        let s = hsum4(std::array::from_fn(|r| {
            block_dot(rows[r].as_ptr().add(i * size), y0, y1)
        }));
        // Portable: sum += d_w * d_a * s, left to right.
        let d = f32x4_mul(f16x4(&rows, i, size, 0), f32x4_splat(f16_at(ba, 0)));
        sum = f32x4_add(sum, f32x4_mul(d, f32x4_convert_i32x4(s)));
    }
    to_array(sum)
}

fn to_array(v: v128) -> [f32; ROWS] {
    [
        f32x4_extract_lane::<0>(v),
        f32x4_extract_lane::<1>(v),
        f32x4_extract_lane::<2>(v),
        f32x4_extract_lane::<3>(v),
    ]
}

/// # Safety
/// simd128 only; every row and `a` hold `nb` blocks (checked by the caller).
pub(super) unsafe fn rows_q4_0_q8_0(rows: [&[u8]; ROWS], a: &[u8], nb: usize) -> [f32; ROWS] {
    let eight = i8x16_splat(8);
    with_q8_0(rows, a, nb, 18, |bw, y0, y1| {
        let (lo, hi) = nibbles(bw.add(2));
        let p = dot_small_i16(i8x16_sub(lo, eight), y0, i8x16_sub(hi, eight), y1);
        i32x4_extadd_pairwise_i16x8(p)
    })
}

/// # Safety
/// As [`rows_q4_0_q8_0`].
pub(super) unsafe fn rows_q5_0_q8_0(rows: [&[u8]; ROWS], a: &[u8], nb: usize) -> [f32; ROWS] {
    let top = u8x16_splat(0xF0);
    with_q8_0(rows, a, nb, 22, |bw, y0, y1| {
        let word = u32::from_le_bytes([*bw.add(2), *bw.add(3), *bw.add(4), *bw.add(5)]);
        let (h0, h1) = bits_to_bytes(word);
        let (lo, hi) = nibbles(bw.add(6));
        let x0 = v128_or(lo, v128_andnot(top, h0));
        let x1 = v128_or(hi, v128_andnot(top, h1));
        i32x4_extadd_pairwise_i16x8(dot_small_i16(x0, y0, x1, y1))
    })
}

/// # Safety
/// As [`rows_q4_0_q8_0`].
pub(super) unsafe fn rows_q8_0_q8_0(rows: [&[u8]; ROWS], a: &[u8], nb: usize) -> [f32; ROWS] {
    with_q8_0(rows, a, nb, 34, |bw, y0, y1| {
        i32x4_add(dot_i8(load(bw.add(2)), y0), dot_i8(load(bw.add(18)), y1))
    })
}

/// # Safety
/// As [`rows_q4_0_q8_0`].
pub(super) unsafe fn rows_q4_1_q8_1(rows: [&[u8]; ROWS], a: &[u8], nb: usize) -> [f32; ROWS] {
    let mut sum = f32x4_splat(0.0);
    for i in 0..nb {
        let ba = &a[i * 36..(i + 1) * 36];
        let (y0, y1) = (load(ba.as_ptr().add(4)), load(ba.as_ptr().add(20)));
        let s = hsum4(std::array::from_fn(|r| {
            let (lo, hi) = nibbles(rows[r].as_ptr().add(i * 20 + 4));
            i32x4_extadd_pairwise_i16x8(dot_small_i16(lo, y0, hi, y1))
        }));
        // Portable: sum += d_w * d_a * s + m_w * s_a, left to right.
        let d = f32x4_mul(f16x4(&rows, i, 20, 0), f32x4_splat(f16_at(ba, 0)));
        let m = f32x4_mul(f16x4(&rows, i, 20, 2), f32x4_splat(f16_at(ba, 2)));
        sum = f32x4_add(sum, f32x4_add(f32x4_mul(d, f32x4_convert_i32x4(s)), m));
    }
    to_array(sum)
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::super::super::float::f16_bits_to_f32;

    /// Every f16 bit pattern (NaNs included: payloads are kept) widens to the scalar bits.
    #[wasm_bindgen_test]
    fn simd128_f16x4_widens_every_f16_as_scalar() {
        let bytes: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
        for i in (0..bytes.len() / 2).step_by(4) {
            let rows: [&[u8]; 4] = std::array::from_fn(|r| &bytes[2 * (i + r)..]);
            // SAFETY: each row has at least 2 readable bytes at offset 0.
            let v = super::to_array(unsafe { super::f16x4(&rows, 0, 2, 0) });
            for (r, got) in v.iter().enumerate() {
                let h = (i + r) as u16;
                assert_eq!(got.to_bits(), f16_bits_to_f32(h).to_bits(), "{h:#06x}");
            }
        }
    }
}
