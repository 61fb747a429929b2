// Causal attention over the KV cache, one block per (query head, step row, key split):
// tiles of blockDim keys are scored (one key per thread), folded into a running max and sum
// (online softmax) and into the thread's output dims. With one split per query this is the
// tiled prefill/decode kernel; with several (flash-decoding, for single tokens over long
// caches: launch::split_k) each split writes (max, sum, unnormalised output) to `part` and
// attention_combine merges them. GQA: query head h reads key/value head h / (n_head / n_kv).
// Sliding windows and ring buffers: query at `pos` sees positions max(0, pos+1-window)..=pos,
// position p in slot p % capacity of its sequence. Full-attention layers (window 0) read the
// shared pool through the sequence's block table (kv_slot in common.cuh).
//
// Differences from the CPU (core/src/backend/cpu/attention.rs): queries are rounded to f16 for
// an f16 cache as there, but the softmax weights are not rounded to f16 and the sums run in
// another order, so outputs differ in the last bits.
//
// Grid: (n_head, rows, splits); block: ATT_THREADS; dynamic shared memory: (hk + blockDim)
// floats. hv must be at most 4 × blockDim.

#define MAX_DIMS_PER_THREAD 4

__device__ __forceinline__ float kv_at(const void* c, u64 i, int f16) {
    return f16 ? f16_to_f32(((const u16*)c)[i]) : ((const float*)c)[i];
}

extern "C" __global__ void attention_f32(const float* q, const void* kc, const void* vc,
                                         float* out, float* part, const u32* positions,
                                         const u32* seqs, const u32* tables, u32 per_seq,
                                         u32 n_head, u32 n_kv, u32 hk, u32 hv, u32 capacity,
                                         u32 window, float scale, int f16, u32 chunk) {
    extern __shared__ float smem[];
    __shared__ float red[32];
    float* qs = smem;
    float* p = smem + hk;
    u32 h = blockIdx.x, row = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
    u32 kvh = h / (n_head / n_kv);
    u32 pos = positions[row];
    u32 first = (window != 0 && pos + 1 > window) ? pos + 1 - window : 0;
    u32 n = pos + 1 - first;
    u32 k0 = split * chunk, k1 = min(n, k0 + chunk);
    const float* qr = q + ((u64)row * n_head + h) * hk;
    for (u32 d = threadIdx.x; d < hk; d += blockDim.x)
        qs[d] = f16 ? f16_to_f32(f32_to_f16(qr[d])) : qr[d];
    __syncthreads();
    u32 seq = seqs[row];
    int paged = window == 0;
    float m = NEG_INF, l = 0.0f;
    float o[MAX_DIMS_PER_THREAD] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (u32 t0 = k0; t0 < k1; t0 += blockDim.x) {
        u32 kk = t0 + threadIdx.x;
        float s = NEG_INF;
        if (kk < k1) {
            u64 slot = kv_slot(tables, per_seq, seq, first + kk, capacity, paged);
            u64 at = (slot * n_kv + kvh) * hk;
            float acc = 0.0f;
            for (u32 d = 0; d < hk; d++) acc += qs[d] * kv_at(kc, at + d, f16);
            s = acc * scale;
        }
        float mnew = fmaxf(m, block_max(s, red));
        float e = kk < k1 ? expf(s - mnew) : 0.0f;
        p[threadIdx.x] = e;
        float tile_sum = block_sum(e, red);
        float corr = expf(m - mnew);  // 0 on the first tile (m = -inf)
        l = l * corr + tile_sum;
        for (int j = 0; j < MAX_DIMS_PER_THREAD; j++) o[j] *= corr;
        __syncthreads();
        u32 nk = min((u32)blockDim.x, k1 - t0);
        for (u32 i = 0; i < nk; i++) {
            u64 slot = kv_slot(tables, per_seq, seq, first + t0 + i, capacity, paged);
            u64 at = (slot * n_kv + kvh) * hv;
            float w = p[i];
            for (int j = 0; j < MAX_DIMS_PER_THREAD; j++) {
                u32 d = threadIdx.x + j * blockDim.x;
                if (d < hv) o[j] += w * kv_at(vc, at + d, f16);
            }
        }
        m = mnew;
        __syncthreads();
    }
    if (splits == 1) {
        float* orow = out + ((u64)row * n_head + h) * hv;
        for (int j = 0; j < MAX_DIMS_PER_THREAD; j++) {
            u32 d = threadIdx.x + j * blockDim.x;
            if (d < hv) orow[d] = o[j] / l;
        }
    } else {
        float* pr = part + (((u64)row * n_head + h) * splits + split) * (2 + hv);
        if (threadIdx.x == 0) { pr[0] = m; pr[1] = l; }
        for (int j = 0; j < MAX_DIMS_PER_THREAD; j++) {
            u32 d = threadIdx.x + j * blockDim.x;
            if (d < hv) pr[2 + d] = o[j];
        }
    }
}

// Merges the splits of attention_f32: out = Σ o_i·e^(m_i−M) / Σ l_i·e^(m_i−M), M = max m_i.
// Empty splits (past the query's keys) carry m = −inf, l = 0 and drop out. Grid: (n_head,
// rows); block: threads over hv.
extern "C" __global__ void attention_combine(const float* part, float* out, u32 n_head, u32 hv,
                                             u32 splits) {
    u32 h = blockIdx.x, row = blockIdx.y;
    const float* pr = part + ((u64)row * n_head + h) * splits * (2 + hv);
    float mx = NEG_INF;
    for (u32 s = 0; s < splits; s++) mx = fmaxf(mx, pr[s * (2 + hv)]);
    float l = 0.0f;
    for (u32 s = 0; s < splits; s++) {
        const float* ps = pr + s * (2 + hv);
        if (ps[1] > 0.0f) l += ps[1] * expf(ps[0] - mx);
    }
    float* orow = out + ((u64)row * n_head + h) * hv;
    for (u32 d = threadIdx.x; d < hv; d += blockDim.x) {
        float acc = 0.0f;
        for (u32 s = 0; s < splits; s++) {
            const float* ps = pr + s * (2 + hv);
            if (ps[1] > 0.0f) acc += ps[2 + d] * expf(ps[0] - mx);
        }
        orow[d] = acc / l;
    }
}
