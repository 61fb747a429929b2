// Shared helpers for every kernel family. NVRTC compiles each family as this file followed by
// the family's source, with no CUDA headers: fixed-width types and f16/bf16 conversions are
// defined here (the conversions as PTX cvt, which is what cuda_fp16.h does too).

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

#define WARP 32
#define FULL_MASK 0xffffffffu
// -inf without math headers.
#define NEG_INF __int_as_float(0xff800000)

// f16 bits -> f32 (exact).
__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("{ cvt.f32.f16 %0, %1; }" : "=f"(f) : "h"(h));
    return f;
}

// f32 -> f16 bits, round to nearest even (as half::f16::from_f32 on the CPU), widened to 32
// bits inside the asm. With a 16-bit asm output, the H200 (driver 580, PTX from NVRTC 13)
// stored a zero low byte where `o[0] = h & 0xff` wrote one (weft parity: Q8_0/Q8_1 activation
// scales wrong in most blocks), while stores of 32-bit values were right.
__device__ __forceinline__ u32 f32_to_f16_bits(float f) {
    u32 h;
    asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; cvt.u32.u16 %0, t; }" : "=r"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ u16 f32_to_f16(float f) { return (u16)f32_to_f16_bits(f); }

// bf16 bits -> f32 (exact: the top half of an f32).
__device__ __forceinline__ float bf16_to_f32(u16 h) {
    return __uint_as_float(((u32)h) << 16);
}

// Little-endian loads at any byte offset (GGUF blocks are 2-byte aligned at best).
__device__ __forceinline__ u16 load_u16(const u8* p) {
    return (u16)p[0] | ((u16)p[1] << 8);
}
__device__ __forceinline__ u32 load_u32(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}
__device__ __forceinline__ float load_f16(const u8* p) { return f16_to_f32(load_u16(p)); }

// Warp reductions (every lane gets the result).
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_f64(double v) {
    for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}
__device__ __forceinline__ int warp_sum_i32(int v) {
    for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// Sum over a whole block of blockDim.x threads (a multiple of 32, at most 1024); `scratch`
// holds 32 floats of shared memory. Every thread gets the result.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    int nw = blockDim.x / WARP;
    v = lane < nw ? scratch[lane] : 0.0f;
    return warp_sum(v);
}
__device__ __forceinline__ double block_sum_f64(double v, double* scratch) {
    int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    v = warp_sum_f64(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    int nw = blockDim.x / WARP;
    v = lane < nw ? scratch[lane] : 0.0;
    return warp_sum_f64(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
    int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    int nw = blockDim.x / WARP;
    v = lane < nw ? scratch[lane] : NEG_INF;
    return warp_max(v);
}

// Signed 8-bit dot of four packed bytes, accumulated (dp4a on sm_61 and later).
__device__ __forceinline__ int dot4(int a, int b, int acc) { return __dp4a(a, b, acc); }

// Positions per block of the paged KV cache (weft_core::backend::KV_BLOCK).
#define KV_BLOCK 64u

// Cache slot of sequence `seq`'s position `pos`: for a full-attention layer (`paged`), its
// offset in the pool block the sequence's table maps (`per_seq` entries per sequence); for a
// sliding-window layer, its place in the sequence's ring of `capacity`.
__device__ __forceinline__ u64 kv_slot(const u32* tables, u32 per_seq, u32 seq, u32 pos,
                                       u32 capacity, int paged) {
    if (paged) return (u64)tables[(u64)seq * per_seq + pos / KV_BLOCK] * KV_BLOCK + pos % KV_BLOCK;
    return (u64)seq * capacity + pos % capacity;
}
