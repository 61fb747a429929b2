// Row normalisations. One workgroup per normalised group (a row, or one head of a row).
// rms_norm: y = x / sqrt(mean(x²) + eps) · w;  layer_norm: y = (x - mean) / sqrt(var + eps) · w + b.
// `has_w` / `has_b` say whether the weight / bias bindings hold data (else they are dummies).

const WG: u32 = 256u;

struct Params {
    group: u32,
    n_groups: u32,
    eps: f32,
    has_w: u32,
    has_b: u32,
    groups_x: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> wt: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> red: array<f32, 256>;
var<workgroup> shared_scale: f32;

fn reduce_sum(v: f32, lid: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}

fn write_out(base: u32, j: u32, v: f32) {
    var o = v;
    if (p.has_w != 0u) {
        o *= wt[j];
    }
    if (p.has_b != 0u) {
        o += bias[j];
    }
    y[base + j] = o;
}

@compute @workgroup_size(256)
fn rms_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.x + wid.y * p.groups_x;
    if (g >= p.n_groups) {
        return; // uniform across the workgroup
    }
    let base = g * p.group;
    // The CPU backend's arithmetic bit for bit (see exact.wgsl): squares summed in f64 in
    // element order, the mean rounded to f32, then a correctly rounded sqrt and reciprocal.
    // The output feeds 8-bit activation quantization, where one ulp can move a quant. The sum
    // is sequential, so one invocation forms it.
    if (lid == 0u) {
        var ss = F64(0u, 0u, 0);
        for (var j = 0u; j < p.group; j++) {
            ss = f64_add(ss, f64_square(x[base + j]));
        }
        let v = f64_div_to_f32(ss, p.group) + p.eps;
        if (v > 0.0) {
            shared_scale = div_rn(1.0, sqrt_rn(v));
        } else {
            shared_scale = 1.0 / sqrt(v);
        }
    }
    workgroupBarrier();
    let scale = shared_scale;
    for (var j = lid; j < p.group; j += WG) {
        write_out(base, j, x[base + j] * scale);
    }
}

@compute @workgroup_size(256)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.x + wid.y * p.groups_x;
    if (g >= p.n_groups) {
        return;
    }
    let base = g * p.group;
    var sum = 0.0;
    for (var j = lid; j < p.group; j += WG) {
        sum += x[base + j];
    }
    let mean = reduce_sum(sum, lid) / f32(p.group);
    var sq = 0.0;
    for (var j = lid; j < p.group; j += WG) {
        let d = x[base + j] - mean;
        sq += d * d;
    }
    let scale = 1.0 / sqrt(reduce_sum(sq, lid) / f32(p.group) + p.eps);
    for (var j = lid; j < p.group; j += WG) {
        write_out(base, j, (x[base + j] - mean) * scale);
    }
}
