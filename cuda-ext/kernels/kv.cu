// KV-cache append: each row's key and value heads written at its sequence's slot for its
// position, as f16 (round to nearest even, as the CPU's convert_from_f32_slice) or f32.
// Cache layout (as the CPU's): [slots][n_kv_head · head_dim]; a full-attention layer's slots
// are the shared pool's blocks, reached through each sequence's block table (`paged`), and a
// sliding layer is a ring buffer per sequence (position p in slot p % capacity).
//
// Grid: rows; block: threads over max(wk, wv) elements.
extern "C" __global__ void kv_store(const float* k, const float* v, void* kc, void* vc,
                                    const u32* positions, const u32* seqs, const u32* tables,
                                    u32 per_seq, u32 wk, u32 wv, u32 capacity, int paged,
                                    int f16) {
    u64 row = blockIdx.x;
    u64 slot = kv_slot(tables, per_seq, seqs[row], positions[row], capacity, paged);
    for (u32 i = threadIdx.x; i < wk; i += blockDim.x) {
        float x = k[row * wk + i];
        if (f16) ((u16*)kc)[slot * wk + i] = f32_to_f16(x);
        else ((float*)kc)[slot * wk + i] = x;
    }
    for (u32 i = threadIdx.x; i < wv; i += blockDim.x) {
        float x = v[row * wv + i];
        if (f16) ((u16*)vc)[slot * wv + i] = f32_to_f16(x);
        else ((float*)vc)[slot * wv + i] = x;
    }
}
