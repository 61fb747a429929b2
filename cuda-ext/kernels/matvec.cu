// Fused dequantize-and-multiply products `out[t][r] = Σ_c w[r][c] · x[t][c]` with the weights in
// their file format (quant.cuh's unit dots) and the activations already quantized to the
// weight type's vec-dot type (or f32 for float weights).
//
// matvec_*: one warp per weight row, lanes striding over the row's 32-element units, the lane
//   sums reduced by shuffles; grid (ceil(rows / 4), tokens), 128 threads. For decode (a token
//   per sequence), so every weight byte is read once per token.
// matmul_*: the batched (prefill) form: each warp keeps TOKS accumulators and dots each weight
//   unit with TOKS activation rows, so a weight unit is fetched once per TOKS tokens (the int8
//   dots are dp4a); grid (ceil(rows / 4), ceil(tokens / TOKS)), 128 threads.

#define ROWS_PER_BLOCK 4
#define TOKS 8

template <int T>
__device__ __forceinline__ void matvec(const u8* w, const u8* act, float* out, u32 rows,
                                       u32 cols) {
    u32 row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= rows) return;  // whole warps leave together, so the shuffles stay full
    u64 tok = blockIdx.y;
    u64 wbytes = (u64)cols / Layout<T>::BLOCK * Layout<T>::BYTES;
    u64 abytes = (u64)cols / (Layout<T>::ACT == 4 ? 1 : Layout<T>::BLOCK) * Layout<T>::ACT;
    const u8* wr = w + row * wbytes;
    const u8* ar = act + tok * abytes;
    u32 units = cols / UNIT;
    float acc = 0.0f;
    for (u32 u = lane; u < units; u += WARP) acc += unit_dot<T>(wr, ar, u);
    acc = warp_sum(acc);
    if (lane == 0) out[tok * rows + row] = acc;
}

template <int T>
__device__ __forceinline__ void matmul(const u8* w, const u8* act, float* out, u32 rows,
                                       u32 cols, u32 tokens) {
    u32 row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= rows) return;
    u32 t0 = blockIdx.y * TOKS;
    u32 nt = min(TOKS, tokens - t0);
    u64 wbytes = (u64)cols / Layout<T>::BLOCK * Layout<T>::BYTES;
    u64 abytes = (u64)cols / (Layout<T>::ACT == 4 ? 1 : Layout<T>::BLOCK) * Layout<T>::ACT;
    const u8* wr = w + row * wbytes;
    float acc[TOKS];
    for (int t = 0; t < TOKS; t++) acc[t] = 0.0f;
    u32 units = cols / UNIT;
    for (u32 u = lane; u < units; u += WARP) {
        for (u32 t = 0; t < nt; t++) acc[t] += unit_dot<T>(wr, act + (t0 + t) * abytes, u);
    }
    for (u32 t = 0; t < nt; t++) {
        float s = warp_sum(acc[t]);
        if (lane == 0) out[(u64)(t0 + t) * rows + row] = s;
    }
}

#define PRODUCTS(NAME, T)                                                                     \
    extern "C" __global__ void matvec_##NAME(const u8* w, const u8* act, float* out, u32 rows, \
                                             u32 cols) {                                      \
        matvec<T>(w, act, out, rows, cols);                                                   \
    }                                                                                         \
    extern "C" __global__ void matmul_##NAME(const u8* w, const u8* act, float* out, u32 rows, \
                                             u32 cols, u32 tokens) {                          \
        matmul<T>(w, act, out, rows, cols, tokens);                                           \
    }

PRODUCTS(f32, T_F32)
PRODUCTS(f16, T_F16)
PRODUCTS(bf16, T_BF16)
PRODUCTS(q4_0, T_Q4_0)
PRODUCTS(q4_1, T_Q4_1)
PRODUCTS(q5_0, T_Q5_0)
PRODUCTS(q5_1, T_Q5_1)
PRODUCTS(q8_0, T_Q8_0)
PRODUCTS(q4_k, T_Q4_K)
PRODUCTS(q5_k, T_Q5_K)
PRODUCTS(q6_k, T_Q6_K)
