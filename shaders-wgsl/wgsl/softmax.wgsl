// Row-wise softmax: one workgroup per row; max (`wg_max`, reduce.wgsl or reduce_sg.wgsl), then
// sum of exp, reduced in workgroup memory.

const WG: u32 = 256u;

struct Params {
    cols: u32,
    rows: u32,
    zero: u32, // 0 (math.wgsl's `keep`)
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> red: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let base = wid.x * p.cols;
    var m = -3.0e38;
    for (var j = lid; j < p.cols; j += WG) {
        m = max(m, x[base + j]);
    }
    let gmax = wg_max(lid, m);
    var sum = 0.0;
    for (var j = lid; j < p.cols; j += WG) {
        sum += exp_acc(x[base + j] - gmax);
    }
    red[lid] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / red[0];
    for (var j = lid; j < p.cols; j += WG) {
        y[base + j] = exp_acc(x[base + j] - gmax) * inv;
    }
}
