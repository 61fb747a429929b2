//! Small AVX2 building blocks shared by the x86_64 kernels.

use std::arch::x86_64::*;

/// Reads an f16 at `p` and widens it (F16C). Loading by broadcast writes the whole register,
/// which avoids a false dependency on whatever register LLVM would insert the value into.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f16_at(p: *const u8) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(
        (p as *const i16).read_unaligned(),
    )))
}

/// The f16 at `p`, widened and broadcast to 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f16x8_at(p: *const u8) -> __m256 {
    _mm256_cvtph_ps(_mm_set1_epi16((p as *const i16).read_unaligned()))
}

/// Asks for row `row` (the last of `n_rows` at most) of the `row_bytes`-byte rows at `w`
/// ahead of its use: rows stream from memory, and the hardware prefetcher stops at every
/// 4 KiB page boundary, so without this each block's loads stall.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn prefetch_row(w: *const u8, row: usize, n_rows: usize, row_bytes: usize) {
    let at = row.min(n_rows.saturating_sub(1)) * row_bytes;
    let mut off = 0;
    while off < row_bytes {
        _mm_prefetch::<_MM_HINT_T0>(w.add(at + off) as *const i8);
        off += 64;
    }
}

/// Reads an f32 at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f32_at(p: *const u8) -> f32 {
    (p as *const f32).read_unaligned()
}

/// Horizontal sum of 8 f32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Horizontal sum of 8 i32 lanes (exact, wrapping like the scalar i32 sums never need to).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn hsum_epi32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// Unsigned bytes `u` times signed bytes `s`, summed in groups of 4 into 8 i32 lanes. Pairs of
/// products must fit in i16 (true for all our formats: at most 2 * 127 * 127).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_u8_i8(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

/// [`dot_u8_i8`] in one AVX-VNNI instruction (same sums: products of pairs fit i16 there).
/// Written as inline assembly so the crate's minimum Rust version needs no `avxvnni` target
/// feature; callers must have checked `has_avx_vnni`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_u8_i8_vnni(u: __m256i, s: __m256i) -> __m256i {
    let mut acc = _mm256_setzero_si256();
    std::arch::asm!(
        "{{vex}} vpdpbusd {acc}, {u}, {s}",
        acc = inout(ymm_reg) acc,
        u = in(ymm_reg) u,
        s = in(ymm_reg) s,
        options(pure, nomem, nostack, preserves_flags),
    );
    acc
}

/// Signed bytes times signed bytes, summed in groups of 4 into 8 i32 lanes. The sign of `x`
/// is moved onto `y` so the unsigned-by-signed multiply applies (x = -128 never occurs).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_i8_i8(x: __m256i, y: __m256i) -> __m256i {
    dot_u8_i8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x))
}

/// 16 bytes of packed nibbles to 32 bytes: low nibbles first, then high nibbles.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn nibbles_32(p: *const u8) -> __m256i {
    let raw = _mm_loadu_si128(p as *const __m128i);
    let both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// The 32 bits of the little-endian u32 at `p`, each spread to a byte: 0xFF where set.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn bits_to_bytes_32(p: *const u8) -> __m256i {
    let word = (p as *const u32).read_unaligned();
    // Byte j of the result takes byte j / 8 of the word...
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(word as i32),
        _mm256_set_epi64x(
            0x0303030303030303,
            0x0202020202020202,
            0x0101010101010101,
            0,
        ),
    );
    // ...then every bit but bit j % 8 is forced on, so the byte is all ones iff that bit is.
    let others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi8(-1))
}

/// The 8 six-bit scales and 8 six-bit mins of a Q4_K / Q5_K block (12 bytes at `p`), as bytes
/// of two u64, unpacked with word operations (same layout as `kquant::scale_min_k4`).
#[inline(always)]
pub(super) unsafe fn scale_min_words(p: *const u8) -> (u64, u64) {
    let w0 = (p as *const u32).read_unaligned();
    let w1 = (p.add(4) as *const u32).read_unaligned();
    let w2 = (p.add(8) as *const u32).read_unaligned();
    let sc_lo = w0 & 0x3f3f3f3f;
    let mn_lo = w1 & 0x3f3f3f3f;
    let sc_hi = (w2 & 0x0f0f0f0f) | (((w0 >> 6) & 0x03030303) << 4);
    let mn_hi = ((w2 >> 4) & 0x0f0f0f0f) | (((w1 >> 6) & 0x03030303) << 4);
    (
        sc_lo as u64 | (sc_hi as u64) << 32,
        mn_lo as u64 | (mn_hi as u64) << 32,
    )
}

/// Σ_j m_j · (bsum[2j] + bsum[2j + 1]) of a Q4_K / Q5_K block: the 16 Q8_K group sums of
/// the activation block `ba` paired, times the 8 mins (bytes of `mn`, from `scale_min_words`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn k_min_sum(ba: *const u8, mn: u64) -> i32 {
    let pairs = _mm_hadd_epi16(
        _mm_loadu_si128(ba.add(260) as *const __m128i),
        _mm_loadu_si128(ba.add(276) as *const __m128i),
    );
    let mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mn as i64));
    hsum_epi32_128(_mm_madd_epi16(pairs, mins))
}

/// The unsigned six-bit quants (0..64) of half `h` of the Q6_K block `bw`, as the four
/// 32-element groups s = 0..4 of that half (elements 128h + 32s ..).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q6_k_half(bw: *const u8, h: usize) -> [__m256i; 4] {
    let low = _mm256_set1_epi8(0x0F);
    let two = _mm256_set1_epi8(0x03);
    let ql = bw.add(64 * h);
    let qh = _mm256_loadu_si256(bw.add(128 + 32 * h) as *const __m256i);
    let l0 = _mm256_loadu_si256(ql as *const __m256i);
    let l1 = _mm256_loadu_si256(ql.add(32) as *const __m256i);
    let nib = [
        _mm256_and_si256(l0, low),
        _mm256_and_si256(l1, low),
        _mm256_and_si256(_mm256_srli_epi16(l0, 4), low),
        _mm256_and_si256(_mm256_srli_epi16(l1, 4), low),
    ];
    let mut q = [_mm256_setzero_si256(); 4];
    for (s, q) in q.iter_mut().enumerate() {
        let shift = _mm_cvtsi32_si128(2 * s as i32);
        let high = _mm256_and_si256(_mm256_srl_epi16(qh, shift), two);
        *q = _mm256_or_si256(nib[s], _mm256_slli_epi16(high, 4));
    }
    q
}

/// Horizontal sum of 4 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn hsum_epi32_128(s: __m128i) -> i32 {
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// Shuffle controls for Q6_K: control s picks i16 lane 2s into the low 128 bits and lane
/// 2s + 1 into the high 128 bits, from a register holding 8 i16 scales in each half.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q6_k_scale_picks() -> [__m256i; 4] {
    let pick = |s: i8| {
        let (a, b) = (4 * s, 4 * s + 2);
        _mm256_setr_epi8(
            a,
            a + 1,
            a,
            a + 1,
            a,
            a + 1,
            a,
            a + 1,
            a,
            a + 1,
            a,
            a + 1,
            a,
            a + 1,
            a,
            a + 1,
            b,
            b + 1,
            b,
            b + 1,
            b,
            b + 1,
            b,
            b + 1,
            b,
            b + 1,
            b,
            b + 1,
            b,
            b + 1,
            b,
            b + 1,
        )
    };
    [pick(0), pick(1), pick(2), pick(3)]
}

/// The 16 IQ4 levels in both 128-bit halves, for byte-shuffle lookups.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq4_table() -> __m256i {
    let levels = super::super::iq4::IQ4_LEVELS;
    _mm256_broadcastsi128_si256(_mm_loadu_si128(levels.as_ptr() as *const __m128i))
}
