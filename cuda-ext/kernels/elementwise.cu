// Element-wise ops over n f32 values, one thread per element: add, mul, scale, soft-cap,
// activations (GELU by the same f16 table the CPU backend uses, SiLU, GELU-erf), the gated
// forms (GeGLU, SwiGLU) and a broadcast bias. Follows core/src/backend/cpu/ops.rs.

#define ELEMENTWISE_INDEX                                       \
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x          \
          + (u64)blockIdx.y * gridDim.x * blockDim.x;           \
    if (i >= n) return;

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }

// GELU, tanh approximation, in f32 (the table's source values).
__device__ __forceinline__ float gelu_exact_f(float x) {
    const float k = 0.7978846f;
    return 0.5f * x * (1.0f + tanhf(k * x * (1.0f + 0.044715f * x * x)));
}

// As the CPU: saturate outside ±10, else round the input to f16 and look its result up in a
// 65536-entry table of f16-rounded GELU values (uploaded by the host from the CPU's table).
__device__ __forceinline__ float gelu_f(float x, const float* table) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return table[f32_to_f16(x)];
}

extern "C" __global__ void add_f32(const float* a, const float* b, float* out, u64 n) {
    ELEMENTWISE_INDEX
    out[i] = a[i] + b[i];
}

extern "C" __global__ void mul_f32(const float* a, const float* b, float* out, u64 n) {
    ELEMENTWISE_INDEX
    out[i] = a[i] * b[i];
}

extern "C" __global__ void scale_f32(const float* x, float* out, float s, u64 n) {
    ELEMENTWISE_INDEX
    out[i] = x[i] * s;
}

extern "C" __global__ void soft_cap_f32(const float* x, float* out, float cap, u64 n) {
    ELEMENTWISE_INDEX
    out[i] = cap * tanhf(x[i] / cap);
}

extern "C" __global__ void gelu_f32(const float* x, const float* table, float* out, u64 n) {
    ELEMENTWISE_INDEX
    out[i] = gelu_f(x[i], table);
}

extern "C" __global__ void gelu_erf_f32(const float* x, float* out, u64 n) {
    ELEMENTWISE_INDEX
    float v = x[i];
    out[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f));
}

extern "C" __global__ void silu_f32(const float* x, float* out, u64 n) {
    ELEMENTWISE_INDEX
    out[i] = silu_f(x[i]);
}

extern "C" __global__ void geglu_f32(const float* gate, const float* up, const float* table,
                                     float* out, u64 n) {
    ELEMENTWISE_INDEX
    out[i] = gelu_f(gate[i], table) * up[i];
}

extern "C" __global__ void swiglu_f32(const float* gate, const float* up, float* out, u64 n) {
    ELEMENTWISE_INDEX
    out[i] = silu_f(gate[i]) * up[i];
}

// out[r][c] = x[r][c] + b[c].
extern "C" __global__ void add_bias_f32(const float* x, const float* b, float* out, u64 n,
                                        u32 cols) {
    ELEMENTWISE_INDEX
    out[i] = x[i] + b[i % cols];
}

// Copies listed rows: out[r] = x[rows[r]] (SelectRows). Grid: (ceil(cols/256), n_rows).
extern "C" __global__ void select_rows_f32(const float* x, const u32* rows, float* out,
                                           u32 cols) {
    u32 c = blockIdx.x * blockDim.x + threadIdx.x;
    u32 r = blockIdx.y;
    if (c >= cols) return;
    out[(u64)r * cols + c] = x[(u64)rows[r] * cols + c];
}
