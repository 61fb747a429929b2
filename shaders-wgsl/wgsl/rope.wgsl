// Rotary position embedding. One invocation per element: element k of a head (k < n_rot) is
// rotated with its partner by the angle of pair i; the rest is copied. NeoX pairs
// (i, i + n_rot/2); the normal layout pairs (2i, 2i + 1).
//
// The angle is formed as llama.cpp (and the CPU backend) form it, in f32: start at the
// position, multiply by step = base^(-2/n_rot) once per pair (i times), then divide by the
// pair's frequency factor (1 when the model has none; correctly rounded). `step` is computed on
// the host with the CPU backend's expression, so both backends rotate by the same f32 angle.
// sin and cos are correctly rounded (math.wgsl's `sincos_cr`), and the rotation's products
// are kept apart from its sums (`keep`), as the CPU rounds them: rotated keys and queries are
// rounded to f16 for attention, where one ulp can flip a value.

struct Params {
    n: u32,
    cols: u32,
    head_dim: u32,
    n_rot: u32,
    neox: u32,
    stride_y: u32,
    step: f32,
    zero: u32, // 0, unknown to the compiler (math.wgsl's `keep`)
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> positions: array<u32>;
@group(0) @binding(2) var<storage, read> factors: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let e = gid.x + gid.y * p.stride_y;
    if (e >= p.n) {
        return;
    }
    let row = e / p.cols;
    let k = (e % p.cols) % p.head_dim;
    if (k >= p.n_rot) {
        y[e] = x[e];
        return;
    }
    let half = p.n_rot / 2u;
    var i = 0u;
    var first = false;
    var partner = 0u;
    if (p.neox != 0u) {
        i = k % half;
        first = k < half;
        partner = select(e - half, e + half, first);
    } else {
        i = k / 2u;
        first = (k & 1u) == 0u;
        partner = select(e - 1u, e + 1u, first);
    }
    var angle = f32(positions[row]);
    for (var j = 0u; j < i; j++) {
        angle *= p.step;
    }
    let f = factors[i];
    var theta = angle;
    if (f != 1.0 && angle > 0.0 && f > 0.0) {
        theta = div_rn(angle, f);
    }
    let sc = sincos_cr(theta);
    let c = sc.y;
    let s = sc.x;
    if (first) {
        y[e] = keep(x[e] * c) - keep(x[partner] * s);
    } else {
        y[e] = keep(x[partner] * s) + keep(x[e] * c);
    }
}
