// Activation quantization, as the CPU backend (and llama.cpp) quantize activations before a
// product with quantized weights. One invocation per block; no barriers. Rounding as
// llama.cpp's CPU backend (and ours): inverse scale id = 127/amax, q = round-half-to-even(x·id)
// (WGSL's round()), clamped to ±127;
//   q8_0: blocks of 32, d = amax/127 stored as f16  (Q8_0 and Q8_1)
//   q8_k: blocks of 256, d = 1/id in f32
// The divisions are correctly rounded (exact.wgsl), as on the CPU: an ulp of id moves quants.
// The f16 roundings are exact.wgsl's too: WGSL leaves pack2x16float's rounding to the
// implementation, and NVIDIA's Vulkan driver (H200, 2026-12-04) did not round to nearest even
// there (Q4_0..Q8_0 products 2e-4 off the CPU's, where lavapipe's were bit-identical).
// Output: the integer quants, four to a u32 word as packed i8 (pack_i8: element 4i + k in
// byte k of word i; every quant fits, |q| <= 127), a quarter of the bytes of f32 values for
// the products to read; and, per 32 elements, (d, f16(d·Σq)) — the scale and the sum Q8_1
// stores; matmul.wgsl forms the integer block dot products from them.

struct Params {
    n_blocks: u32,
    stride_y: u32, // invocations per y step
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
// The packed quants: one word per 4 elements.
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
// Per 32 elements: the block's scale (f16-rounded for q8_0, the f32 1/id for q8_k) and
// f16(d · Σq) with d = amax/127 unrounded, the sum Q8_1 stores (Q4_1 products use it for
// their minimum term). Every entry writes both, so all share one layout.
@group(0) @binding(2) var<storage, read_write> sums: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn quantize_block(b: u32, n: u32, f16_scale: bool) {
    let base = b * n;
    var amax = 0.0;
    for (var j = 0u; j < n; j++) {
        amax = max(amax, abs(x[base + j]));
    }
    var id = 0.0;
    var d = 0.0;
    if (amax >= 1.17549435e-38) {
        id = div_rn(127.0, amax);
        d = div_rn(amax, 127.0);
    } else if (amax != 0.0) {
        // Subnormal (never in practice): outside div_rn's range.
        id = 127.0 / amax;
        d = amax / 127.0;
    }
    var ds = 0.0;
    if (f16_scale) {
        ds = round_f16(d);
    } else {
        ds = select(0.0, div_rn(1.0, id), amax != 0.0);
    }
    for (var g = 0u; g < n / 32u; g++) {
        // Σq in f32 as before: exact (|Σq| <= 32·127), so the order does not matter.
        var qsum = 0.0;
        for (var j = base + 32u * g; j < base + 32u * (g + 1u); j += 4u) {
            let q = clamp(round(vec4<f32>(x[j], x[j + 1u], x[j + 2u], x[j + 3u]) * id), vec4<f32>(-127.0), vec4<f32>(127.0));
            qsum += (q.x + q.y) + (q.z + q.w);
            y[j / 4u] = pack_i8(vec4<i32>(q));
        }
        let u = base / 32u + g;
        sums[2u * u] = ds;
        sums[2u * u + 1u] = round_f16(d * qsum);
    }
}

@compute @workgroup_size(64)
fn q8_0(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = gid.x + gid.y * p.stride_y;
    if (b < p.n_blocks) {
        quantize_block(b, 32u, true);
    }
}

@compute @workgroup_size(64)
fn q8_k(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = gid.x + gid.y * p.stride_y;
    if (b < p.n_blocks) {
        quantize_block(b, 256u, false);
    }
}
