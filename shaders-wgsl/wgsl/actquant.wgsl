// Activation quantization, as the CPU backend (and llama.cpp) quantize activations before a
// product with quantized weights: x is replaced by its quantize-then-dequantize image x̂, so
// the f32 product with dequantized weights equals the integer dot product up to f32 rounding.
// One invocation per block; no barriers.
//   q8_0: blocks of 32, d = amax/127 stored as f16, q = round-half-away(x/d)  (Q8_0 and Q8_1)
//   q8_k: blocks of 256, d = amax/127 in f32, q = round-half-away(x/d) clamped to ±127

struct Params {
    n_blocks: u32,
    stride_y: u32, // invocations per y step
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

fn round_away(v: f32) -> f32 {
    return sign(v) * floor(abs(v) + 0.5);
}

fn quantize_block(b: u32, n: u32, f16_scale: bool) {
    let base = b * n;
    var amax = 0.0;
    for (var j = 0u; j < n; j++) {
        amax = max(amax, abs(x[base + j]));
    }
    let d = amax / 127.0;
    var id = 0.0;
    if (d != 0.0) {
        id = 1.0 / d;
    }
    var ds = d;
    if (f16_scale) {
        ds = unpack2x16float(pack2x16float(vec2<f32>(d, 0.0))).x;
    }
    for (var j = 0u; j < n; j++) {
        let q = clamp(round_away(x[base + j] * id), -127.0, 127.0);
        y[base + j] = q * ds;
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
