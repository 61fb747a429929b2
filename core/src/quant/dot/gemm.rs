//! Matrix-matrix products of quantized weights with many activation rows (prompt
//! processing), bit-identical per (row, token) to [`super::vec_dot`].
//!
//! The 4-token kernels (`avx2_multi.rs`) unpack every weight block again for each group of 4
//! tokens. Here the activations of the whole product are laid out once ([`GemmActs`]), and a
//! tile of weight rows is unpacked once into signed bytes plus per-block scale terms (a
//! "panel", [`GemmScratch`]); register-blocked AVX-512 VNNI micro-kernels then run over all
//! tokens. Activation bytes are stored as `a + 128` (unsigned, as the u8 x i8 dot
//! instructions need) and the weight panel carries the exact integer correction
//! `128 * sum(w)`, so every block's integer sums are the same as the one-row kernel's.
//!
//! Two families, each reproducing its one-row kernel's float operations exactly:
//! - 32-element blocks (Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL; `avx512_gemm_lane.rs`): the one-row
//!   kernel keeps 8 float lanes per block parity; one zmm holds an even and an odd block.
//! - K-quants (Q4_K, Q6_K; `avx512_gemm_k.rs`): every super-block is reduced to one exact
//!   integer per (row, token), then scaled as the one-row kernel does, 16 tokens per vector.
//!
//! Other CPUs, types and builds report "no kernel" ([`GemmActs::prepare`] returns false) and
//! callers use [`super::vec_dot_tile`].

// Off x86_64 only the "no kernel" answers are reachable.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use crate::dtype::GgmlType;

/// One 64-byte, 64-byte-aligned line of a panel (one zmm load).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct Line(pub(super) [u8; 64]);

const ZERO_LINE: Line = Line([0; 64]);

/// Which micro-kernel family serves a weight type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Family {
    /// 32-element blocks dotted with Q8_0 (or Q8_1 when the type has a min term).
    Lane,
    /// 256-element K-quant blocks dotted with Q8_K.
    K,
}

/// The family for `w` when this CPU can run it (and the kernel level allows it).
#[allow(unused_variables)]
pub(super) fn family(w: GgmlType) -> Option<Family> {
    #[cfg(target_arch = "x86_64")]
    if super::kernel_level() >= 2 && has_avx512_vnni() {
        use GgmlType::*;
        return match w {
            Q4_0 | Q4_1 | Q5_0 | Q8_0 | IQ4_NL => Some(Family::Lane),
            Q4_K | Q6_K => Some(Family::K),
            _ => None,
        };
    }
    None
}

/// Whether the CPU has AVX-512 F/BW/VL/VNNI (plus the AVX2 set the unpacking reuses).
#[cfg(target_arch = "x86_64")]
pub(super) fn has_avx512_vnni() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        super::has_avx2()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni")
    })
}

/// Whether [`GemmActs::prepare`] can succeed for weights of type `w` on this machine.
pub fn has_gemm_kernel(w: GgmlType) -> bool {
    family(w).is_some()
}

/// The fewest activation rows for which the GEMM path pays for its weight unpacking (the
/// K-family kernel works on 16 tokens at a time, padding the rest).
fn min_tokens(f: Family) -> usize {
    if let Some(n) = min_tokens_override() {
        return n;
    }
    // Below these counts the multi-token row kernels win: a panel holds three bytes per
    // weight, written and read again, which only many tokens repay. Measured with
    // `WEFT_GEMM_MIN_TOKENS` and `weft bench -b` on Qwen2.5 0.5B: for the lane types the
    // 512-bit row kernels (`avx512_pairs`, up to 16 tokens a pass) beat the panels up to 16
    // tokens (2026-12-04, 2 threads: 12 tokens 108 -> 122 tok/s, 16 tokens 125 -> 129).
    match f {
        Family::Lane => 17,
        Family::K => 8,
    }
}

/// `WEFT_GEMM_MIN_TOKENS=N`: the fewest activation rows a product takes the GEMM kernels for
/// (both families), for measuring where they overtake the multi-token dot kernels.
fn min_tokens_override() -> Option<usize> {
    static N: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("WEFT_GEMM_MIN_TOKENS")
            .ok()
            .and_then(|v| v.parse().ok())
    })
}

/// Activation rows laid out for the GEMM micro-kernels of one weight type (built once per
/// matrix product, shared read-only by all threads).
pub struct GemmActs {
    pub(super) ty: GgmlType,
    pub(super) family: Family,
    pub(super) n: usize,
    pub(super) n_tok: usize,
    pub(super) lines: Vec<Line>,
}

impl Default for GemmActs {
    fn default() -> Self {
        Self::new()
    }
}

impl GemmActs {
    /// An empty layout (buffers grow on first use and are reused after).
    pub fn new() -> Self {
        GemmActs {
            ty: GgmlType::F32,
            family: Family::Lane,
            n: 0,
            n_tok: 0,
            lines: Vec::new(),
        }
    }

    /// Lays out `n_tok` activation rows of `n` elements, stored one after another in `acts` in
    /// [`super::vec_dot_type`]`(w)`, for products with weights of type `w`. Returns false (and
    /// keeps nothing) when there is no GEMM kernel for `w` on this CPU or `n_tok` is too small
    /// for it to pay; the caller then uses [`super::vec_dot_tile`].
    ///
    /// Panics when `acts` does not hold `n_tok` rows of `n` elements (a caller bug).
    pub fn prepare(&mut self, w: GgmlType, acts: &[u8], n: usize, n_tok: usize) -> bool {
        match family(w) {
            Some(f) if n_tok >= min_tokens(f) => self.prepare_any(w, acts, n, n_tok),
            _ => false,
        }
    }

    /// [`Self::prepare`] for any token count (the kernels are exact for every count; tests
    /// use this to reach the partial micro-tiles of small counts).
    pub(super) fn prepare_any(&mut self, w: GgmlType, acts: &[u8], n: usize, n_tok: usize) -> bool {
        let Some(f) = family(w) else {
            return false;
        };
        if n_tok == 0 || n == 0 || !n.is_multiple_of(w.block_size()) {
            return false;
        }
        let act_bytes = super::vec_dot_type(w).bytes_for(n as u64).unwrap_or(0) as usize;
        assert!(
            acts.len() == act_bytes * n_tok,
            "GemmActs::prepare: {n_tok} rows of {n} elements need {} bytes, got {}",
            act_bytes * n_tok,
            acts.len()
        );
        self.ty = w;
        self.family = f;
        self.n = n;
        self.n_tok = n_tok;
        #[cfg(target_arch = "x86_64")]
        {
            let len = match f {
                Family::Lane => super::avx512_gemm_lane::act_lines(w, n, n_tok),
                Family::K => super::avx512_gemm_k::act_lines(w, n, n_tok),
            };
            self.lines.clear();
            self.lines.resize(len, ZERO_LINE);
            match f {
                Family::Lane => {
                    super::avx512_gemm_lane::fill_acts(w, acts, n, n_tok, &mut self.lines)
                }
                Family::K => super::avx512_gemm_k::fill_acts(w, acts, n, n_tok, &mut self.lines),
            }
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = acts;
            false
        }
    }

    /// Number of activation rows laid out by the last successful [`Self::prepare`].
    pub fn n_tok(&self) -> usize {
        self.n_tok
    }

    /// Weight rows per [`gemm_tile`] call that keep one tile's unpacked panel in L1 cache
    /// (a multiple of 4).
    pub fn tile_rows(&self) -> usize {
        // Panel bytes per row: 3 lines per pair of blocks (lane family), 6 lines per
        // super-block (K family).
        match self.family {
            // 3 lines per row and pair of blocks.
            Family::Lane => ((20 << 10) / (self.n.div_ceil(64) * 3 * 64) / 4 * 4).clamp(4, 32),
            // Super-blocks are taken a few at a time (`avx512_gemm_k::KC`), so the size of
            // the rows matters less.
            Family::K => 16,
        }
    }
}

/// Per-thread scratch space for the unpacked weight panel of a tile.
#[derive(Default)]
pub struct GemmScratch {
    pub(super) lines: Vec<Line>,
}

impl GemmScratch {
    /// Empty scratch (grows on first use).
    pub fn new() -> Self {
        Self::default()
    }
}

/// A tile of the product: `out[r * n_tok + t]` = [`super::vec_dot`] of weight row `r` of
/// `w_rows` (consecutive rows of `acts.n` elements of the type `acts` was prepared for) with
/// activation row `t`, bit for bit.
///
/// Panics when the sizes do not match (caller bugs) or `acts` was not prepared.
pub fn gemm_tile(acts: &GemmActs, w_rows: &[u8], scratch: &mut GemmScratch, out: &mut [f32]) {
    let w = acts.ty;
    let row_bytes = w.bytes_for(acts.n as u64).unwrap_or(0) as usize;
    assert!(
        acts.n_tok > 0 && row_bytes > 0 && w_rows.len().is_multiple_of(row_bytes),
        "gemm_tile: activations not prepared, or {} weight bytes are not whole {w} rows of {}",
        w_rows.len(),
        acts.n
    );
    let n_rows = w_rows.len() / row_bytes;
    assert_eq!(
        out.len(),
        n_rows * acts.n_tok,
        "gemm_tile: output size for {n_rows} rows x {} tokens",
        acts.n_tok
    );
    if n_rows == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        assert!(
            family(w) == Some(acts.family),
            "gemm_tile: no kernel for {w}"
        );
        // SAFETY: `family` checked the CPU features; sizes were checked above and the panels
        // are sized by the same functions that index them.
        unsafe {
            match acts.family {
                Family::Lane => {
                    super::avx512_gemm_lane::tile(acts, w_rows, n_rows, &mut scratch.lines, out)
                }
                Family::K => {
                    super::avx512_gemm_k::tile(acts, w_rows, n_rows, &mut scratch.lines, out)
                }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = scratch;
        unreachable!("GemmActs::prepare never succeeds off x86_64");
    }
}

/// Resizes `lines` to `len` zeroed lines.
#[cfg(target_arch = "x86_64")]
pub(super) fn zeroed(lines: &mut Vec<Line>, len: usize) {
    lines.clear();
    lines.resize(len, ZERO_LINE);
}
