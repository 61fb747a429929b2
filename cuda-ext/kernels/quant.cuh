// Weight block layouts (core/src/quant/) and activation quantization, shared by the product
// and embedding families. As the CPU backend (core/src/quant/dot/), an activation row is
// quantized once to its weight type's "vec-dot type" — Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for
// Q4_1/Q5_1, Q8_K for the K-quants, none (f32) for F32/F16/BF16 — with the same byte layout
// (Q8_0 34 B, Q8_1 36 B, Q8_K 292 B per block), and each block's integer dot is exact; only the
// order of the float sums over blocks differs from the CPU's.

// GgmlType numbers (core/src/dtype.rs).
#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q8_0 8
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14
#define T_BF16 30

// ---- activation quantization (one warp per block) ------------------------------------------

// Quantizes 32 values per warp: lane l holds x[l]. Returns this lane's quant; `amax_out` gets
// the block's largest magnitude and `sum_out` the sum of its quants.
__device__ __forceinline__ int quant32(float v, float* amax_out, int* sum_out) {
    float amax = warp_max(fabsf(v));
    float id = amax == 0.0f ? 0.0f : 127.0f / amax;
    float r = fminf(fmaxf(rintf(v * id), -127.0f), 127.0f);
    int q = (int)r;
    *amax_out = amax;
    *sum_out = warp_sum_i32(q);
    return q;
}

// Q8_0 rows: x is rows × cols f32, out rows × (cols/32) blocks of 34 bytes. Grid: (blocks of
// 4 warps over a row's blocks, rows); block 128 threads.
extern "C" __global__ void quantize_q8_0(const float* x, u8* out, u32 cols) {
    u32 nb = cols / 32, b = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (b >= nb) return;
    u64 row = blockIdx.y;
    float amax; int sum;
    int q = quant32(x[row * cols + b * 32 + lane], &amax, &sum);
    u8* o = out + (row * nb + b) * 34;
    o[2 + lane] = (u8)(i8)q;
    if (lane == 0) { u32 d = f32_to_f16_bits(amax / 127.0f); o[0] = d & 0xff; o[1] = d >> 8; }
}

// Q8_1 rows: as Q8_0 plus d·Σq as f16 (the min term of Q4_1/Q5_1); 36-byte blocks.
extern "C" __global__ void quantize_q8_1(const float* x, u8* out, u32 cols) {
    u32 nb = cols / 32, b = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (b >= nb) return;
    u64 row = blockIdx.y;
    float amax; int sum;
    int q = quant32(x[row * cols + b * 32 + lane], &amax, &sum);
    u8* o = out + (row * nb + b) * 36;
    o[4 + lane] = (u8)(i8)q;
    if (lane == 0) {
        float d = amax / 127.0f;
        u32 dh = f32_to_f16_bits(d), sh = f32_to_f16_bits(d * (float)sum);
        o[0] = dh & 0xff; o[1] = dh >> 8; o[2] = sh & 0xff; o[3] = sh >> 8;
    }
}

// Q8_K rows: 256-value blocks (f32 scale 1/iscale, 256 quants, 16 i16 sums of 16 quants), one
// warp per block, lane l quantizing values 8l..8l+7. Grid: (blocks of 4 warps, rows).
extern "C" __global__ void quantize_q8_k(const float* x, u8* out, u32 cols) {
    u32 nb = cols / 256, b = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (b >= nb) return;
    u64 row = blockIdx.y;
    const float* xb = x + row * cols + b * 256 + lane * 8;
    float v[8], m = 0.0f;
    for (int k = 0; k < 8; k++) { v[k] = xb[k]; m = fmaxf(m, fabsf(v[k])); }
    float amax = warp_max(m);
    float iscale = amax == 0.0f ? 0.0f : 127.0f / amax;
    u8* o = out + (row * nb + b) * 292;
    int s = 0;
    for (int k = 0; k < 8; k++) {
        int q = (int)fminf(fmaxf(rintf(v[k] * iscale), -127.0f), 127.0f);
        s += q;
        o[4 + lane * 8 + k] = (u8)(i8)q;
    }
    // Group g of 16 quants is lanes 2g and 2g+1.
    int pair = s + __shfl_xor_sync(FULL_MASK, s, 1);
    if ((lane & 1) == 0) {
        u32 g = lane / 2;
        u16 bs = (u16)(short)pair;
        o[260 + 2 * g] = bs & 0xff; o[261 + 2 * g] = bs >> 8;
    }
    if (lane == 0) {
        float d = iscale == 0.0f ? 0.0f : 1.0f / iscale;
        u32 bits = __float_as_uint(d);
        o[0] = bits & 0xff; o[1] = (bits >> 8) & 0xff; o[2] = (bits >> 16) & 0xff; o[3] = bits >> 24;
    }
}

// ---- per-type constants ---------------------------------------------------------------------

// Elements per "unit", the piece of a row one lane dots at a time: a 32-element block for the
// legacy and float types, a 32-element sub-block of a 256-element super-block for K-quants.
#define UNIT 32

template <int T> struct Layout;
template <> struct Layout<T_F32>  { enum { BLOCK = 1,   BYTES = 4,   ACT = 4 }; };
template <> struct Layout<T_F16>  { enum { BLOCK = 1,   BYTES = 2,   ACT = 4 }; };
template <> struct Layout<T_BF16> { enum { BLOCK = 1,   BYTES = 2,   ACT = 4 }; };
template <> struct Layout<T_Q4_0> { enum { BLOCK = 32,  BYTES = 18,  ACT = 34 }; };
template <> struct Layout<T_Q4_1> { enum { BLOCK = 32,  BYTES = 20,  ACT = 36 }; };
template <> struct Layout<T_Q5_0> { enum { BLOCK = 32,  BYTES = 22,  ACT = 34 }; };
template <> struct Layout<T_Q5_1> { enum { BLOCK = 32,  BYTES = 24,  ACT = 36 }; };
template <> struct Layout<T_Q8_0> { enum { BLOCK = 32,  BYTES = 34,  ACT = 34 }; };
template <> struct Layout<T_Q4_K> { enum { BLOCK = 256, BYTES = 144, ACT = 292 }; };
template <> struct Layout<T_Q5_K> { enum { BLOCK = 256, BYTES = 176, ACT = 292 }; };
template <> struct Layout<T_Q6_K> { enum { BLOCK = 256, BYTES = 210, ACT = 292 }; };

// ---- integer helpers ------------------------------------------------------------------------

// Four signed activation quants at byte offset p, packed for dp4a.
__device__ __forceinline__ int act4(const u8* p) { return (int)load_u32(p); }

// Σ (nibble + offset) · a over a 32-element block whose low nibbles are elements 0..15 and high
// nibbles 16..31 (Q4_0/Q4_1 order), with 5th bits from `qh` (0 for 4-bit types).
__device__ __forceinline__ int nibble_block_dot(const u8* qs, u32 qh, const u8* a, int offset) {
    int s = 0, asum = 0;
    for (int j = 0; j < 16; j += 4) {
        u32 w = load_u32(qs + j);
        u32 lo = w & 0x0f0f0f0fu, hi = (w >> 4) & 0x0f0f0f0fu;
        // Fifth bits of elements j..j+3 (bits j..j+3 of qh) and j+16..j+19, moved to bit 4 of
        // each byte.
        u32 h_lo = 0, h_hi = 0;
        for (int k = 0; k < 4; k++) {
            h_lo |= ((qh >> (j + k)) & 1u) << (8 * k + 4);
            h_hi |= ((qh >> (j + 16 + k)) & 1u) << (8 * k + 4);
        }
        int a_lo = act4(a + j), a_hi = act4(a + 16 + j);
        s = dot4((int)(lo | h_lo), a_lo, s);
        s = dot4((int)(hi | h_hi), a_hi, s);
        asum = dot4(0x01010101, a_lo, asum);
        asum = dot4(0x01010101, a_hi, asum);
    }
    return s + offset * asum;
}

// ---- unit dots: one 32-element unit `u` of a weight row with the matching activation ----------

template <int T> __device__ __forceinline__ float unit_dot(const u8* w, const u8* a, u32 u);

template <> __device__ __forceinline__ float unit_dot<T_F32>(const u8* w, const u8* a, u32 u) {
    const float* x = (const float*)a + u * 32;
    float s = 0.0f;
    for (int k = 0; k < 32; k++) s += __uint_as_float(load_u32(w + (u * 32 + k) * 4)) * x[k];
    return s;
}
template <> __device__ __forceinline__ float unit_dot<T_F16>(const u8* w, const u8* a, u32 u) {
    const float* x = (const float*)a + u * 32;
    float s = 0.0f;
    for (int k = 0; k < 32; k++) s += load_f16(w + (u * 32 + k) * 2) * x[k];
    return s;
}
template <> __device__ __forceinline__ float unit_dot<T_BF16>(const u8* w, const u8* a, u32 u) {
    const float* x = (const float*)a + u * 32;
    float s = 0.0f;
    for (int k = 0; k < 32; k++) s += bf16_to_f32(load_u16(w + (u * 32 + k) * 2)) * x[k];
    return s;
}
template <> __device__ __forceinline__ float unit_dot<T_Q4_0>(const u8* w, const u8* a, u32 u) {
    const u8* bw = w + u * 18; const u8* ba = a + u * 34;
    int s = nibble_block_dot(bw + 2, 0, ba + 2, -8);
    return load_f16(bw) * load_f16(ba) * (float)s;
}
template <> __device__ __forceinline__ float unit_dot<T_Q4_1>(const u8* w, const u8* a, u32 u) {
    const u8* bw = w + u * 20; const u8* ba = a + u * 36;
    int s = nibble_block_dot(bw + 4, 0, ba + 4, 0);
    return load_f16(bw) * load_f16(ba) * (float)s + load_f16(bw + 2) * load_f16(ba + 2);
}
template <> __device__ __forceinline__ float unit_dot<T_Q5_0>(const u8* w, const u8* a, u32 u) {
    const u8* bw = w + u * 22; const u8* ba = a + u * 34;
    int s = nibble_block_dot(bw + 6, load_u32(bw + 2), ba + 2, -16);
    return load_f16(bw) * load_f16(ba) * (float)s;
}
template <> __device__ __forceinline__ float unit_dot<T_Q5_1>(const u8* w, const u8* a, u32 u) {
    const u8* bw = w + u * 24; const u8* ba = a + u * 36;
    int s = nibble_block_dot(bw + 8, load_u32(bw + 4), ba + 4, 0);
    return load_f16(bw) * load_f16(ba) * (float)s + load_f16(bw + 2) * load_f16(ba + 2);
}
template <> __device__ __forceinline__ float unit_dot<T_Q8_0>(const u8* w, const u8* a, u32 u) {
    const u8* bw = w + u * 34; const u8* ba = a + u * 34;
    int s = 0;
    for (int j = 0; j < 32; j += 4) s = dot4(act4(bw + 2 + j), act4(ba + 2 + j), s);
    return load_f16(bw) * load_f16(ba) * (float)s;
}

// Q8_K activation pieces.
__device__ __forceinline__ float q8k_d(const u8* ba) { return __uint_as_float(load_u32(ba)); }
__device__ __forceinline__ int q8k_bsum(const u8* ba, int g) { return (int)(short)load_u16(ba + 260 + 2 * g); }

// The six-bit (scale, min) of sub-block j of Q4_K/Q5_K (scales at bytes 4..16).
__device__ __forceinline__ void scale_min_k4(const u8* s, int j, int* sc, int* mn) {
    if (j < 4) { *sc = s[j] & 63; *mn = s[j + 4] & 63; }
    else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// Q4_K / Q5_K sub-block j (elements 32j..32j+31 of super-block sb): nibble (j % 2) of
// qs[(j/2)*32 + l], fifth bit j of qh[l] for Q5_K.
template <bool FIVE>
__device__ __forceinline__ float k45_unit(const u8* w, const u8* a, u32 u) {
    u32 sb = u / 8; int j = u % 8;
    const u8* bw = w + sb * (FIVE ? 176 : 144); const u8* ba = a + sb * 292;
    const u8* qs = bw + (FIVE ? 48 : 16) + (j / 2) * 32;
    const u8* y = ba + 4 + j * 32;
    int s = 0;
    for (int l = 0; l < 32; l += 4) {
        u32 q = (load_u32(qs + l) >> (4 * (j % 2))) & 0x0f0f0f0fu;
        if (FIVE) {
            u32 qh = load_u32(bw + 16 + l);
            q |= ((qh >> j) & 0x01010101u) << 4;
        }
        s = dot4((int)q, act4(y + l), s);
    }
    int sc, mn;
    scale_min_k4(bw + 4, j, &sc, &mn);
    float da = q8k_d(ba);
    int bs = q8k_bsum(ba, 2 * j) + q8k_bsum(ba, 2 * j + 1);
    return da * load_f16(bw) * (float)(sc * s) - da * load_f16(bw + 2) * (float)(mn * bs);
}
template <> __device__ __forceinline__ float unit_dot<T_Q4_K>(const u8* w, const u8* a, u32 u) { return k45_unit<false>(w, a, u); }
template <> __device__ __forceinline__ float unit_dot<T_Q5_K>(const u8* w, const u8* a, u32 u) { return k45_unit<true>(w, a, u); }

// Q6_K unit (h, s) = elements h*128 + s*32 + l, l < 32: low nibble (s / 2) of
// ql[h*64 + (s%2)*32 + l], top bits (2s, 2s+1) of qh[h*32 + l]; groups of 16 share a scale.
template <> __device__ __forceinline__ float unit_dot<T_Q6_K>(const u8* w, const u8* a, u32 u) {
    u32 sb = u / 8; int h = (u % 8) / 4, s = u % 4;
    const u8* bw = w + sb * 210; const u8* ba = a + sb * 292;
    const u8* ql = bw + h * 64 + (s % 2) * 32;
    const u8* qh = bw + 128 + h * 32;
    const u8* y = ba + 4 + h * 128 + s * 32;
    int isum[2] = {0, 0};
    for (int l = 0; l < 32; l += 4) {
        u32 lo = (load_u32(ql + l) >> (4 * (s / 2))) & 0x0f0f0f0fu;
        u32 hi = ((load_u32(qh + l) >> (2 * s)) & 0x03030303u) << 4;
        isum[l / 16] = dot4((int)(lo | hi), act4(y + l), isum[l / 16]);
    }
    int g0 = h * 8 + s * 2;
    const u8* scales = bw + 192;
    int sumi = (int)(i8)scales[g0] * (isum[0] - 32 * q8k_bsum(ba, g0))
             + (int)(i8)scales[g0 + 1] * (isum[1] - 32 * q8k_bsum(ba, g0 + 1));
    return q8k_d(ba) * load_f16(bw + 208) * (float)sumi;
}

// ---- single-element dequantization (embedding rows) -----------------------------------------

// Element e of a row of type `ty` starting at `row`, as core/src/quant/ dequantizes it.
__device__ float dequant_at(int ty, const u8* row, u32 e) {
    switch (ty) {
    case T_F32: return __uint_as_float(load_u32(row + e * 4));
    case T_F16: return load_f16(row + e * 2);
    case T_BF16: return bf16_to_f32(load_u16(row + e * 2));
    case T_Q4_0: case T_Q4_1: case T_Q5_0: case T_Q5_1: {
        int bytes = ty == T_Q4_0 ? 18 : ty == T_Q4_1 ? 20 : ty == T_Q5_0 ? 22 : 24;
        const u8* b = row + (e / 32) * bytes;
        u32 j = e % 32;
        bool has_min = ty == T_Q4_1 || ty == T_Q5_1;
        const u8* qs = b + (has_min ? 4 : 2) + (ty == T_Q5_0 || ty == T_Q5_1 ? 4 : 0);
        int q = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
        if (ty == T_Q5_0 || ty == T_Q5_1) q |= ((load_u32(b + (has_min ? 4 : 2)) >> j) & 1) << 4;
        float d = load_f16(b);
        if (has_min) return d * (float)q + load_f16(b + 2);
        return d * (float)(q - (ty == T_Q4_0 ? 8 : 16));
    }
    case T_Q8_0: {
        const u8* b = row + (e / 32) * 34;
        return load_f16(b) * (float)(i8)b[2 + e % 32];
    }
    case T_Q4_K: case T_Q5_K: {
        bool five = ty == T_Q5_K;
        const u8* b = row + (e / 256) * (five ? 176 : 144);
        u32 i = e % 256, j = i / 32, l = i % 32;
        int sc, mn;
        scale_min_k4(b + 4, j, &sc, &mn);
        const u8* qs = b + (five ? 48 : 16);
        int q = (qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0x0f;
        if (five) q |= ((b[16 + l] >> j) & 1) << 4;
        return load_f16(b) * (float)sc * (float)q - load_f16(b + 2) * (float)mn;
    }
    case T_Q6_K: {
        const u8* b = row + (e / 256) * 210;
        u32 i = e % 256, h = i / 128, s = (i % 128) / 32, l = i % 32;
        int low = (b[h * 64 + (s % 2) * 32 + l] >> (4 * (s / 2))) & 0x0f;
        int high = (b[128 + h * 32 + l] >> (2 * s)) & 3;
        int q = (low | (high << 4)) - 32;
        return load_f16(b + 208) * (float)(i8)b[192 + i / 16] * (float)q;
    }
    }
    return 0.0f;
}

// Bytes of one row of `cols` elements of type `ty`.
__device__ __forceinline__ u64 row_bytes(int ty, u32 cols) {
    switch (ty) {
    case T_F32: return (u64)cols * 4;
    case T_F16: case T_BF16: return (u64)cols * 2;
    case T_Q4_0: return cols / 32 * 18;
    case T_Q4_1: return cols / 32 * 20;
    case T_Q5_0: return cols / 32 * 22;
    case T_Q5_1: return cols / 32 * 24;
    case T_Q8_0: return cols / 32 * 34;
    case T_Q4_K: return cols / 256 * 144;
    case T_Q5_K: return cols / 256 * 176;
    case T_Q6_K: return cols / 256 * 210;
    }
    return 0;
}
