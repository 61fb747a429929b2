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
        // reduce.wgsl or reduce_sg.wgsl; the value is re-read (the same bits).
        prev_i = wg_best(lid, bv, bi);
        prev_v = 0.0;
        if (prev_i != NONE) {
            prev_v = x[base + prev_i];
        }
        if (lid == 0u) {
            vals[row * p.k + kk] = prev_v;
            ids[row * p.k + kk] = prev_i;
        }
        workgroupBarrier();
    }
}
