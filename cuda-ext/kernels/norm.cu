// RMSNorm and LayerNorm, one block per normalised group, sums of squares in f64 and the scale
// formed in f32 with IEEE sqrt and division, as core/src/backend/cpu/ops.rs (these feed
// quantized products, where one ulp can move a quant).

// x, out: n_groups × group; w: group values or null. Grid: n_groups; block: 32..1024 threads.
extern "C" __global__ void rms_norm_f32(const float* x, const float* w, float* out, u32 group,
                                        float eps) {
    __shared__ double scratch[32];
    const float* xs = x + (u64)blockIdx.x * group;
    float* os = out + (u64)blockIdx.x * group;
    double ss = 0.0;
    for (u32 i = threadIdx.x; i < group; i += blockDim.x) ss += (double)xs[i] * (double)xs[i];
    ss = block_sum_f64(ss, scratch);
    float scale = 1.0f / sqrtf((float)(ss / (double)group) + eps);
    for (u32 i = threadIdx.x; i < group; i += blockDim.x) {
        float v = xs[i] * scale;
        os[i] = w ? v * w[i] : v;
    }
}

// Layer normalisation of whole rows, then `* w + b` where given. Grid: rows.
extern "C" __global__ void layer_norm_f32(const float* x, const float* w, const float* b,
                                          float* out, u32 cols, float eps) {
    __shared__ double scratch[32];
    const float* xs = x + (u64)blockIdx.x * cols;
    float* os = out + (u64)blockIdx.x * cols;
    double s = 0.0;
    for (u32 i = threadIdx.x; i < cols; i += blockDim.x) s += (double)xs[i];
    s = block_sum_f64(s, scratch);
    float mean = (float)(s / (double)cols);
    double var = 0.0;
    for (u32 i = threadIdx.x; i < cols; i += blockDim.x) {
        double d = (double)(xs[i] - mean);
        var += d * d;
    }
    var = block_sum_f64(var, scratch) / (double)cols;
    float scale = 1.0f / sqrtf((float)var + eps);
    for (u32 i = threadIdx.x; i < cols; i += blockDim.x) {
        float y = (xs[i] - mean) * scale;
        if (w) y *= w[i];
        if (b) y += b[i];
        os[i] = y;
    }
}
