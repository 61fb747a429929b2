//! Host-side launch arithmetic: grid shapes and work splits, kept apart from the driver calls
//! so they are unit-tested without a GPU.

/// Threads per block of the element-wise kernels.
pub const ELEMENTWISE_BLOCK: u32 = 256;

/// Largest grid x dimension we use (CUDA allows 2^31 - 1; staying at 65535 lets one formula
/// serve every dimension).
const MAX_GRID: u64 = 65_535;

/// Grid `(x, y)` covering `n` elements in blocks of `block` threads, with the kernel computing
/// `i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x` and skipping `i >= n`.
pub fn elementwise_grid(n: u64, block: u32) -> (u32, u32) {
    let blocks = n.div_ceil(block as u64).max(1);
    if blocks <= MAX_GRID {
        (blocks as u32, 1)
    } else {
        let y = blocks.div_ceil(MAX_GRID);
        (MAX_GRID as u32, y as u32)
    }
}

/// Output rows per block of the token matrix-vector products (one warp per row).
pub const MATVEC_ROWS_PER_BLOCK: u32 = 4;

/// Grid of a matrix-vector product over `rows` weight rows and `tokens` activations:
/// x = blocks of [`MATVEC_ROWS_PER_BLOCK`] rows, y = tokens.
pub fn matvec_grid(rows: usize, tokens: usize) -> (u32, u32) {
    (
        (rows as u32).div_ceil(MATVEC_ROWS_PER_BLOCK),
        tokens.max(1) as u32,
    )
}

/// Weight rows per block of the batched (prefill) products (one warp per row, as matvec).
pub const GEMM_TILE_ROWS: usize = MATVEC_ROWS_PER_BLOCK as usize;
/// Tokens per block of the batched products: `TOKS` in kernels/matvec.cu (must match).
pub const GEMM_TILE_TOKENS: usize = 8;

/// Grid of a batched product: (row tiles, token tiles).
pub fn gemm_grid(rows: usize, tokens: usize) -> (u32, u32) {
    (
        rows.div_ceil(GEMM_TILE_ROWS) as u32,
        tokens.div_ceil(GEMM_TILE_TOKENS) as u32,
    )
}

/// Whether a product with `tokens` activations takes the batched (tiled, dp4a) kernel rather
/// than one matrix-vector pass per token: from a few tokens on, the weight tile is reused.
pub fn use_gemm(tokens: usize) -> bool {
    tokens >= 4
}

/// Weight rows and tokens per block of the tiled products (`TILE_ROWS`, `TILE_TOKS` in
/// kernels/matvec.cu), and the block's threads (`TILE_THREADS`).
pub const TILE_ROWS: usize = 32;
pub const TILE_TOKS: usize = 32;
pub const TILE_THREADS: u32 = 128;

/// Which product kernel a step of `tokens` activation rows takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProductForm {
    /// `matvec_*`: one pass over the weights per token.
    Matvec,
    /// `matmul_*`: each weight unit dotted with 8 tokens held in registers.
    Batched,
    /// `matmul_tiled_*`: weight and activation tiles in shared memory (quantized weights).
    Tiled,
}

/// The product form for `tokens` rows; `quantized`: the weights are a block-quantized type
/// (the tiled kernels exist only for those: float weights stay on the batched form).
pub fn product_form(tokens: usize, quantized: bool) -> ProductForm {
    if !use_gemm(tokens) {
        ProductForm::Matvec
    } else if quantized && tokens >= TILE_TOKS {
        // From one full token tile on: below it, the batched form wastes no tile rows.
        ProductForm::Tiled
    } else {
        ProductForm::Batched
    }
}

/// Grid of a tiled product: (row tiles, token tiles).
pub fn tiled_grid(rows: usize, tokens: usize) -> (u32, u32) {
    (
        rows.div_ceil(TILE_ROWS) as u32,
        tokens.div_ceil(TILE_TOKS) as u32,
    )
}

/// The positions a query at `pos` attends: `(first, count)`, keys `first..=pos`, no further
/// back than `window` when the layer has one. The cache holds `capacity` positions; a sliding
/// layer's cache is a ring buffer (position `p` in slot `p % capacity`), so the window must fit.
pub fn attended(pos: u32, window: Option<usize>, capacity: usize) -> Result<(u32, u32), String> {
    let first = match window {
        Some(w) if (pos as usize) >= w => pos - w as u32 + 1,
        _ => 0,
    };
    let count = pos - first + 1;
    if count as usize > capacity {
        return Err(format!(
            "position {pos} attends {count} keys but the cache holds {capacity}"
        ));
    }
    Ok((first, count))
}

/// The cache slot of position `p` (ring buffer for sliding layers; `p` itself otherwise, where
/// `p < capacity` is checked by the engine).
pub fn slot(p: u32, capacity: usize) -> u32 {
    p % capacity as u32
}

/// Keys per split of the split-K (flash-decoding) attention of one query over `n_keys` keys:
/// enough splits to fill the GPU (`sms` multiprocessors, `heads` heads already in parallel),
/// none shorter than `min_chunk`. Returns (splits, keys per split).
pub fn split_k(n_keys: u32, heads: u32, sms: u32, min_chunk: u32) -> (u32, u32) {
    let want = (2 * sms).div_ceil(heads.max(1)).max(1);
    let by_len = n_keys.div_ceil(min_chunk.max(1)).max(1);
    let splits = want.min(by_len).min(64);
    let chunk = n_keys.div_ceil(splits);
    (n_keys.div_ceil(chunk.max(1)).max(1), chunk.max(1))
}

/// Threads per block of `encoder_attention_f32`.
pub const ENCODER_THREADS: u32 = 128;

/// Shared memory a block may use without opting in to more (every architecture we compile for).
const SHARED_LIMIT: usize = 48 * 1024;

/// Launch shape of `encoder_attention_f32` over spans of `(len, valid)` rows with heads of
/// `head_dim`: grid `(n_head, longest span, spans)` and the dynamic shared memory, which holds
/// the query and one score per valid key. Errors when a span is too long for one block.
pub fn encoder_attention(
    n_head: usize,
    spans: &[(u32, u32)],
    head_dim: usize,
) -> Result<((u32, u32, u32), u32), String> {
    let longest = spans.iter().map(|s| s.0).max().unwrap_or(0);
    let most_valid = spans.iter().map(|s| s.1).max().unwrap_or(0) as usize;
    let shared = (head_dim + most_valid) * 4;
    if shared > SHARED_LIMIT {
        return Err(format!(
            "a sequence of {most_valid} tokens is longer than the CUDA encoder attention holds ({})",
            SHARED_LIMIT / 4 - head_dim
        ));
    }
    if longest as u64 > MAX_GRID || spans.len() as u64 > MAX_GRID {
        return Err(format!(
            "{} sequences, the longest of {longest} rows, exceed the CUDA grid",
            spans.len()
        ));
    }
    Ok((
        (n_head as u32, longest.max(1), spans.len().max(1) as u32),
        shared as u32,
    ))
}

/// Grid of `pool_rows_f32`: blocks of `block` columns by spans.
pub fn pool_grid(cols: usize, spans: usize, block: u32) -> (u32, u32, u32) {
    ((cols as u32).div_ceil(block).max(1), spans.max(1) as u32, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoder_launches() {
        // MiniLM: 12 heads of 32, two sequences of 7 (5 valid) and 12 rows.
        let (grid, shared) = encoder_attention(12, &[(7, 5), (12, 12)], 32).unwrap();
        assert_eq!(grid, (12, 12, 2));
        assert_eq!(shared, (32 + 12) * 4);
        // 512 positions fit; a 16k-token sequence does not fit one block's scores.
        assert!(encoder_attention(12, &[(512, 512)], 64).is_ok());
        assert!(encoder_attention(12, &[(16_384, 16_384)], 64).is_err());
        assert_eq!(pool_grid(384, 3, 256), (2, 3, 1));
        assert_eq!(pool_grid(256, 1, 256), (1, 1, 1));
    }

    /// The host's tile sizes are the kernels' (a mismatch would leave tokens uncomputed).
    #[test]
    fn tile_sizes_match_the_kernel_source() {
        let src = crate::kernels::source("matvec").unwrap();
        assert!(src.contains(&format!("#define TOKS {GEMM_TILE_TOKENS}\n")));
        assert!(src.contains(&format!("#define ROWS_PER_BLOCK {MATVEC_ROWS_PER_BLOCK}\n")));
        assert!(src.contains(&format!("#define TILE_ROWS {TILE_ROWS}\n")));
        assert!(src.contains(&format!("#define TILE_TOKS {TILE_TOKS}\n")));
        assert!(src.contains(&format!("#define TILE_THREADS {TILE_THREADS}\n")));
    }

    #[test]
    fn product_forms_and_tiles() {
        use ProductForm::*;
        assert_eq!(product_form(1, true), Matvec);
        assert_eq!(product_form(3, true), Matvec);
        assert_eq!(product_form(4, true), Batched);
        assert_eq!(product_form(31, true), Batched);
        assert_eq!(product_form(32, true), Tiled);
        assert_eq!(product_form(512, true), Tiled);
        assert_eq!(product_form(512, false), Batched);
        // 896 rows × 77 tokens: 28 row tiles, 3 token tiles (the last one partly used).
        assert_eq!(tiled_grid(896, 77), (28, 3));
        let (gx, gy) = tiled_grid(151_936, 512);
        assert!(gx as usize * TILE_ROWS >= 151_936 && gy as usize * TILE_TOKS >= 512);
        // Each thread owns one row and a whole number of tokens of the tile.
        assert_eq!((TILE_ROWS * TILE_TOKS) % TILE_THREADS as usize, 0);
        assert_eq!(TILE_THREADS as usize % TILE_ROWS, 0);
    }

    #[test]
    fn elementwise_grids_cover_n() {
        assert_eq!(elementwise_grid(0, 256), (1, 1));
        assert_eq!(elementwise_grid(257, 256), (2, 1));
        let (x, y) = elementwise_grid(100_000_000, 256);
        assert!(x as u64 * y as u64 * 256 >= 100_000_000);
        assert!(x <= 65_535 && y <= 65_535);
    }

    #[test]
    fn matvec_and_gemm_grids() {
        assert_eq!(matvec_grid(896, 1), (224, 1));
        assert_eq!(matvec_grid(151_936, 3), (37_984, 3));
        assert_eq!(gemm_grid(896, 17), (224, 3));
        assert!(!use_gemm(1) && use_gemm(16));
    }

    #[test]
    fn attention_ranges_and_rings() {
        assert_eq!(attended(0, None, 8), Ok((0, 1)));
        assert_eq!(attended(7, None, 8), Ok((0, 8)));
        assert!(attended(8, None, 8).is_err());
        // Window 4 over a ring of 6: position 9 sees 6..=9, in slots 0, 1, 2, 3.
        assert_eq!(attended(9, Some(4), 6), Ok((6, 4)));
        assert_eq!(slot(9, 6), 3);
        assert_eq!(slot(6, 6), 0);
    }

    #[test]
    fn split_k_fills_the_gpu_without_tiny_chunks() {
        // One head of 4096 keys on 132 SMs: 64 splits (the cap) of 64 keys.
        assert_eq!(split_k(4096, 1, 132, 64), (64, 64));
        // 14 heads, 100 keys, min 64: 2 splits of 50.
        assert_eq!(split_k(100, 14, 132, 64), (2, 50));
        // Short contexts stay whole.
        assert_eq!(split_k(10, 14, 132, 64), (1, 10));
        // Splits × chunk covers the keys, and no split is empty.
        for n in [1u32, 63, 64, 65, 1000, 32_768] {
            let (s, c) = split_k(n, 2, 108, 32);
            assert!(s * c >= n && (s - 1) * c < n, "{n}: {s} × {c}");
        }
    }
}
