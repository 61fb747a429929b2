//! Dot products of quantized weight rows with activations, for the CPU backend.
//!
//! As in GGML, an activation row is quantized once to the weight type's "vec-dot type"
//! ([`vec_dot_type`], [`quantize_activation`]): Q8_K for the K-quants and IQ4_XS, Q8_0 for
//! Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, f32 for F32/F16/BF16. Then every weight row is
//! dotted with it in integer arithmetic per block:
//! - [`vec_dot`]: one row; [`vec_dot_rows`]: many consecutive rows against one activation
//!   (token generation); [`vec_dot_multi`]: one row against several activations (prompt
//!   processing: the weight block is unpacked once per 4 activations); [`GemmActs`] +
//!   [`gemm_tile`]: a tile of rows against all activations of a prompt, with the weights
//!   unpacked once (AVX-512 VNNI; `gemm.rs`), bit-identical to [`vec_dot`].
//!
//! Each kernel has a portable scalar version (`scalar.rs`, the reference) and, on x86_64, an
//! AVX2+FMA+F16C version chosen at run time (`avx2_*.rs`). Integer sums are exact in both; the
//! K-quant SIMD kernels are bit-identical to the scalar ones, the 32-element ones differ only
//! in the order of float accumulation.

mod act;
mod gemm;
mod scalar;

pub use gemm::{gemm_tile, has_gemm_kernel, GemmActs, GemmScratch};

#[cfg(target_arch = "x86_64")]
mod avx2_act;
#[cfg(target_arch = "x86_64")]
mod avx2_kquant;
#[cfg(target_arch = "x86_64")]
mod avx2_legacy;
#[cfg(target_arch = "x86_64")]
mod avx2_multi;
#[cfg(target_arch = "x86_64")]
mod avx2_rows;
#[cfg(target_arch = "x86_64")]
mod avx2_util;
#[cfg(target_arch = "x86_64")]
mod avx512_gemm_k;
#[cfg(target_arch = "x86_64")]
mod avx512_gemm_lane;
#[cfg(target_arch = "x86_64")]
mod avx512_kquant;
#[cfg(target_arch = "x86_64")]
mod avx512_pairs;
#[cfg(target_arch = "x86_64")]
mod avx512_rows;

// wasm simd128 kernels: compiled in with `-C target-feature=+simd128` (wasm has no run-time
// feature detection), bit-identical to the portable ones.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm_act;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm_kquant;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm_legacy;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm_rows;
#[cfg(all(test, target_arch = "wasm32", target_feature = "simd128"))]
mod wasm_tests;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm_util;

use crate::dtype::GgmlType;

/// The type activations must be quantized to before [`vec_dot`] with weights of type `w`.
pub fn vec_dot_type(w: GgmlType) -> GgmlType {
    use GgmlType::*;
    match w {
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL => Q8_0,
        Q4_1 | Q5_1 => Q8_1,
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ4_XS => Q8_K,
        _ => F32,
    }
}

/// Quantizes one activation row `x` into `buf` (resized as needed) in the vec-dot type of
/// weights `w`, ready for [`vec_dot`] / [`vec_dot_rows`] / [`vec_dot_multi`]. `x.len()` must be
/// a whole number of that type's blocks (for the K types: of 256).
pub fn quantize_activation(
    w: GgmlType,
    x: &[f32],
    buf: &mut Vec<u8>,
) -> Result<(), crate::quant::QuantError> {
    let at = vec_dot_type(w);
    let (block, size) = at.block_geometry();
    buf.resize(x.len() / block * size, 0);
    quantize_activation_to(at, x, buf)
}

/// Whether [`vec_dot`] handles weights of type `w`.
pub fn supports_vec_dot(w: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        w,
        F32 | F16
            | BF16
            | Q4_0
            | Q4_1
            | Q5_0
            | Q5_1
            | Q8_0
            | IQ4_NL
            | Q2_K
            | Q3_K
            | Q4_K
            | Q5_K
            | Q6_K
            | IQ4_XS
    )
}

/// Whether the AVX2 kernels can run on this CPU (checked once, then cached by std).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// Whether the CPU also has AVX-VNNI (one-instruction u8×i8 dot into i32, used by some of
/// the 4-row / 4-token kernels; integer results are the same as with AVX2).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn has_avx_vnni() -> bool {
    use std::sync::OnceLock;
    static VNNI: OnceLock<bool> = OnceLock::new();
    // CPUID leaf 7 sub-leaf 1, EAX bit 4 (read directly: the `avxvnni` detection name needs
    // a newer Rust than the crate's minimum); YMM state support is implied by `has_avx2`.
    *VNNI.get_or_init(|| {
        // SAFETY: CPUID is available on every x86_64 CPU; leaf 7 is checked against the max.
        // (`__cpuid_count` is safe in newer Rust, unsafe in the crate's minimum version.)
        #[allow(unused_unsafe)]
        unsafe {
            use std::arch::x86_64::__cpuid_count;
            has_avx2() && __cpuid_count(0, 0).eax >= 7 && (__cpuid_count(7, 1).eax >> 4) & 1 == 1
        }
    })
}

/// Which kernels are used, from `WEFT_DOT_KERNELS` (read once): `scalar` (portable kernels
/// only), `single` (SIMD one-row kernels, no multi-row/multi-token ones), `avx2` (all but
/// the AVX-512 row kernels), anything else or unset: all. For numerical and speed
/// comparisons; every choice gives the same bits except `scalar`.
fn kernel_level() -> u8 {
    use std::sync::OnceLock;
    static LEVEL: OnceLock<u8> = OnceLock::new();
    *LEVEL.get_or_init(|| match std::env::var("WEFT_DOT_KERNELS").as_deref() {
        Ok("scalar") => 0,
        Ok("single") => 1,
        _ => 2,
    })
}

/// A dot kernel: (weight row, activation row, number of blocks) -> dot product. Unsafe
/// because SIMD kernels need CPU features; [`kernel`] only hands out ones this CPU has.
type KernelFn = unsafe fn(&[u8], &[u8], usize) -> f32;

/// Checks the row lengths; a mismatch is a caller bug (the backend sizes these buffers).
fn check(w: GgmlType, w_len: usize, act: &[u8], n: usize) {
    let wt = vec_dot_type(w);
    let need_w = w.bytes_for(n as u64);
    let need_a = wt.bytes_for(n as u64);
    assert!(
        supports_vec_dot(w),
        "vec_dot: weight type {w} is not supported"
    );
    assert!(
        need_w == Some(w_len as u64) && need_a == Some(act.len() as u64),
        "vec_dot: {n} elements of {w} need {need_w:?} weight bytes and {need_a:?} {wt} \
         activation bytes, got {w_len} and {}",
        act.len()
    );
}

/// Dot product of one weight row (`n` elements of type `w`) with an activation row already in
/// [`vec_dot_type`]`(w)` (little-endian f32 bytes for float weights).
///
/// Panics when the lengths do not match `n` or the type is not supported
/// ([`supports_vec_dot`]): both are caller bugs, not data errors.
pub fn vec_dot(w: GgmlType, w_row: &[u8], act: &[u8], n: usize) -> f32 {
    check(w, w_row.len(), act, n);
    // SAFETY: `kernel` returns only kernels this CPU supports; lengths were checked.
    unsafe { kernel(w)(w_row, act, n / w.block_size()) }
}

/// `out[r]` = [`vec_dot`] of row `r` of `w_rows` (`out.len()` consecutive rows of `n`
/// elements) with `act`. Checks and dispatches once for all rows, which matters for short
/// rows.
pub fn vec_dot_rows(w: GgmlType, w_rows: &[u8], act: &[u8], n: usize, out: &mut [f32]) {
    let row_bytes = w.bytes_for(n as u64).unwrap_or(0) as usize;
    assert!(
        w_rows.len() == row_bytes * out.len(),
        "vec_dot_rows: {} rows of {n} {w} elements need {} bytes, got {}",
        out.len(),
        row_bytes * out.len(),
        w_rows.len()
    );
    if out.is_empty() {
        return;
    }
    check(w, row_bytes, act, n);
    let f = kernel(w);
    let nb = n / w.block_size();
    for (o, row) in out.iter_mut().zip(w_rows.chunks_exact(row_bytes)) {
        // SAFETY: as in `vec_dot`.
        *o = unsafe { f(row, act, nb) };
    }
}

/// `out[c]` = [`vec_dot`] of `w_row` with activation row `c`, for `out.len()` activation rows
/// stored one after another in `acts` (each in [`vec_dot_type`]`(w)`). On AVX2 the weight
/// row is unpacked once per 4 activation rows, which speeds up batched (prompt) matmuls.
pub fn vec_dot_multi(w: GgmlType, w_row: &[u8], acts: &[u8], n: usize, out: &mut [f32]) {
    let act_bytes = vec_dot_type(w).bytes_for(n as u64).unwrap_or(0) as usize;
    assert!(
        acts.len() == act_bytes * out.len(),
        "vec_dot_multi: {} activation rows of {n} elements need {} bytes, got {}",
        out.len(),
        act_bytes * out.len(),
        acts.len()
    );
    if out.is_empty() {
        return;
    }
    check(w, w_row.len(), &acts[..act_bytes], n);
    let nb = n / w.block_size();
    let done = if kernel_level() >= 2 {
        multi_simd(w, w_row, acts, act_bytes, nb, out)
    } else {
        0
    };
    let f = kernel(w);
    for (c, o) in out.iter_mut().enumerate().skip(done) {
        // SAFETY: as in `vec_dot`.
        *o = unsafe { f(w_row, &acts[c * act_bytes..][..act_bytes], nb) };
    }
}

/// A tile of a matrix product: `out[r * n_tok + t]` = [`vec_dot`] of weight row `r` of
/// `w_rows` (consecutive rows of `n` elements) with activation row `t` of `acts` (`n_tok`
/// consecutive rows in [`vec_dot_type`]`(w)`). Checks and dispatches once for the whole tile;
/// tokens are taken 4 at a time (one weight-block unpack per 4 tokens, on AVX2) with all rows
/// of the tile inner, so 4 activation rows and the tile's weight rows stay in L1 cache.
pub fn vec_dot_tile(
    w: GgmlType,
    w_rows: &[u8],
    acts: &[u8],
    n: usize,
    n_tok: usize,
    out: &mut [f32],
) {
    let row_bytes = w.bytes_for(n as u64).unwrap_or(0) as usize;
    let act_bytes = vec_dot_type(w).bytes_for(n as u64).unwrap_or(0) as usize;
    let n_rows = w_rows.len() / row_bytes.max(1);
    assert!(
        row_bytes > 0
            && w_rows.len() == row_bytes * n_rows
            && acts.len() == act_bytes * n_tok
            && out.len() == n_rows * n_tok,
        "vec_dot_tile: {n_rows} rows x {n_tok} tokens of {n} {w} elements: got {} weight, {} \
         activation bytes and {} outputs",
        w_rows.len(),
        acts.len(),
        out.len()
    );
    if out.is_empty() {
        return;
    }
    check(w, row_bytes, &acts[..act_bytes], n);
    let nb = n / w.block_size();
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut t0 = 0;
    let multi = kernel_level() >= 2;
    #[cfg(target_arch = "x86_64")]
    if multi {
        t0 = rows_multi_simd(w, w_rows, row_bytes, acts, act_bytes, nb, n_tok, out);
    }
    #[cfg(target_arch = "x86_64")]
    if multi && t0 == 0 && matches!(w, GgmlType::Q6_K | GgmlType::Q4_K) && avx512_rows::available()
    {
        t0 = kquant_groups(w, w_rows, row_bytes, acts, act_bytes, nb, n_tok, out);
    }
    #[cfg(target_arch = "x86_64")]
    if multi && has_avx2() {
        if let Some(f) = avx2_multi_kernel(w) {
            const K: usize = avx2_multi::COLS;
            while t0 + K <= n_tok {
                let cols: [&[u8]; K] =
                    std::array::from_fn(|k| &acts[(t0 + k) * act_bytes..][..act_bytes]);
                for (r, row) in w_rows.chunks_exact(row_bytes).enumerate() {
                    // SAFETY: features checked; every row and column has the checked length.
                    let v = unsafe { f(row, cols, nb) };
                    for (k, v) in v.into_iter().enumerate() {
                        out[r * n_tok + t0 + k] = v;
                    }
                }
                t0 += K;
            }
        }
    }
    let f = kernel(w);
    for t in t0..n_tok {
        let a = &acts[t * act_bytes..][..act_bytes];
        let r0 = if multi {
            rows_simd(w, w_rows, row_bytes, a, nb, n_tok, t, out)
        } else {
            0
        };
        for (r, row) in w_rows.chunks_exact(row_bytes).enumerate().skip(r0) {
            // SAFETY: as in `vec_dot`.
            out[r * n_tok + t] = unsafe { f(row, a, nb) };
        }
    }
}

/// Runs `$kernel::rows_multi::<K>` over the activation rows from the first, in groups of each
/// size `K` of the list in turn (largest first) while a whole group remains; evaluates to how
/// many activation rows were done. Shared by the AVX-512 and AVX2 row kernels.
#[cfg(target_arch = "x86_64")]
macro_rules! token_groups {
    ($kernel:ident, $kind:expr, $w_rows:expr, $n_rows:expr, $acts:expr, $act_bytes:expr,
     $nb:expr, $n_tok:expr, $out:expr, [$($k:literal),+]) => {{
        let mut t0 = 0;
        $(
            while $n_tok - t0 >= $k {
                let cols: [&[u8]; $k] =
                    std::array::from_fn(|k| &$acts[(t0 + k) * $act_bytes..][..$act_bytes]);
                // SAFETY: features checked; `vec_dot_tile` checked every row's and
                // activation's length, and `out` holds `n_rows · n_tok` values.
                unsafe {
                    $kernel::rows_multi::<$k>(
                        $kind, $w_rows, $n_rows, cols, $nb, &mut $out[t0..], $n_tok,
                    )
                };
                t0 += $k;
            }
        )+
        t0
    }};
}

/// The AVX-512 row kernels for groups of 16, 8, 4 and 2 activation rows from the first (on CPUs
/// without them, the AVX2 ones of [`avx2_rows_multi`]), when this CPU and type have them;
/// returns how many activation rows were done.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn rows_multi_simd(
    w: GgmlType,
    w_rows: &[u8],
    row_bytes: usize,
    acts: &[u8],
    act_bytes: usize,
    nb: usize,
    n_tok: usize,
    out: &mut [f32],
) -> usize {
    let n_rows = w_rows.len() / row_bytes;
    if !avx512_rows::available() {
        return avx2_rows_multi(w, w_rows, n_rows, acts, act_bytes, nb, n_tok, out);
    }
    let Some(kind) = avx512_rows::Kind::of(w) else {
        return 0;
    };
    const _: () = assert!(avx512_rows::MAX_TOKENS == 16);
    token_groups!(
        avx512_rows,
        kind,
        w_rows,
        n_rows,
        acts,
        act_bytes,
        nb,
        n_tok,
        out,
        [16, 8, 4, 2]
    )
}

/// The AVX-512 Q6_K or Q4_K kernel (`avx512_kquant`, by `w`) over groups of 16, 8, 4 and 2
/// activation rows from the first; returns how many activation rows were done.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn kquant_groups(
    w: GgmlType,
    w_rows: &[u8],
    row_bytes: usize,
    acts: &[u8],
    act_bytes: usize,
    nb: usize,
    n_tok: usize,
    out: &mut [f32],
) -> usize {
    let n_rows = w_rows.len() / row_bytes;
    let mut t0 = 0;
    macro_rules! group {
        ($k:literal) => {
            while n_tok - t0 >= $k {
                let cols: [&[u8]; $k] =
                    std::array::from_fn(|k| &acts[(t0 + k) * act_bytes..][..act_bytes]);
                // SAFETY: features checked by the caller; `vec_dot_tile` checked every row's
                // and activation's length, and `out` holds `n_rows · n_tok` values.
                let o = &mut out[t0..];
                unsafe {
                    if w == GgmlType::Q6_K {
                        avx512_kquant::q6_k_rows_multi::<$k>(w_rows, n_rows, cols, nb, o, n_tok)
                    } else {
                        avx512_kquant::q4_k_rows_multi::<$k>(w_rows, n_rows, cols, nb, o, n_tok)
                    }
                };
                t0 += $k;
            }
        };
    }
    group!(16);
    group!(8);
    group!(4);
    group!(2);
    t0
}

/// The AVX2 row kernels (`avx2_rows`) for groups of 4, 3 and 2 activation rows from the
/// first, when this CPU and type have them; returns how many activation rows were done.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn avx2_rows_multi(
    w: GgmlType,
    w_rows: &[u8],
    n_rows: usize,
    acts: &[u8],
    act_bytes: usize,
    nb: usize,
    n_tok: usize,
    out: &mut [f32],
) -> usize {
    let Some(kind) = avx2_rows::Kind::of(w) else {
        return 0;
    };
    if !has_avx2() {
        return 0;
    }
    const _: () = assert!(avx2_rows::MAX_TOKENS == 4);
    token_groups!(
        avx2_rows,
        kind,
        w_rows,
        n_rows,
        acts,
        act_bytes,
        nb,
        n_tok,
        out,
        [4, 3, 2, 1]
    )
}

/// Runs a SIMD row kernel for activation row `t`, if this CPU and type have one, writing
/// `out[r * n_tok + t]`; returns how many rows it filled: all of them with the AVX-512 row
/// kernels (`avx512_rows`), as many whole groups of 4 rows as there are with wasm simd128.
/// (On AVX2 without AVX-512, `avx2_rows` has already taken every token.)
#[allow(unused_variables, clippy::too_many_arguments)]
fn rows_simd(
    w: GgmlType,
    w_rows: &[u8],
    row_bytes: usize,
    act: &[u8],
    nb: usize,
    n_tok: usize,
    t: usize,
    out: &mut [f32],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if avx512_rows::available() {
        use avx512_rows::Kind;
        if let Some(kind) = Kind::of(w) {
            let n_rows = w_rows.len() / row_bytes;
            // SAFETY: features checked; `vec_dot_tile` checked every row's and the
            // activation's length, and `out` holds `n_rows · n_tok` values.
            unsafe { avx512_rows::rows(kind, w_rows, n_rows, act, nb, &mut out[t..], n_tok) };
            return n_rows;
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if let Some(f) = wasm_util::rows_kernel(w) {
        // SAFETY: simd128 is on in this build; lengths checked as above.
        return unsafe { row_groups(f, w_rows, row_bytes, act, nb, n_tok, t, out) };
    }
    0
}

/// An `R`-row kernel: `R` weight rows dotted with one activation row of `nb` blocks.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
type RowGroupFn<const R: usize> = unsafe fn([&[u8]; R], &[u8], usize) -> [f32; R];

/// Runs an `R`-row kernel `f` on activation row `t` over as many whole groups of `R` rows of
/// `w_rows` as there are, writing `out[r * n_tok + t]`; returns how many rows it filled.
///
/// # Safety
/// `f`'s target features must be present, and every row and `act` must have the lengths `f`
/// reads for `nb` blocks.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[allow(clippy::too_many_arguments)]
unsafe fn row_groups<const R: usize>(
    f: RowGroupFn<R>,
    w_rows: &[u8],
    row_bytes: usize,
    act: &[u8],
    nb: usize,
    n_tok: usize,
    t: usize,
    out: &mut [f32],
) -> usize {
    let n_rows = w_rows.len() / row_bytes;
    let mut done = 0;
    while done + R <= n_rows {
        let rows: [&[u8]; R] =
            std::array::from_fn(|k| &w_rows[(done + k) * row_bytes..][..row_bytes]);
        // SAFETY: the caller's contract.
        let v = unsafe { f(rows, act, nb) };
        for (k, v) in v.into_iter().enumerate() {
            out[(done + k) * n_tok + t] = v;
        }
        done += R;
    }
    done
}

/// Runs the 4-column SIMD kernel over as many whole groups of 4 columns as there are, if
/// this CPU and type have one; returns how many columns it filled.
#[allow(unused_variables)]
fn multi_simd(
    w: GgmlType,
    w_row: &[u8],
    acts: &[u8],
    act_bytes: usize,
    nb: usize,
    out: &mut [f32],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        if let Some(f) = avx2_multi_kernel(w) {
            const K: usize = avx2_multi::COLS;
            let mut done = 0;
            while done + K <= out.len() {
                let cols: [&[u8]; K] =
                    std::array::from_fn(|k| &acts[(done + k) * act_bytes..][..act_bytes]);
                // SAFETY: features checked; every column has the checked length.
                let r = unsafe { f(w_row, cols, nb) };
                out[done..done + K].copy_from_slice(&r);
                done += K;
            }
            return done;
        }
    }
    0
}

/// The 4-column AVX2 kernel for `w`, if there is one.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::type_complexity)]
fn avx2_multi_kernel(
    w: GgmlType,
) -> Option<unsafe fn(&[u8], [&[u8]; avx2_multi::COLS], usize) -> [f32; avx2_multi::COLS]> {
    use GgmlType::*;
    let vnni = has_avx_vnni();
    Some(match w {
        Q4_0 if vnni => avx2_multi::q4_0_q8_0_vnni,
        Q5_0 if vnni => avx2_multi::q5_0_q8_0_vnni,
        Q8_0 if vnni => avx2_multi::q8_0_q8_0_vnni,
        Q4_0 => avx2_multi::q4_0_q8_0,
        Q4_1 => avx2_multi::q4_1_q8_1,
        Q5_0 => avx2_multi::q5_0_q8_0,
        Q8_0 => avx2_multi::q8_0_q8_0,
        Q4_K => avx2_multi::q4_k_q8_k,
        Q6_K => avx2_multi::q6_k_q8_k,
        _ => return None,
    })
}

/// The portable kernel (also the reference the SIMD kernels are tested against).
pub fn vec_dot_scalar(w: GgmlType, w_row: &[u8], act: &[u8], n: usize) -> f32 {
    check(w, w_row.len(), act, n);
    let f = scalar_kernel(w).expect("checked by supports_vec_dot");
    // SAFETY: scalar kernels need no CPU features; lengths were checked.
    unsafe { f(w_row, act, n / w.block_size()) }
}

/// The fastest kernel for `w` on this CPU.
fn kernel(w: GgmlType) -> KernelFn {
    #[cfg(target_arch = "x86_64")]
    if kernel_level() >= 1 && has_avx2() {
        if let Some(f) = avx2_kernel(w) {
            return f;
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if kernel_level() >= 1 {
        if let Some(f) = wasm_util::kernel(w) {
            return f;
        }
    }
    scalar_kernel(w).expect("checked by supports_vec_dot")
}

fn scalar_kernel(w: GgmlType) -> Option<KernelFn> {
    use GgmlType::*;
    Some(match w {
        F32 => scalar::f32_f32,
        F16 => scalar::f16_f32,
        BF16 => scalar::bf16_f32,
        Q4_0 => scalar::q4_0_q8_0,
        Q4_1 => scalar::q4_1_q8_1,
        Q5_0 => scalar::q5_0_q8_0,
        Q5_1 => scalar::q5_1_q8_1,
        Q8_0 => scalar::q8_0_q8_0,
        IQ4_NL => scalar::iq4_nl_q8_0,
        Q2_K => scalar::q2_k_q8_k,
        Q3_K => scalar::q3_k_q8_k,
        Q4_K => scalar::q4_k_q8_k,
        Q5_K => scalar::q5_k_q8_k,
        Q6_K => scalar::q6_k_q8_k,
        IQ4_XS => scalar::iq4_xs_q8_k,
        _ => return None,
    })
}

/// The AVX2 kernel for `w`, if there is one (callers check the CPU features first).
#[cfg(target_arch = "x86_64")]
fn avx2_kernel(w: GgmlType) -> Option<KernelFn> {
    use GgmlType::*;
    Some(match w {
        F32 => avx2_legacy::f32_f32,
        F16 => avx2_legacy::f16_f32,
        Q4_0 => avx2_legacy::q4_0_q8_0,
        Q4_1 => avx2_legacy::q4_1_q8_1,
        Q5_0 => avx2_legacy::q5_0_q8_0,
        Q8_0 => avx2_legacy::q8_0_q8_0,
        Q5_1 => avx2_legacy::q5_1_q8_1,
        IQ4_NL => avx2_legacy::iq4_nl_q8_0,
        Q2_K => avx2_kquant::q2_k_q8_k,
        Q3_K => avx2_kquant::q3_k_q8_k,
        Q4_K => avx2_kquant::q4_k_q8_k,
        Q5_K => avx2_kquant::q5_k_q8_k,
        Q6_K => avx2_kquant::q6_k_q8_k,
        IQ4_XS => avx2_kquant::iq4_xs_q8_k,
        _ => return None,
    })
}

/// Whether [`vec_dot`] uses a SIMD kernel for `w` on this machine (for tests and benchmarks).
pub fn has_simd_kernel(w: GgmlType) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx2() && avx2_kernel(w).is_some()
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        wasm_util::kernel(w).is_some()
    }
    #[cfg(not(any(
        target_arch = "x86_64",
        all(target_arch = "wasm32", target_feature = "simd128")
    )))]
    {
        let _ = w;
        false
    }
}

/// Quantizes one activation row `x` into `dst` as type `at`, the way llama.cpp's CPU backend
/// quantizes activations: for Q8_0, Q8_1 and Q8_K with inverse scale 127/amax and rounding half
/// to even (AVX2 when available, else the bit-identical portable code in `act.rs`); other types
/// with [`crate::quant::quantize`]. `dst` must hold exactly `at.bytes_for(x.len())` bytes.
///
/// The GGML reference quantizers ([`crate::quant::quantize`], used for weights) round half
/// away from zero with 1/d instead; the two differ only at rounding ties and one-ulp
/// differences of the inverse scale, but those are enough to move logits measurably.
pub fn quantize_activation_to(
    at: GgmlType,
    x: &[f32],
    dst: &mut [u8],
) -> Result<(), crate::quant::QuantError> {
    use crate::quant::QuantError;
    if !matches!(at, GgmlType::Q8_0 | GgmlType::Q8_1 | GgmlType::Q8_K) {
        return crate::quant::quantize(at, x, dst);
    }
    let (block, size) = at.block_geometry();
    if !x.len().is_multiple_of(block) {
        return Err(QuantError::NotWholeBlocks {
            ty: at,
            n: x.len(),
            block,
        });
    }
    if dst.len() != x.len() / block * size {
        return Err(QuantError::WrongByteLen {
            ty: at,
            n: x.len(),
            expected: x.len() / block * size,
            got: dst.len(),
        });
    }
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: features checked; lengths checked above.
        unsafe {
            match at {
                GgmlType::Q8_0 => avx2_act::quantize_q8_0(x, dst),
                GgmlType::Q8_1 => avx2_act::quantize_q8_1(x, dst),
                _ => avx2_act::quantize_q8_k(x, dst),
            }
        }
        return Ok(());
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if wasm_util::quantize_activation(at, x, dst) {
        return Ok(());
    }
    match at {
        GgmlType::Q8_0 => act::quantize_q8_0(x, dst),
        GgmlType::Q8_1 => act::quantize_q8_1(x, dst),
        _ => act::quantize_q8_k(x, dst),
    }
    Ok(())
}

/// The portable activation quantizer (what builds without AVX2 use), for tests.
#[cfg(test)]
fn quantize_activation_portable(at: GgmlType, x: &[f32], dst: &mut [u8]) {
    match at {
        GgmlType::Q8_0 => act::quantize_q8_0(x, dst),
        GgmlType::Q8_1 => act::quantize_q8_1(x, dst),
        _ => act::quantize_q8_k(x, dst),
    }
}

#[cfg(test)]
mod tests;
