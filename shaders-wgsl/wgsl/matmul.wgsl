// Fused dequantize + matrix product: y[t][row0 + r] = Σ_c x[t][c] · w[r][c].
//
// A workgroup of 64 invocations handles 64 / tpr weight rows (tpr = invocations per row, a
// power of two chosen by the host so that short rows do not leave invocations idle) and a tile
// of up to TOK tokens. Each invocation dequantizes 32-element units of its row once (into
// registers) and dots them with every token of the tile, so in a prefill chunk a weight byte
// is read once per TOK tokens; for decode (one token) this is the matrix-vector product.
// Weights stay quantized in GPU memory. Partial sums are reduced in workgroup memory.
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
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> red: array<f32, 512>; // WG * TOK

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let rows_per_group = WG / p.tpr;
    let lane = lid % p.tpr;
    let r = (wid.x + wid.y * p.groups_x) * rows_per_group + lid / p.tpr;
    let t0 = wid.z * TOK;
    let in_range = r < p.rows;
    let nt = min(TOK, p.n_tok - t0);
    var acc: array<f32, 8>;
    if (in_range) {
        let units = p.cols / 32u;
        let row = r * p.row_bytes;
        for (var u = lane; u < units; u += p.tpr) {
            let v = unit(row, u);
            for (var t = 0u; t < nt; t++) {
                let xb = (t0 + t) * p.cols + 32u * u;
                var s = 0.0;
                for (var j = 0u; j < 32u; j++) {
                    s += v[j] * x[xb + j];
                }
                acc[t] += s;
            }
        }
    }
    for (var t = 0u; t < TOK; t++) {
        red[t * WG + lid] = acc[t];
    }
    workgroupBarrier();
    // Tree reduction within each row's segment of tpr invocations.
    for (var s = p.tpr / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var t = 0u; t < TOK; t++) {
                red[t * WG + lid] += red[t * WG + lid + s];
            }
        }
        workgroupBarrier();
    }
    if (in_range) {
        let seg = lid - lane;
        for (var t = lane; t < nt; t += p.tpr) {
            y[(t0 + t) * p.out_stride + p.row0 + r] = red[t * WG + seg];
        }
    }
}
