// Encoder (BERT-style embedding model) ops: bidirectional attention within each sequence of a
// step, without a cache, and pooling of a sequence's rows into one, following
// core/src/backend/cpu/encoder.rs.
//
// Spans: `spans` holds (start, len, valid) per sequence; rows start..start+len belong to it,
// the first `valid` of them real tokens (the rest padding: never attended to nor pooled).

// Attention of one query row and head over its span's valid keys, as the CPU: scores
// s_j = scale·(q·k_j), p = softmax(s) formed whole (max, exp, sum, then each weight times
// 1/sum), out = Σ_j p_j·v_j. The scores live in shared memory, so a span may hold as many
// valid rows as launch::encoder_attention allows. The dot products and the sum run in another
// order than the CPU's, so outputs differ in the last bits.
//
// q: rows × n_head·hd; k, v: rows × n_kv·hd. Grid: (n_head, longest span, spans); block:
// ENC_THREADS; dynamic shared memory: (hd + longest valid) floats.
extern "C" __global__ void encoder_attention_f32(const float* q, const float* k, const float* v,
                                                 float* out, const u32* spans, u32 n_head,
                                                 u32 n_kv, u32 hd, float scale) {
    extern __shared__ float smem[];
    __shared__ float red[32];
    u32 h = blockIdx.x, i = blockIdx.y, sp = blockIdx.z;
    u32 start = spans[3 * sp], len = spans[3 * sp + 1], valid = spans[3 * sp + 2];
    if (i >= len) return;  // the whole block leaves together: no barrier is skipped
    u32 row = start + i;
    u32 kvh = h / (n_head / n_kv);
    u64 qw = (u64)n_head * hd, kw = (u64)n_kv * hd;
    float* qs = smem;
    float* sc = smem + hd;
    const float* qr = q + row * qw + (u64)h * hd;
    for (u32 d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = qr[d];
    __syncthreads();
    float mx = NEG_INF;
    for (u32 j = threadIdx.x; j < valid; j += blockDim.x) {
        const float* kr = k + (u64)(start + j) * kw + (u64)kvh * hd;
        float acc = 0.0f;
        for (u32 d = 0; d < hd; d++) acc += qs[d] * kr[d];
        float s = acc * scale;
        sc[j] = s;
        mx = fmaxf(mx, s);
    }
    mx = block_max(mx, red);
    float sum = 0.0f;
    for (u32 j = threadIdx.x; j < valid; j += blockDim.x) {
        float e = expf(sc[j] - mx);
        sc[j] = e;
        sum += e;
    }
    sum = block_sum(sum, red);
    float inv = 1.0f / sum;
    __syncthreads();
    float* orow = out + row * qw + (u64)h * hd;
    for (u32 d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (u32 j = 0; j < valid; j++)
            acc += (sc[j] * inv) * v[(u64)(start + j) * kw + (u64)kvh * hd + d];
        orow[d] = acc;
    }
}

// One row per span of x (cols wide): mode 0 the mean of its valid rows (summed in row order,
// then times 1/valid, as the CPU: bit-identical), 1 the first row, 2 the last valid row.
// Grid: (ceil(cols / blockDim), spans).
extern "C" __global__ void pool_rows_f32(const float* x, float* out, const u32* spans, u32 cols,
                                         int mode) {
    u32 c = blockIdx.x * blockDim.x + threadIdx.x, sp = blockIdx.y;
    if (c >= cols) return;
    u32 start = spans[3 * sp], valid = spans[3 * sp + 2];
    float r;
    if (mode == 1) {
        r = x[(u64)start * cols + c];
    } else if (mode == 2) {
        r = x[(u64)(start + valid - 1) * cols + c];
    } else {
        float acc = 0.0f;
        for (u32 j = 0; j < valid; j++) acc += x[(u64)(start + j) * cols + c];
        r = acc * (1.0f / (float)valid);
    }
    out[(u64)sp * cols + c] = r;
}
