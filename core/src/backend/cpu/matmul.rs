//! Matrix products of activations with weights kept in their file format.
//!
//! Activations are quantized once per product to the weight type's dot-product partner
//! (`quant::dot::vec_dot_type`, e.g. Q8_K for K-quants, Q8_0 for Q4_0/Q5_0/Q8_0), as llama.cpp
//! does; every weight row is then dotted with every quantized activation row. Threads split the
//! weight rows; within a thread, a tile of rows is reused for all tokens of the step, so in a
//! prefill chunk each weight byte is read from memory once. For a prompt, when the CPU and
//! weight type have GEMM kernels (`quant::dot::gemm_tile`), the activations are laid out once
//! for them and each tile of rows is unpacked once for all tokens.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::attention::SyncPtr;
use super::pool::{split_range, ThreadPool};
use super::simd;
use crate::backend::{BackendError, Result};
use crate::dtype::GgmlType;
use crate::quant;
use crate::quant::dot::{GemmActs, GemmScratch};

/// Weight rows handled together (reused across all tokens while in cache).
const ROW_TILE: usize = 16;
/// Rows a thread takes at a time in a batched product on the row kernels. Each call prepares
/// its activations again and each tile is taken from a counter shared by the threads, so
/// small tiles spend their time there (16-row tiles: a tenth of a 4-sequence Qwen2.5 step).
/// Bounds: at least 8 tiles a thread, so a delayed thread's share is still taken over, and
/// 4096 outputs a tile, so a long prompt chunk's outputs stay in cache.
fn tile_rows(rows: usize, n_tok: usize, nth: usize) -> usize {
    let most = (rows / (nth * 8)).min(4096 / n_tok.max(1));
    most.clamp(ROW_TILE, 256) / ROW_TILE * ROW_TILE
}

/// Row chunks per thread in token generation (more chunks balance better; fewer stream longer).
const CHUNKS_PER_THREAD: usize = 8;
/// Largest row chunk in token generation.
const MAX_GEN_CHUNK: usize = 4096;

/// A weight as the product sees it.
pub struct WeightView<'a> {
    pub name: &'a str,
    pub ty: GgmlType,
    pub cols: usize,
    pub rows: usize,
    pub data: &'a [u8],
}

/// `out[t][r] = Σ_c x[t][c] · w[r][c]` for `n_tok` rows of `x`. `act` is scratch space.
pub fn matmul(
    pool: &ThreadPool,
    w: &WeightView,
    x: &[f32],
    n_tok: usize,
    out: &mut [f32],
    act: &mut Vec<u8>,
) -> Result<()> {
    let (cols, rows) = (w.cols, w.rows);
    debug_assert_eq!(x.len(), n_tok * cols);
    debug_assert_eq!(out.len(), n_tok * rows);
    let row_bytes =
        w.ty.bytes_for(cols as u64)
            .ok_or_else(|| bad(w, "row is not whole blocks"))? as usize;
    if w.data.len() < row_bytes * rows {
        return Err(bad(w, "data is shorter than its shape"));
    }
    let out_ptr = SyncPtr(out.as_mut_ptr());
    let nth = pool.n_threads();
    let tiles = rows.div_ceil(ROW_TILE);

    if w.ty == GgmlType::F32 {
        let wf: &[f32] = bytemuck::try_cast_slice(&w.data[..row_bytes * rows])
            .map_err(|_| bad(w, "f32 data is not 4-byte aligned"))?;
        pool.run(&|tid| {
            let out_ptr = &out_ptr;
            for tile in split_range(tiles, nth, tid) {
                let r0 = tile * ROW_TILE;
                let r1 = (r0 + ROW_TILE).min(rows);
                pool.count_weight_bytes((r1 - r0) * row_bytes);
                for t in 0..n_tok {
                    let xt = &x[t * cols..(t + 1) * cols];
                    for r in r0..r1 {
                        let v = simd::dot(&wf[r * cols..(r + 1) * cols], xt);
                        // SAFETY: each (t, r) is written by exactly one thread.
                        unsafe { *out_ptr.0.add(t * rows + r) = v };
                    }
                }
            }
        });
        return Ok(());
    }

    match dot_partner(w.ty).filter(|_| !f32_activations()) {
        Some(vdt) => quantized(pool, w, x, n_tok, out, act, vdt, row_bytes),
        None => dequantized(pool, w, x, n_tok, out, row_bytes),
    }
}

/// Whether `WEFT_DOT_KERNELS=f32` asks for unquantized activations (weights dequantized to f32
/// and dotted with f32 activations; slow). A diagnostic: it removes the 8-bit rounding of
/// activations, so comparing its logits with the default path's measures that noise.
fn f32_activations() -> bool {
    static F32: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *F32.get_or_init(|| std::env::var("WEFT_DOT_KERNELS").is_ok_and(|v| v == "f32"))
}

/// The activation type `w`'s rows are dotted with, when a quantized dot product exists.
fn dot_partner(ty: GgmlType) -> Option<GgmlType> {
    let vdt = quant::dot::vec_dot_type(ty);
    (quant::dot::supports_vec_dot(ty) && quant::can_quantize(vdt)).then_some(vdt)
}

/// Quantizes the activations once, then dots quantized rows with quantized activations.
#[allow(clippy::too_many_arguments)]
fn quantized(
    pool: &ThreadPool,
    w: &WeightView,
    x: &[f32],
    n_tok: usize,
    out: &mut [f32],
    act: &mut Vec<u8>,
    vdt: GgmlType,
    row_bytes: usize,
) -> Result<()> {
    let (cols, rows) = (w.cols, w.rows);
    let nth = pool.n_threads();
    let tile_rows = tile_rows(rows, n_tok, nth);
    let tiles = rows.div_ceil(tile_rows);
    let out_ptr = SyncPtr(out.as_mut_ptr());
    let act_row =
        vdt.bytes_for(cols as u64)
            .ok_or_else(|| bad(w, "row does not fit the activation block size"))? as usize;
    act.clear();
    act.resize(act_row * n_tok, 0);
    if n_tok == 1 {
        // One row: quantizing it takes less than waking the other threads would.
        quant::dot::quantize_activation_to(vdt, x, act)
            .map_err(|e| bad(w, &format!("cannot quantize activations to {vdt}: {e}")))?;
    } else {
        // Quantize the activations (rows split across threads for a prefill chunk).
        let errors = std::sync::Mutex::new(None);
        let act_ptr = SyncBytes(act.as_mut_ptr());
        pool.run(&|tid| {
            let act_ptr = &act_ptr;
            for t in split_range(n_tok, nth, tid) {
                // SAFETY: each thread quantizes its own disjoint rows of `act`.
                let dst =
                    unsafe { std::slice::from_raw_parts_mut(act_ptr.0.add(t * act_row), act_row) };
                if let Err(e) =
                    quant::dot::quantize_activation_to(vdt, &x[t * cols..(t + 1) * cols], dst)
                {
                    *errors.lock().unwrap() = Some(format!("{e}"));
                }
            }
        });
        if let Some(e) = errors.into_inner().unwrap() {
            return Err(bad(
                w,
                &format!("cannot quantize activations to {vdt}: {e}"),
            ));
        }
    }
    let act: &[u8] = act;
    // Threads take chunks of rows from a shared counter rather than fixed halves: when one
    // thread is delayed (the cores are shared with other processes) the others take over its
    // remaining chunks instead of waiting for it at the end of the product.
    let next = AtomicUsize::new(0);
    if n_tok == 1 {
        let mut outs = [out];
        generate(pool, std::slice::from_ref(w), act, &mut outs);
        return Ok(());
    }
    if gemm(pool, w, act, n_tok, &out_ptr, row_bytes) {
        return Ok(());
    }
    pool.run(&|_| {
        let out_ptr = &out_ptr;
        let mut tile_out = Vec::new();
        loop {
            let tile = next.fetch_add(1, Ordering::Relaxed);
            if tile >= tiles {
                break;
            }
            let r0 = tile * tile_rows;
            let r1 = (r0 + tile_rows).min(rows);
            tile_out.resize((r1 - r0) * n_tok, 0f32);
            let wr = &w.data[r0 * row_bytes..r1 * row_bytes];
            pool.count_weight_bytes(wr.len());
            quant::dot::vec_dot_tile(w.ty, wr, act, cols, n_tok, &mut tile_out);
            // Token-major copy: each token's outputs of the tile are contiguous in `out`
            // (one cache line for 16 rows), rather than one strided store per value.
            for t in 0..n_tok {
                // SAFETY: each (t, r) is written by exactly one thread.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(out_ptr.0.add(t * rows + r0), r1 - r0)
                };
                for (k, d) in dst.iter_mut().enumerate() {
                    *d = tile_out[k * n_tok + t];
                }
            }
        }
    });
    Ok(())
}

thread_local! {
    /// The activations of the current product laid out for the GEMM kernels (kept by the
    /// calling thread so the buffer is reused from one product to the next).
    static GEMM_ACTS: RefCell<GemmActs> = RefCell::new(GemmActs::new());
    /// Each thread's unpacked weight tile.
    static GEMM_SCRATCH: RefCell<GemmScratch> = RefCell::new(GemmScratch::new());
}

/// Prompt processing with the GEMM kernels (`quant::dot::gemm_tile`: weight tiles unpacked
/// once, then all tokens), when this CPU and weight type have them; returns false otherwise.
/// Same bits as the `vec_dot_tile` path.
fn gemm(
    pool: &ThreadPool,
    w: &WeightView,
    act: &[u8],
    n_tok: usize,
    out_ptr: &SyncPtr,
    row_bytes: usize,
) -> bool {
    let (cols, rows) = (w.cols, w.rows);
    GEMM_ACTS.with_borrow_mut(|acts| {
        if !acts.prepare(w.ty, act, cols, n_tok) {
            return false;
        }
        let acts: &GemmActs = acts;
        let tile_rows = acts.tile_rows();
        let tiles = rows.div_ceil(tile_rows);
        let next = AtomicUsize::new(0);
        pool.run(&|_| {
            GEMM_SCRATCH.with_borrow_mut(|scratch| {
                let mut tile_out = Vec::new();
                loop {
                    let tile = next.fetch_add(1, Ordering::Relaxed);
                    if tile >= tiles {
                        break;
                    }
                    let r0 = tile * tile_rows;
                    let r1 = (r0 + tile_rows).min(rows);
                    tile_out.resize((r1 - r0) * n_tok, 0f32);
                    let wr = &w.data[r0 * row_bytes..r1 * row_bytes];
                    pool.count_weight_bytes(wr.len());
                    quant::dot::gemm_tile(acts, wr, scratch, &mut tile_out);
                    for t in 0..n_tok {
                        // SAFETY: each (t, r) is written by exactly one thread.
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(out_ptr.0.add(t * rows + r0), r1 - r0)
                        };
                        for (k, d) in dst.iter_mut().enumerate() {
                            *d = tile_out[k * n_tok + t];
                        }
                    }
                }
            })
        });
        true
    })
}

/// The activation type a product with `w` quantizes its input to, when it takes the
/// quantized path (products with the same key can share one quantized activation row).
pub fn quantized_partner(w: &WeightView) -> Option<GgmlType> {
    if w.ty == GgmlType::F32 || f32_activations() {
        return None;
    }
    dot_partner(w.ty)
}

/// Token generation of several products of the same one-row input `x` (a layer's query, key
/// and value projections; the gate and up projections): the row is quantized once and one
/// pool job takes the row chunks of all the weights, so the threads meet once instead of
/// once per weight. Every weight must have [`quantized_partner`] `Some`, the same for all,
/// and `x.len()` columns; `outs[i]` receives `ws[i].rows` values.
pub fn matvec_many(
    pool: &ThreadPool,
    ws: &[WeightView],
    x: &[f32],
    outs: &mut [&mut [f32]],
    act: &mut Vec<u8>,
) -> Result<()> {
    let Some(first) = ws.first() else {
        return Ok(());
    };
    let vdt = quantized_partner(first).ok_or_else(|| bad(first, "no quantized product"))?;
    for (w, out) in ws.iter().zip(outs.iter()) {
        let row_bytes =
            w.ty.bytes_for(w.cols as u64)
                .ok_or_else(|| bad(w, "row is not whole blocks"))? as usize;
        if w.data.len() < row_bytes * w.rows {
            return Err(bad(w, "data is shorter than its shape"));
        }
        if quantized_partner(w) != Some(vdt) || w.cols != x.len() || out.len() != w.rows {
            return Err(bad(w, "does not fit the grouped product"));
        }
    }
    let act_row = vdt
        .bytes_for(x.len() as u64)
        .ok_or_else(|| bad(first, "row does not fit the activation block size"))?
        as usize;
    act.clear();
    act.resize(act_row, 0);
    // One row: quantizing it takes less than waking the other threads would.
    quant::dot::quantize_activation_to(vdt, x, act)
        .map_err(|e| bad(first, &format!("cannot quantize activations to {vdt}: {e}")))?;
    generate(pool, ws, act, outs);
    Ok(())
}

/// Token generation: each weight's rows in contiguous chunks (each dotted in one call: one
/// check and dispatch, rows streamed in order), all chunks of all weights taken from one
/// shared counter, so a delayed thread's share is taken over by the others. `act` is the
/// quantized activation row; lengths were checked by the callers.
fn generate(pool: &ThreadPool, ws: &[WeightView], act: &[u8], outs: &mut [&mut [f32]]) {
    let nth = pool.n_threads();
    // (weight, first row, end row)
    let mut chunks = Vec::new();
    for (i, w) in ws.iter().enumerate() {
        let chunk = (w.rows / (nth * CHUNKS_PER_THREAD)).clamp(ROW_TILE, MAX_GEN_CHUNK);
        let chunk = chunk.next_multiple_of(ROW_TILE);
        chunks.extend(
            (0..w.rows)
                .step_by(chunk)
                .map(|r| (i, r, (r + chunk).min(w.rows))),
        );
    }
    let out_ptrs: Vec<SyncPtr> = outs.iter_mut().map(|o| SyncPtr(o.as_mut_ptr())).collect();
    let next = AtomicUsize::new(0);
    let run = |_| {
        while let Some(&(i, r0, r1)) = chunks.get(next.fetch_add(1, Ordering::Relaxed)) {
            let w = &ws[i];
            let row_bytes = w.ty.bytes_for(w.cols as u64).unwrap_or(0) as usize;
            // SAFETY: chunks are disjoint parts of the outputs, each taken by one thread.
            let dst = unsafe { std::slice::from_raw_parts_mut(out_ptrs[i].0.add(r0), r1 - r0) };
            pool.count_weight_bytes((r1 - r0) * row_bytes);
            quant::dot::vec_dot_tile(
                w.ty,
                &w.data[r0 * row_bytes..r1 * row_bytes],
                act,
                w.cols,
                1,
                dst,
            );
        }
    };
    if chunks.len() == 1 {
        // Too small to share: not worth waking the other threads.
        run(0);
    } else {
        pool.run(&run);
    }
}

/// For weight types without a quantized dot product: dequantize a tile of rows to f32 and
/// dot it with the f32 activations (slower, but any type `quant::dequantize` reads works).
fn dequantized(
    pool: &ThreadPool,
    w: &WeightView,
    x: &[f32],
    n_tok: usize,
    out: &mut [f32],
    row_bytes: usize,
) -> Result<()> {
    let (cols, rows) = (w.cols, w.rows);
    if !quant::is_supported(w.ty) {
        return Err(bad(w, "this weight type is not supported"));
    }
    let nth = pool.n_threads();
    let tiles = rows.div_ceil(ROW_TILE);
    let out_ptr = SyncPtr(out.as_mut_ptr());
    pool.run(&|tid| {
        let out_ptr = &out_ptr;
        let mut tile_f32 = vec![0f32; ROW_TILE * cols];
        for tile in split_range(tiles, nth, tid) {
            let r0 = tile * ROW_TILE;
            let r1 = (r0 + ROW_TILE).min(rows);
            pool.count_weight_bytes((r1 - r0) * row_bytes);
            for r in r0..r1 {
                let dst = &mut tile_f32[(r - r0) * cols..(r - r0 + 1) * cols];
                // Cannot fail: the type is supported and the row length was checked.
                let _ = quant::dequantize(w.ty, &w.data[r * row_bytes..(r + 1) * row_bytes], dst);
            }
            for t in 0..n_tok {
                let xt = &x[t * cols..(t + 1) * cols];
                for r in r0..r1 {
                    let v = simd::dot(&tile_f32[(r - r0) * cols..(r - r0 + 1) * cols], xt);
                    // SAFETY: each (t, r) is written by exactly one thread.
                    unsafe { *out_ptr.0.add(t * rows + r) = v };
                }
            }
        }
    });
    Ok(())
}

/// Dequantizes rows `ids` of an embedding table into `out` (one row of `cols` per id), scaled.
pub fn embed(w: &WeightView, ids: &[u32], scale: f32, out: &mut [f32]) -> Result<()> {
    let row_bytes =
        w.ty.bytes_for(w.cols as u64)
            .ok_or_else(|| bad(w, "row is not whole blocks"))? as usize;
    for (i, &id) in ids.iter().enumerate() {
        let id = id as usize;
        if id >= w.rows {
            return Err(BackendError::InvalidStep(format!(
                "token id {id} is outside the vocabulary ({} entries)",
                w.rows
            )));
        }
        let src = w
            .data
            .get(id * row_bytes..(id + 1) * row_bytes)
            .ok_or_else(|| bad(w, "data is shorter than its shape"))?;
        let dst = &mut out[i * w.cols..(i + 1) * w.cols];
        quant::dequantize(w.ty, src, dst).map_err(|e| bad(w, &format!("{e}")))?;
        if scale != 1.0 {
            dst.iter_mut().for_each(|v| *v *= scale);
        }
    }
    Ok(())
}

/// Reads a small f32-convertible tensor (norm weights, biases) into a vector.
pub fn to_f32_vec(w: &WeightView) -> Result<Vec<f32>> {
    let mut v = vec![0f32; w.cols * w.rows];
    quant::dequantize(w.ty, w.data, &mut v).map_err(|e| bad(w, &format!("{e}")))?;
    Ok(v)
}

fn bad(w: &WeightView, message: &str) -> BackendError {
    BackendError::BadTensor {
        name: w.name.to_string(),
        message: format!("{message} ({} {}×{})", w.ty, w.rows, w.cols),
    }
}

struct SyncBytes(*mut u8);
unsafe impl Sync for SyncBytes {}
