// The k largest entries of each row, best first, ties broken by the lower index (as the CPU
// backend). One workgroup per row, k passes: pass i finds the best entry strictly after the
// (value, index) chosen by pass i - 1 in that order, so no per-entry bookkeeping is needed.
// Greedy sampling is k = 1: only a few bytes per token are read back.

const WG: u32 = 256u;

struct Params {
    cols: u32,
    k: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> vals: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;

const NONE: u32 = 0xFFFFFFFFu;

// Whether (v, i) comes before (bv, bi): a larger value, or an equal value at a lower index.
fn before(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return bi == NONE || v > bv || (v == bv && i < bi);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wid.x;
    let base = row * p.cols;
    var prev_v = 0.0;
    var prev_i = NONE;
    for (var kk = 0u; kk < p.k; kk++) {
        var bv = 0.0;
        var bi = NONE;
        for (var j = lid; j < p.cols; j += WG) {
            let v = x[base + j];
            // Only entries after the previous pick in the order are candidates.
            if (prev_i == NONE || before(prev_v, prev_i, v, j)) {
                if (before(v, j, bv, bi)) {
                    bv = v;
                    bi = j;
                }
            }
        }
        best_v[lid] = bv;
        best_i[lid] = bi;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (lid < s) {
                let ov = best_v[lid + s];
                let oi = best_i[lid + s];
                if (oi != NONE && before(ov, oi, best_v[lid], best_i[lid])) {
                    best_v[lid] = ov;
                    best_i[lid] = oi;
                }
            }
            workgroupBarrier();
        }
        prev_v = best_v[0];
        prev_i = best_i[0];
        if (lid == 0u) {
            vals[row * p.k + kk] = prev_v;
            ids[row * p.k + kk] = prev_i;
        }
        workgroupBarrier();
    }
}
