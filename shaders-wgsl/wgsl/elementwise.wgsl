// Element-wise ops on f32 tensors: out[i] = f(a[i], b[i]). One kernel, the op chosen by
// `p.op` (uniform across the dispatch, so there is no divergence):
//   0 add, 1 mul, 2 scale (a·s), 3 soft-cap (s·tanh(a/s)), 4 GELU, 5 SiLU,
//   6 GeGLU (gelu(a)·b), 7 SwiGLU (silu(a)·b), 8 bias or row (a + b[i mod cols]), 9 GELU with
//   erf, 10 row product (a · b[i mod cols]: a diffusion transformer's modulation).
// Unary ops bind `a` as `b` too. Invocations are spread over x and y (dispatch limits).

struct Params {
    n: u32,
    op: u32,
    s: f32,
    cols: u32,
    stride_y: u32, // invocations per y step (workgroups along x · 256)
    zero: u32,     // 0, unknown to the compiler (see `keep` in math.wgsl)
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
// GELU of every f16 value (indexed by its bits), tabulated on the host by the CPU backend.
@group(0) @binding(3) var<storage, read> gelu_table: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

// GELU (tanh approximation) exactly as the CPU backend (and llama.cpp) compute it: the input
// rounded to f16 (exact.wgsl's ties-to-even; pack2x16float's rounding is the driver's), then
// looked up in the table of f16-rounded results; saturating outside ±10. GPU tanh builtins are
// too loose to reproduce the f16-rounded results.
fn gelu(v: f32) -> f32 {
    if (v <= -10.0) {
        return 0.0;
    }
    if (v >= 10.0) {
        return v;
    }
    return gelu_table[f32_to_f16_bits(bitcast<u32>(v))];
}

// SiLU as the CPU backend computes it, x / (1 + exp(-x)), with a correctly rounded exp and
// division: its output is quantized for the next product (SwiGLU models' ffn_down).
fn silu(v: f32) -> f32 {
    let den = 1.0 + exp_cr(-v);
    let a = abs(v);
    if (a >= 1.0e-30 && den < 3.0e38) {
        let q = div_rn(a, den);
        return select(q, -q, v < 0.0);
    }
    return v / den;
}

// The error function as the CPU backend computes it (Abramowitz & Stegun 7.1.26, absolute
// error below 1.5e-7), with the accurate exp.
fn erf(x: f32) -> f32 {
    let a = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = ((((1.0614054 * t - 1.4531520) * t + 1.4214137) * t - 0.28449674) * t + 0.2548296) * t;
    let y = 1.0 - poly * exp_acc(-a * a);
    return select(y, -y, x < 0.0);
}

// GELU as BERT defines it: x/2 · (1 + erf(x/√2)).
fn gelu_erf(x: f32) -> f32 {
    return 0.5 * x * (1.0 + erf(x * 0.70710678));
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.stride_y;
    if (i >= p.n) {
        return;
    }
    let x = a[i];
    var r = 0.0;
    switch p.op {
        case 0u: { r = x + b[i]; }
        case 1u: { r = x * b[i]; }
        case 2u: { r = x * p.s; }
        case 3u: { r = p.s * tanh(x / p.s); }
        case 4u: { r = gelu(x); }
        case 5u: { r = silu(x); }
        case 6u: { r = gelu(x) * b[i]; }
        case 7u: { r = silu(x) * b[i]; }
        case 9u: { r = gelu_erf(x); }
        case 10u: { r = x * b[i % p.cols]; }
        default: { r = x + b[i % p.cols]; }
    }
    out[i] = r;
}
