// Embedding lookup: rows of a (possibly quantized) table, dequantized as core/src/quant/ does,
// picked per step row by token id (Embed, times `scale`), by position (EmbedRows Positions) or
// a fixed row (EmbedRows Fixed). Grid: rows; block: threads over cols.
extern "C" __global__ void embed_rows(const u8* table, int ty, u32 cols, u32 n_rows_table,
                                      const u32* tokens, const u32* positions, int mode,
                                      u32 fixed, float scale, float* out) {
    u64 r = blockIdx.x;
    u32 id = mode == 0 ? tokens[r] : mode == 1 ? positions[r] : fixed;
    float* orow = out + r * cols;
    if (id >= n_rows_table) {
        // An out-of-range id reads nothing (the host checks ids; this keeps a bad one in bounds).
        for (u32 c = threadIdx.x; c < cols; c += blockDim.x) orow[c] = 0.0f;
        return;
    }
    const u8* row = table + (u64)id * row_bytes(ty, cols);
    for (u32 c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = dequant_at(ty, row, c);
        orow[c] = mode == 0 ? v * scale : v;
    }
}
