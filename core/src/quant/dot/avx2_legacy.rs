//! AVX2 kernels for the 32-element formats and float rows. The integer part of each block is
//! exact; per-block results are accumulated in 8 f32 lanes with FMA (a different float order
//! from the scalar kernels, within 1e-6 relative in practice).

use std::arch::x86_64::*;

use super::avx2_util::*;

/// Shared loop for weights dotted with Q8_0 activations: `quants` gives the block's signed
/// weight bytes.
#[inline(always)]
unsafe fn with_q8_0(
    x: &[u8],
    y: &[u8],
    nb: usize,
    size: usize,
    quants: impl Fn(*const u8) -> __m256i,
) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut acc = _mm256_setzero_ps();
    for i in 0..nb {
        let bw = px.add(i * size);
        let ba = py.add(i * 34);
        let d = _mm256_set1_ps(f16_at(bw) * f16_at(ba));
        let qy = _mm256_loadu_si256(ba.add(2) as *const __m256i);
        let p = dot_i8_i8(quants(bw), qy);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    hsum_ps(acc)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q8_0_q8_0(x: &[u8], y: &[u8], nb: usize) -> f32 {
    with_q8_0(x, y, nb, 34, |b| {
        _mm256_loadu_si256(b.add(2) as *const __m256i)
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4_0_q8_0(x: &[u8], y: &[u8], nb: usize) -> f32 {
    with_q8_0(x, y, nb, 18, |b| {
        _mm256_sub_epi8(nibbles_32(b.add(2)), _mm256_set1_epi8(8))
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q5_0_q8_0(x: &[u8], y: &[u8], nb: usize) -> f32 {
    with_q8_0(x, y, nb, 22, |b| {
        // q - 16 as a signed byte: the nibble with 0xF0 or-ed in where the fifth bit is clear.
        let clear = _mm256_andnot_si256(bits_to_bytes_32(b.add(2)), _mm256_set1_epi8(-16));
        _mm256_or_si256(nibbles_32(b.add(6)), clear)
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4_1_q8_1(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0f32;
    for i in 0..nb {
        let bw = px.add(i * 20);
        let ba = py.add(i * 36);
        let d = _mm256_set1_ps(f16_at(bw) * f16_at(ba));
        mins += f16_at(bw.add(2)) * f16_at(ba.add(2));
        let qy = _mm256_loadu_si256(ba.add(4) as *const __m256i);
        let p = dot_u8_i8(nibbles_32(bw.add(4)), qy);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    hsum_ps(acc) + mins
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f32_f32(x: &[u8], y: &[u8], n: usize) -> f32 {
    let (px, py) = (x.as_ptr() as *const f32, y.as_ptr() as *const f32);
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let o = i + 8 * k;
            *a = _mm256_fmadd_ps(_mm256_loadu_ps(px.add(o)), _mm256_loadu_ps(py.add(o)), *a);
        }
        i += 32;
    }
    let mut tail = 0f32;
    while i < n {
        tail += px.add(i).read_unaligned() * py.add(i).read_unaligned();
        i += 1;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    hsum_ps(s) + tail
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f16_f32(x: &[u8], y: &[u8], n: usize) -> f32 {
    let py = y.as_ptr() as *const f32;
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    while i + 16 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let o = i + 8 * k;
            let w = _mm256_cvtph_ps(_mm_loadu_si128(x.as_ptr().add(2 * o) as *const __m128i));
            *a = _mm256_fmadd_ps(w, _mm256_loadu_ps(py.add(o)), *a);
        }
        i += 16;
    }
    let mut tail = 0f32;
    while i < n {
        tail += f16_at(x.as_ptr().add(2 * i)) * py.add(i).read_unaligned();
        i += 1;
    }
    hsum_ps(_mm256_add_ps(acc[0], acc[1])) + tail
}
