// Rotary position embedding. One invocation per element: element k of a head (k < n_rot) is
// rotated with its partner by the angle of pair i; the rest is copied. NeoX pairs
// (i, i + n_rot/2); the normal layout pairs (2i, 2i + 1).
//
// The angle is formed as llama.cpp (and the CPU backend) form it, in f32: start at the
// position, multiply by step = base^(-2/n_rot) once per pair (i times), then divide by the
// pair's frequency factor (1 when the model has none). `step` is computed on the host with the
// CPU backend's expression, so both backends rotate by the same f32 angle. The angle is reduced
// modulo 2π in two steps (Cody–Waite) before cos/sin, which keeps GPU cos/sin accurate at long
// positions.

struct Params {
    n: u32,
    cols: u32,
    head_dim: u32,
    n_rot: u32,
    neox: u32,
    stride_y: u32,
    step: f32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> positions: array<u32>;
@group(0) @binding(2) var<storage, read> factors: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

// 2π = TWO_PI_HI + TWO_PI_LO, with TWO_PI_HI = 201/32 exact in 8 bits, so k · TWO_PI_HI is
// exact for every k below 2^16.
const TWO_PI_HI: f32 = 6.28125;
const TWO_PI_LO: f32 = 0.0019353071795864769;
const INV_TWO_PI: f32 = 0.15915494309189535;

fn reduce(theta: f32) -> f32 {
    let k = round(theta * INV_TWO_PI);
    return (theta - k * TWO_PI_HI) - k * TWO_PI_LO;
}

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
    var i: u32;
    var first: bool;
    var partner: u32;
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
    let theta = reduce(angle / factors[i]);
    let c = cos(theta);
    let s = sin(theta);
    if (first) {
        y[e] = x[e] * c - x[partner] * s;
    } else {
        y[e] = x[partner] * s + x[e] * c;
    }
}
