// Fused dequantize + matrix product: y[t][row0 + r] = Σ_c x[t][c] · w[r][c].
//
// A workgroup of 64 invocations handles 64 / tpr weight rows (tpr = invocations per row, a
// power of two chosen by the host so that short rows do not leave invocations idle) and a tile
// of up to TOK tokens; each invocation walks 32-element units of its row, dequantizing four
// values per quant word (see quant.wgsl) straight into the dot product. Within a tile the
// weight rows stay in cache across tokens; for decode (one token) this is the matrix-vector
// product. Weights stay quantized in GPU memory. Partial sums are reduced in workgroup memory.
// Weight rows are bound in chunks (tensors larger than one binding are split by rows); `row0`
// places a chunk's rows in the output.

const WG: u32 = 64u;
const TOK: u32 = 8u;

struct Params {
    rows: u32,        // rows in this chunk
    cols: u32,        // elements per row (a multiple of 32)
    n_tok: u32,       // activation rows
    row_bytes: u32,   // bytes per weight row
    out_stride: u32,  // output row width (all rows of the weight)
    row0: u32,        // first row of this chunk within the weight
    groups_x: u32,    // workgroups along x (row groups are spread over x and y)
    tpr: u32,         // invocations per row: a power of two dividing WG
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
// Per 32-element block of x: the sum the CPU backend's Q8_1 activations store (f16 of
// d · Σq), used for the minimum term of weights with one (Q4_1); unused (a dummy) otherwise.
@group(0) @binding(3) var<storage, read> xs: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> red: array<f32, 64>;

// Dot of unit `u` of the row at `row` with `n` consecutive activations starting at `xb`.
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
    let sc = scales(row, u);
    var s = 0.0;
    for (var q = 0u; q < 8u; q++) {
        let xv = vec4<f32>(x[xb + 4u * q], x[xb + 4u * q + 1u], x[xb + 4u * q + 2u], x[xb + 4u * q + 3u]);
        s += dot(quad(row, u, q, sc), xv);
    }
    let m = min_of(sc);
    if (m != 0.0) {
        s += m * xs[xb / 32u];
    }
    return s;
}

// Sums `v` over each row's segment of tpr invocations; the result is in red[segment start].
fn segment_sum(v: f32, lid: u32, lane: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = p.tpr / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    let total = red[lid - lane];
    workgroupBarrier();
    return total;
}

// Tiles of up to TOK tokens (prefill).
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let lane = lid % p.tpr;
    let r = (wid.x + wid.y * p.groups_x) * (WG / p.tpr) + lid / p.tpr;
    let t0 = wid.z * TOK;
    let in_range = r < p.rows;
    let nt = min(TOK, p.n_tok - t0);
    let units = p.cols / 32u;
    let row = r * p.row_bytes;
    for (var t = 0u; t < nt; t++) {
        var acc = 0.0;
        if (in_range) {
            for (var u = lane; u < units; u += p.tpr) {
                acc += unit_dot(row, u, (t0 + t) * p.cols + 32u * u);
            }
        }
        let total = segment_sum(acc, lid, lane);
        if (in_range && lane == 0u) {
            y[(t0 + t) * p.out_stride + p.row0 + r] = total;
        }
    }
}

// One invocation per weight row and no workgroup memory or barriers: the fast form on CPU
// adapters (lavapipe, SwiftShader), where barriers are costly and there are no memory
// transactions to coalesce. Same arithmetic as `main` with tpr = 1.
@compute @workgroup_size(64)
fn per_row(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let r = gid.x + wid.y * p.groups_x * WG;
    if (r >= p.rows) {
        return;
    }
    let t0 = wid.z * TOK;
    let nt = min(TOK, p.n_tok - t0);
    let units = p.cols / 32u;
    let row = r * p.row_bytes;
    for (var t = 0u; t < nt; t++) {
        var acc = 0.0;
        for (var u = 0u; u < units; u++) {
            acc += unit_dot(row, u, (t0 + t) * p.cols + 32u * u);
        }
        y[(t0 + t) * p.out_stride + p.row0 + r] = acc;
    }
}
