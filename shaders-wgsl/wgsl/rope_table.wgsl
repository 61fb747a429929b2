// Rotary embedding by a table of angles given per row (`Op::RopeMulti`: Qwen2-VL's M-RoPE and
// its vision tower's 2-D RoPE). The host forms each row's (cos, sin) per rotated pair exactly as
// the CPU backend does, so only the rotation runs here: NeoX pairs (i, i + n_rot/2) of each
// head, or with `interleaved` the pairs (2i, 2i + 1) (Wan's video RoPE); elements past n_rot
// copied. The rotation's products are kept apart from its sums
// (`keep`), as the CPU rounds them.

struct Params {
    n: u32,
    cols: u32,
    head_dim: u32,
    n_rot: u32,
    stride_y: u32,
    zero: u32, // 0, unknown to the compiler
    interleaved: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn keep(v: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(v) ^ p.zero);
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
    var i = k % half;
    var first = k < half;
    var partner = select(e - half, e + half, first);
    if (p.interleaved != 0u) {
        i = k / 2u;
        first = k % 2u == 0u;
        partner = select(e - 1u, e + 1u, first);
    }
    let cs = table[row * half + i];
    let c = cs.x;
    let s = cs.y;
    if (first) {
        y[e] = keep(x[e] * c) - keep(x[partner] * s);
    } else {
        y[e] = keep(x[partner] * s) + keep(x[e] * c);
    }
}
