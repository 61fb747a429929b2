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
// matmul_tiled_*: long prompts, quantized weights only: a block computes a tile of
//   TILE_ROWS weight rows × TILE_TOKS tokens, staging CHUNK elements of each weight row and
//   each activation row in shared memory per step, so a weight unit is fetched once per
//   TILE_TOKS tokens and an activation unit once per TILE_ROWS rows; grid (ceil(rows /
//   TILE_ROWS), ceil(tokens / TILE_TOKS)), TILE_THREADS threads.
//
// Every form computes each unit's dot with the same unit_dot (integer dots exact, as the CPU's)
// and differs from the CPU only in the order of the float sum over units: matvec/matmul sum a
// lane's units then the lanes by shuffles; matmul_tiled sums units in row order, one thread
// per output.

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

#define TILE_ROWS 32
#define TILE_TOKS 32
#define TILE_THREADS 128
#define CHUNK 256
// Tokens per thread: each thread owns one weight row of the tile and this many tokens.
#define TILE_TPT (TILE_ROWS * TILE_TOKS / TILE_THREADS)

// A shared-memory row stride of at least `bytes` with an odd number of 4-byte words, so the
// threads of a warp (one weight row each) read different banks.
__host__ __device__ constexpr u32 tile_stride(u32 bytes) { return ((bytes + 3) / 4 | 1) * 4; }

template <int T>
__device__ __forceinline__ void matmul_tiled(const u8* w, const u8* act, float* out, u32 rows,
                                             u32 cols, u32 tokens) {
    constexpr u32 WCH = CHUNK / Layout<T>::BLOCK * Layout<T>::BYTES;
    constexpr u32 ACH = CHUNK / Layout<T>::BLOCK * Layout<T>::ACT;
    constexpr u32 WSTR = tile_stride(WCH), ASTR = tile_stride(ACH);
    __shared__ u8 ws[TILE_ROWS * WSTR];
    __shared__ u8 as[TILE_TOKS * ASTR];
    u32 row0 = blockIdx.x * TILE_ROWS, tok0 = blockIdx.y * TILE_TOKS;
    u32 r = threadIdx.x % TILE_ROWS, tg = threadIdx.x / TILE_ROWS;
    u64 wbytes = (u64)cols / Layout<T>::BLOCK * Layout<T>::BYTES;
    u64 abytes = (u64)cols / Layout<T>::BLOCK * Layout<T>::ACT;
    u32 units = cols / UNIT;
    float acc[TILE_TPT];
    for (int j = 0; j < TILE_TPT; j++) acc[j] = 0.0f;
    for (u32 k0 = 0; k0 < cols; k0 += CHUNK) {
        // A row's last chunk may be short (32-element blocks; K-quant rows are whole chunks).
        u32 nu = min((u32)(CHUNK / UNIT), units - k0 / UNIT);
        u32 wn = nu * UNIT / Layout<T>::BLOCK * Layout<T>::BYTES;
        u32 an = nu * UNIT / Layout<T>::BLOCK * Layout<T>::ACT;
        u64 woff = (u64)k0 / Layout<T>::BLOCK * Layout<T>::BYTES;
        u64 aoff = (u64)k0 / Layout<T>::BLOCK * Layout<T>::ACT;
        __syncthreads();  // the previous chunk is no longer read
        for (u32 i = threadIdx.x; i < TILE_ROWS * wn; i += TILE_THREADS) {
            u32 rr = i / wn, b = i % wn;
            ws[rr * WSTR + b] = row0 + rr < rows ? w[(row0 + rr) * wbytes + woff + b] : 0;
        }
        for (u32 i = threadIdx.x; i < TILE_TOKS * an; i += TILE_THREADS) {
            u32 tt = i / an, b = i % an;
            as[tt * ASTR + b] = tok0 + tt < tokens ? act[(tok0 + tt) * abytes + aoff + b] : 0;
        }
        __syncthreads();
        for (u32 u = 0; u < nu; u++) {
            for (int j = 0; j < TILE_TPT; j++)
                acc[j] += unit_dot<T>(ws + r * WSTR, as + (tg * TILE_TPT + j) * ASTR, u);
        }
    }
    if (row0 + r >= rows) return;
    for (int j = 0; j < TILE_TPT; j++) {
        u32 t = tok0 + tg * TILE_TPT + j;
        if (t < tokens) out[(u64)t * rows + row0 + r] = acc[j];
    }
}

#define TILED(NAME, T)                                                                        \
    extern "C" __global__ void matmul_tiled_##NAME(const u8* w, const u8* act, float* out,    \
                                                   u32 rows, u32 cols, u32 tokens) {          \
        matmul_tiled<T>(w, act, out, rows, cols, tokens);                                     \
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

TILED(q4_0, T_Q4_0)
TILED(q4_1, T_Q4_1)
TILED(q5_0, T_Q5_0)
TILED(q5_1, T_Q5_1)
TILED(q8_0, T_Q8_0)
TILED(q4_k, T_Q4_K)
TILED(q5_k, T_Q5_K)
TILED(q6_k, T_Q6_K)
