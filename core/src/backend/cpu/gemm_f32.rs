//! Products of many activation rows with f32 weights (an encoder's whole batch, a prompt):
//! a register-blocked GEMM. The weight is packed once, on first use, into panels of 32 rows laid
//! out k-major (`panel[k][j]` = row `32p + j`, column `k`), so the kernel reads 32 outputs'
//! weights for one `k` with two (AVX-512) or four (AVX2) vector loads and broadcasts one
//! activation per token: a tile of 6×32 (AVX-512) or 3×32 (AVX2) outputs stays in registers for
//! the whole dot product. Threads take (token block, panel) items from a shared counter.
//!
//! Each output is one sequential f32 sum over `k` (fused multiply-adds), so results do not
//! depend on the thread count. f16 weights go through the same kernel, each work item
//! converting its panel to f32 ([`product_f16`]). Only x86-64 with AVX2+FMA or AVX-512F; elsewhere (and for one
//! row) the caller keeps its dot-product loop.

// Off x86-64 the kernels are compiled out and `product` always declines.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_variables))]

use std::sync::atomic::{AtomicUsize, Ordering};

use super::attention::SyncPtr;
use super::pool::ThreadPool;

/// Weight rows per panel.
const NR: usize = 32;
/// Tokens per work item (their activations stay in the core's L2 across a panel's use).
const TOKEN_BLOCK: usize = 96;

/// A weight packed into k-major panels of [`NR`] rows (the last padded with zeros).
pub struct Packed {
    data: Vec<f32>,
    rows: usize,
    cols: usize,
}

/// Which kernel this CPU runs, if any.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Isa {
    Avx512,
    Avx2,
}

fn isa() -> Option<Isa> {
    #[cfg(target_arch = "x86_64")]
    {
        static ISA: std::sync::OnceLock<Option<Isa>> = std::sync::OnceLock::new();
        *ISA.get_or_init(|| {
            if std::env::var("WEFT_GEMM_F32").is_ok_and(|v| v == "off") {
                None
            } else if is_x86_feature_detected!("avx512f") {
                Some(Isa::Avx512)
            } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                Some(Isa::Avx2)
            } else {
                None
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// Whether [`pack`] and [`product`] run on this CPU.
pub fn available() -> bool {
    isa().is_some()
}

/// Packs a row-major `rows × cols` f32 weight.
pub fn pack(w: &[f32], rows: usize, cols: usize) -> Packed {
    let panels = rows.div_ceil(NR);
    let mut data = vec![0f32; panels * NR * cols];
    for p in 0..panels {
        let panel = &mut data[p * NR * cols..(p + 1) * NR * cols];
        for j in 0..NR.min(rows - p * NR) {
            let row = &w[(p * NR + j) * cols..(p * NR + j + 1) * cols];
            for (k, &v) in row.iter().enumerate() {
                panel[k * NR + j] = v;
            }
        }
    }
    Packed { data, rows, cols }
}

/// Packs `rows` rows of `cols` floats that lie `stride` apart in `w` (one head's columns of a
/// wider matrix), each scaled by `scale`.
pub fn pack_strided(w: &[f32], rows: usize, cols: usize, stride: usize, scale: f32) -> Packed {
    let panels = rows.div_ceil(NR);
    let mut data = vec![0f32; panels * NR * cols];
    for r in 0..rows {
        let (p, j) = (r / NR, r % NR);
        let panel = &mut data[p * NR * cols..(p + 1) * NR * cols];
        for (k, &v) in w[r * stride..r * stride + cols].iter().enumerate() {
            panel[k * NR + j] = v * scale;
        }
    }
    Packed { data, rows, cols }
}

/// Packs the transpose of `rows × cols` floats whose rows lie `stride` apart: the packed
/// weight has `cols` rows of `rows` columns (`x · w` rather than `x · wᵀ`, e.g. weights times
/// one head's values).
pub fn pack_transposed(w: &[f32], rows: usize, cols: usize, stride: usize) -> Packed {
    let panels = cols.div_ceil(NR);
    let mut data = vec![0f32; panels * NR * rows];
    for p in 0..panels {
        let panel = &mut data[p * NR * rows..(p + 1) * NR * rows];
        let nr = NR.min(cols - p * NR);
        for k in 0..rows {
            let src = &w[k * stride + p * NR..k * stride + p * NR + nr];
            panel[k * NR..k * NR + nr].copy_from_slice(src);
        }
    }
    Packed {
        data,
        rows: cols,
        cols: rows,
    }
}

/// A part of a [`Packed`] weight that is itself a packed weight: a run of its panels, and
/// within them a run of its columns (a tile of keys or of the keys' values, in attention).
#[derive(Clone, Copy)]
pub struct Panels<'a> {
    /// From the first float of the view: panel `p` starts `p · stride` floats in.
    data: &'a [f32],
    rows: usize,
    cols: usize,
    /// Floats from one panel to the next (the whole weight's `NR · cols`).
    stride: usize,
}

impl Packed {
    /// The whole weight as a view.
    pub fn panels(&self) -> Panels<'_> {
        Panels {
            data: &self.data,
            rows: self.rows,
            cols: self.cols,
            stride: NR * self.cols,
        }
    }
}

impl<'a> Panels<'a> {
    /// Weight rows `r` (starting on a panel boundary: a multiple of 32).
    pub fn rows(self, r: std::ops::Range<usize>) -> Self {
        assert!(r.start.is_multiple_of(NR) && r.start <= r.end && r.end <= self.rows);
        let at = (r.start / NR * self.stride).min(self.data.len());
        Panels {
            data: &self.data[at..],
            rows: r.len(),
            ..self
        }
    }

    /// Columns `c` of every row.
    pub fn cols(self, c: std::ops::Range<usize>) -> Self {
        assert!(c.start <= c.end && c.end <= self.cols);
        Panels {
            data: &self.data[c.start * NR..],
            cols: c.len(),
            ..self
        }
    }

    /// Panel `p`'s `cols · NR` floats.
    fn panel(&self, p: usize) -> &'a [f32] {
        &self.data[p * self.stride..p * self.stride + self.cols * NR]
    }
}

/// [`product`] on the calling thread alone (a product inside another op's work item), with
/// `out`'s rows `ldo` apart; only the weight's `rows` columns of each row are written.
pub fn product_serial(w: Panels, x: &[f32], n_tok: usize, out: &mut [f32], ldo: usize) -> bool {
    let Some(isa) = isa() else {
        return false;
    };
    let (rows, cols) = (w.rows, w.cols);
    assert!(x.len() >= n_tok * cols && (n_tok == 0 || out.len() >= (n_tok - 1) * ldo + rows));
    for p in 0..rows.div_ceil(NR) {
        let panel = w.panel(p);
        let nr = NR.min(rows - p * NR);
        // SAFETY: the assert above bounds rows 0..n_tok of `out` (nr ≤ rows columns from p·NR)
        // and of `x`; the kernel's features were detected.
        unsafe {
            panel_tiles(
                isa,
                panel,
                nr,
                cols,
                x,
                0..n_tok,
                out.as_mut_ptr().add(p * NR),
                ldo,
            )
        };
    }
    true
}

/// Rows `tokens` of `x` times one packed panel (`nr` weight rows), tile by tile, into `out`
/// (the panel's first output column; rows `ldo` apart, indexed by token).
/// SAFETY: `x` holds the `tokens` rows of `cols`; `out` has `nr` writable columns in each of
/// those rows; the CPU has `isa`'s features.
#[allow(clippy::too_many_arguments)]
unsafe fn panel_tiles(
    isa: Isa,
    panel: &[f32],
    nr: usize,
    cols: usize,
    x: &[f32],
    tokens: std::ops::Range<usize>,
    out: *mut f32,
    ldo: usize,
) {
    let mr_max = if isa == Isa::Avx512 { 6 } else { 3 };
    let mut t = tokens.start;
    while t < tokens.end {
        let mr = mr_max.min(tokens.end - t);
        let (o, xs) = (out.add(t * ldo), x.as_ptr().add(t * cols));
        #[cfg(target_arch = "x86_64")]
        match isa {
            Isa::Avx512 => x86::tile_avx512(mr, nr, cols, panel.as_ptr(), xs, o, ldo),
            Isa::Avx2 => x86::tile_avx2(mr, nr, cols, panel.as_ptr(), xs, o, ldo),
        }
        t += mr;
    }
}

/// `out[t][r] = Σ_k x[t][k] · w[r][k]` for `n_tok` rows of `x`; false (nothing written) when
/// this CPU has no kernel.
pub fn product(pool: &ThreadPool, w: &Packed, x: &[f32], n_tok: usize, out: &mut [f32]) -> bool {
    let Some(isa) = isa() else {
        return false;
    };
    let (rows, cols) = (w.rows, w.cols);
    debug_assert!(x.len() >= n_tok * cols && out.len() >= n_tok * rows);
    let panels = rows.div_ceil(NR);
    let blocks = n_tok.div_ceil(TOKEN_BLOCK);
    let items = panels * blocks;
    let next = AtomicUsize::new(0);
    let out_ptr = SyncPtr(out.as_mut_ptr());
    let job = |_: usize| {
        let out_ptr = &out_ptr;
        loop {
            let item = next.fetch_add(1, Ordering::Relaxed);
            if item >= items {
                break;
            }
            // Panel-major within a token block: consecutive items share the block's tokens.
            let (b, p) = (item / panels, item % panels);
            let panel = &w.data[p * NR * cols..(p + 1) * NR * cols];
            let nr = NR.min(rows - p * NR);
            let tokens = b * TOKEN_BLOCK..((b + 1) * TOKEN_BLOCK).min(n_tok);
            // SAFETY: rows `tokens`, columns p·NR..p·NR+nr of `out` belong to this item alone;
            // `x` holds n_tok rows of `cols`; the kernel's features were detected.
            unsafe { panel_tiles(isa, panel, nr, cols, x, tokens, out_ptr.0.add(p * NR), rows) };
        }
    };
    if items <= 1 {
        job(0);
    } else {
        pool.run(&job);
    }
    true
}

/// Tokens per work item of [`product_f16`]: an item converts its panel from f16 once, then runs
/// this many tokens through it, so the conversion is a small share of its work.
const F16_TOKEN_CHUNK: usize = 8 * TOKEN_BLOCK;

/// [`product`] for a row-major `rows × cols` weight of f16 (`w`: little-endian bytes, as the
/// file has them): each work item (token chunk, panel) converts its 32 rows to an f32 panel
/// of its own, so no f32 copy of the weight is kept. The products are those of f32 weights
/// (f16 to f32 is exact); false (nothing written) when this CPU has no kernel or `w` is
/// shorter than its shape.
#[allow(clippy::too_many_arguments)]
pub fn product_f16(
    pool: &ThreadPool,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    n_tok: usize,
    out: &mut [f32],
) -> bool {
    let Some(isa) = isa() else {
        return false;
    };
    if w.len() < 2 * rows * cols {
        return false; // a short weight: the caller's own path reports it
    }
    assert!(x.len() >= n_tok * cols && out.len() >= n_tok * rows);
    let panels = rows.div_ceil(NR);
    let items = panels * n_tok.div_ceil(F16_TOKEN_CHUNK);
    let next = AtomicUsize::new(0);
    let out_ptr = SyncPtr(out.as_mut_ptr());
    let job = |_: usize| {
        let out_ptr = &out_ptr;
        let mut panel = vec![0f32; NR * cols];
        loop {
            let item = next.fetch_add(1, Ordering::Relaxed);
            if item >= items {
                break;
            }
            // Panel-major within a chunk: consecutive items share the chunk's tokens.
            let (c, p) = (item / panels, item % panels);
            let nr = NR.min(rows - p * NR);
            for j in 0..NR {
                let r = p * NR + j;
                let row = (j < nr).then(|| &w[2 * r * cols..2 * (r + 1) * cols]);
                for k in 0..cols {
                    panel[k * NR + j] = row.map_or(0.0, |b| {
                        half::f16::from_bits(u16::from_le_bytes([b[2 * k], b[2 * k + 1]])).to_f32()
                    });
                }
            }
            let tokens = c * F16_TOKEN_CHUNK..((c + 1) * F16_TOKEN_CHUNK).min(n_tok);
            // SAFETY: rows `tokens`, columns p·NR..p·NR+nr of `out` belong to this item alone;
            // `x` holds n_tok rows of `cols`; the kernel's features were detected.
            unsafe {
                panel_tiles(
                    isa,
                    &panel,
                    nr,
                    cols,
                    x,
                    tokens,
                    out_ptr.0.add(p * NR),
                    rows,
                )
            };
        }
    };
    if items <= 1 {
        job(0);
    } else {
        pool.run(&job);
    }
    true
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::NR;

    /// One tile of `mr` ≤ 6 tokens × `nr` ≤ 32 rows over `k` columns (AVX-512F).
    /// SAFETY: the CPU has AVX-512F; `panel` holds k·32 floats, `x` mr rows of stride k,
    /// `out` mr rows of stride `ldo` with nr writable columns each.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn tile_avx512(
        mr: usize,
        nr: usize,
        k: usize,
        panel: *const f32,
        x: *const f32,
        out: *mut f32,
        ldo: usize,
    ) {
        match mr {
            6 => tile512::<6>(nr, k, panel, x, out, ldo),
            5 => tile512::<5>(nr, k, panel, x, out, ldo),
            4 => tile512::<4>(nr, k, panel, x, out, ldo),
            3 => tile512::<3>(nr, k, panel, x, out, ldo),
            2 => tile512::<2>(nr, k, panel, x, out, ldo),
            _ => tile512::<1>(nr, k, panel, x, out, ldo),
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn tile512<const MR: usize>(
        nr: usize,
        k: usize,
        panel: *const f32,
        x: *const f32,
        out: *mut f32,
        ldo: usize,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        for kk in 0..k {
            let w0 = _mm512_loadu_ps(panel.add(kk * NR));
            let w1 = _mm512_loadu_ps(panel.add(kk * NR + 16));
            for (i, a) in acc.iter_mut().enumerate() {
                let b = _mm512_set1_ps(*x.add(i * k + kk));
                a[0] = _mm512_fmadd_ps(b, w0, a[0]);
                a[1] = _mm512_fmadd_ps(b, w1, a[1]);
            }
        }
        let lo = if nr >= 16 {
            0xFFFF
        } else {
            (1u32 << nr) as u16 - 1
        };
        let hi = if nr >= 32 {
            0xFFFF
        } else if nr > 16 {
            (1u32 << (nr - 16)) as u16 - 1
        } else {
            0
        };
        for (i, a) in acc.iter().enumerate() {
            let o = out.add(i * ldo);
            _mm512_mask_storeu_ps(o, lo, a[0]);
            _mm512_mask_storeu_ps(o.add(16), hi, a[1]);
        }
    }

    /// One tile of `mr` ≤ 3 tokens × `nr` ≤ 32 rows (AVX2 + FMA); contract as above.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn tile_avx2(
        mr: usize,
        nr: usize,
        k: usize,
        panel: *const f32,
        x: *const f32,
        out: *mut f32,
        ldo: usize,
    ) {
        match mr {
            3 => tile256::<3>(nr, k, panel, x, out, ldo),
            2 => tile256::<2>(nr, k, panel, x, out, ldo),
            _ => tile256::<1>(nr, k, panel, x, out, ldo),
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile256<const MR: usize>(
        nr: usize,
        k: usize,
        panel: *const f32,
        x: *const f32,
        out: *mut f32,
        ldo: usize,
    ) {
        let mut acc = [[_mm256_setzero_ps(); 4]; MR];
        for kk in 0..k {
            let p = panel.add(kk * NR);
            let w = [
                _mm256_loadu_ps(p),
                _mm256_loadu_ps(p.add(8)),
                _mm256_loadu_ps(p.add(16)),
                _mm256_loadu_ps(p.add(24)),
            ];
            for (i, a) in acc.iter_mut().enumerate() {
                let b = _mm256_set1_ps(*x.add(i * k + kk));
                for (aq, &wq) in a.iter_mut().zip(&w) {
                    *aq = _mm256_fmadd_ps(b, wq, *aq);
                }
            }
        }
        for (i, a) in acc.iter().enumerate() {
            let mut row = [0f32; NR];
            for (q, &aq) in a.iter().enumerate() {
                _mm256_storeu_ps(row.as_mut_ptr().add(8 * q), aq);
            }
            std::ptr::copy_nonoverlapping(row.as_ptr(), out.add(i * ldo), nr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_product_matches_f64_dots() {
        if !available() {
            return;
        }
        let pool = ThreadPool::new(2);
        // Awkward shapes: rows not a multiple of 32, tokens not of 6 or 96.
        for (rows, cols, n_tok) in [(70, 48, 101), (32, 384, 7), (5, 16, 1), (1536, 64, 13)] {
            let w: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
                .collect();
            let x: Vec<f32> = (0..n_tok * cols)
                .map(|i| ((i * 53 % 89) as f32 - 44.0) / 32.0)
                .collect();
            let packed = pack(&w, rows, cols);
            let mut out = vec![f32::NAN; n_tok * rows];
            assert!(product(&pool, &packed, &x, n_tok, &mut out));
            for t in 0..n_tok {
                for r in 0..rows {
                    let want: f64 = (0..cols)
                        .map(|k| w[r * cols + k] as f64 * x[t * cols + k] as f64)
                        .sum();
                    let got = out[t * rows + r] as f64;
                    assert!(
                        (got - want).abs() < 1e-3,
                        "({rows}, {cols}, {n_tok}) [{t}][{r}]: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn serial_strided_product_matches_f64_dots() {
        if !available() {
            return;
        }
        // A head of 40 columns at offset 8 of rows 64 wide, written into every other 48 floats.
        let (rows, cols, stride, n_tok, ldo) = (45, 40, 64, 13, 48);
        let w: Vec<f32> = (0..rows * stride)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
            .collect();
        let x: Vec<f32> = (0..n_tok * cols)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 32.0)
            .collect();
        let packed = pack_strided(&w[8..], rows, cols, stride, 0.5);
        let mut out = vec![f32::NAN; (n_tok - 1) * ldo + rows];
        assert!(product_serial(packed.panels(), &x, n_tok, &mut out, ldo));
        for t in 0..n_tok {
            for r in 0..rows {
                let want: f64 = (0..cols)
                    .map(|k| 0.5 * w[8 + r * stride + k] as f64 * x[t * cols + k] as f64)
                    .sum();
                let got = out[t * ldo + r] as f64;
                assert!((got - want).abs() < 1e-3, "[{t}][{r}]: {got} vs {want}");
            }
        }
    }

    #[test]
    fn views_multiply_as_their_own_weights() {
        if !available() {
            return;
        }
        // Keys 32..77 of a 90-row weight, and columns 13..50 of a transposed 70-column one,
        // each against an explicit copy of the same part packed on its own.
        let (rows, cols, n_tok) = (90, 24, 11);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
            .collect();
        let x: Vec<f32> = (0..n_tok * 64)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 32.0)
            .collect();
        let whole = pack(&w, rows, cols);
        let part = pack(&w[32 * cols..77 * cols], 45, cols);
        let (mut a, mut b) = (vec![0f32; n_tok * 45], vec![1f32; n_tok * 45]);
        assert!(product_serial(
            whole.panels().rows(32..77),
            &x,
            n_tok,
            &mut a,
            45
        ));
        assert!(product_serial(part.panels(), &x, n_tok, &mut b, 45));
        assert_eq!(a, b);
        // Transposed: 70 rows of 40 → 40 rows of 70 columns; take columns 13..50.
        let t: Vec<f32> = (0..70 * 40)
            .map(|i| ((i * 29 % 83) as f32 - 41.0) / 50.0)
            .collect();
        let whole = pack_transposed(&t, 70, 40, 40);
        let part = pack_transposed(&t[13 * 40..50 * 40], 37, 40, 40);
        let (mut a, mut b) = (vec![0f32; n_tok * 40], vec![1f32; n_tok * 40]);
        assert!(product_serial(
            whole.panels().cols(13..50),
            &x,
            n_tok,
            &mut a,
            40
        ));
        assert!(product_serial(part.panels(), &x, n_tok, &mut b, 40));
        assert_eq!(a, b);
    }

    #[test]
    fn f16_product_matches_f64_dots() {
        if !available() {
            return;
        }
        let pool = ThreadPool::new(2);
        // Rows not a multiple of 32; tokens over two chunks and one.
        for (rows, cols, n_tok) in [(70, 48, 900), (32, 64, 5)] {
            let w: Vec<half::f16> = (0..rows * cols)
                .map(|i| half::f16::from_f32(((i * 37 % 101) as f32 - 50.0) / 64.0))
                .collect();
            let bytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
            let x: Vec<f32> = (0..n_tok * cols)
                .map(|i| ((i * 53 % 89) as f32 - 44.0) / 32.0)
                .collect();
            let mut out = vec![f32::NAN; n_tok * rows];
            assert!(product_f16(&pool, &bytes, rows, cols, &x, n_tok, &mut out));
            for t in 0..n_tok {
                for r in 0..rows {
                    let want: f64 = (0..cols)
                        .map(|k| w[r * cols + k].to_f64() * x[t * cols + k] as f64)
                        .sum();
                    let got = out[t * rows + r] as f64;
                    assert!((got - want).abs() < 1e-4, "[{t}][{r}]: {got} vs {want}");
                }
            }
        }
    }
}
