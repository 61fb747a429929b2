// Rotary position embedding of every head of every row, in place on a copy (out may alias x).
// Angles are formed as the CPU backend forms them (core/src/backend/cpu/ops.rs rope_table):
// start at the position and multiply by `step` = base^(-2/n_rot) (computed on the host, so it
// has the CPU's bits) once per pair, in f32; then divide by the pair's frequency factor.
// GPU cosf/sinf may differ from the CPU's in the last ulp.
//
// Grid: rows; block: threads over (head, pair) = n_heads × n_rot/2.
extern "C" __global__ void rope_f32(const float* x, float* out, const u32* positions, u32 cols,
                                    u32 head_dim, u32 n_rot, float step, int neox,
                                    const float* freq_factors) {
    u64 row = blockIdx.x;
    u32 half = n_rot / 2, n_heads = cols / head_dim;
    const float* xr = x + row * cols;
    float* orow = out + row * cols;
    // Elements that do not rotate are copied (when out is not x).
    if (out != x) {
        for (u32 i = threadIdx.x; i < cols; i += blockDim.x) {
            if (i % head_dim >= n_rot) orow[i] = xr[i];
        }
    }
    float pos = (float)positions[row];
    for (u32 t = threadIdx.x; t < n_heads * half; t += blockDim.x) {
        u32 h = t / half, i = t % half;
        float theta = pos;
        for (u32 k = 0; k < i; k++) theta *= step;
        float th = freq_factors ? theta / freq_factors[i] : theta;
        float c = cosf(th), s = sinf(th);
        u32 a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float* hx = xr + h * head_dim;
        float x0 = hx[a], x1 = hx[b];
        orow[h * head_dim + a] = x0 * c - x1 * s;
        orow[h * head_dim + b] = x0 * s + x1 * c;
    }
}
