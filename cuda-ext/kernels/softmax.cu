// Row softmax (f32 exponentials, f64 sum, as the CPU) and top-k on device (ids and values,
// best first, ties to the lower index, as core's cpu::top_k), so only k ids and values per
// row cross back to the host. Grid: rows; block: 256 threads.

extern "C" __global__ void softmax_f32(const float* x, float* out, u32 cols) {
    __shared__ float fscratch[32];
    __shared__ double dscratch[32];
    const float* xr = x + (u64)blockIdx.x * cols;
    float* orow = out + (u64)blockIdx.x * cols;
    float m = NEG_INF;
    for (u32 i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, xr[i]);
    m = block_max(m, fscratch);
    double s = 0.0;
    for (u32 i = threadIdx.x; i < cols; i += blockDim.x) {
        float e = expf(xr[i] - m);
        orow[i] = e;
        s += (double)e;
    }
    s = block_sum_f64(s, dscratch);
    float inv = (float)(1.0 / s);
    for (u32 i = threadIdx.x; i < cols; i += blockDim.x) orow[i] *= inv;
}

// Whether (v, i) comes before (bv, bi) in best-first order.
__device__ __forceinline__ bool better(float v, u32 i, float bv, u32 bi) {
    return v > bv || (v == bv && i < bi);
}

// k passes of a block-wide argmax, each over the entries after the previous pick in
// best-first order (no scratch copy of the row). NaNs are never picked. k is small (sampling's
// top-k; 1 for greedy), so k passes over a vocabulary cost less than one sort.
extern "C" __global__ void top_k_f32(const float* x, u32* ids, float* values, u32 cols, u32 k) {
    __shared__ float sv[32];
    __shared__ u32 si[32];
    const float* xr = x + (u64)blockIdx.x * cols;
    float pv = __int_as_float(0x7f800000);  // +inf: everything is after it...
    u32 pi = 0xffffffffu;                    // ...except +inf itself, handled by index
    bool first = true;
    int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    for (u32 r = 0; r < k; r++) {
        float bv = NEG_INF;
        u32 bi = 0xffffffffu;
        for (u32 i = threadIdx.x; i < cols; i += blockDim.x) {
            float v = xr[i];
            if (v != v) continue;
            bool after = first || better(pv, pi, v, i);
            if (after && (bi == 0xffffffffu || better(v, i, bv, bi))) { bv = v; bi = i; }
        }
        for (int o = WARP / 2; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(FULL_MASK, bv, o);
            u32 oi = __shfl_xor_sync(FULL_MASK, bi, o);
            if (oi != 0xffffffffu && (bi == 0xffffffffu || better(ov, oi, bv, bi))) { bv = ov; bi = oi; }
        }
        __syncthreads();
        if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
        __syncthreads();
        if (warp == 0) {
            bv = lane < nw ? sv[lane] : NEG_INF;
            bi = lane < nw ? si[lane] : 0xffffffffu;
            for (int o = WARP / 2; o > 0; o >>= 1) {
                float ov = __shfl_xor_sync(FULL_MASK, bv, o);
                u32 oi = __shfl_xor_sync(FULL_MASK, bi, o);
                if (oi != 0xffffffffu && (bi == 0xffffffffu || better(ov, oi, bv, bi))) { bv = ov; bi = oi; }
            }
            if (lane == 0) { sv[0] = bv; si[0] = bi; }
        }
        __syncthreads();
        pv = sv[0]; pi = si[0]; first = false;
        if (threadIdx.x == 0) {
            ids[(u64)blockIdx.x * k + r] = pi;
            values[(u64)blockIdx.x * k + r] = pv;
        }
    }
}
