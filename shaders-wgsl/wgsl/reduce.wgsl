// Workgroup reductions whose result does not depend on the combining order (a maximum, a best
// index), in workgroup memory: the fallback for adapters without subgroup operations. The
// kernel declares `WG` (its workgroup size, a power of two) and calls `wg_max` / `wg_best`
// from uniform control flow. `reduce_sg.wgsl` has the same functions on subgroups.

const NO_INDEX: u32 = 0xFFFFFFFFu;

var<workgroup> red_v: array<f32, WG>;
var<workgroup> red_i: array<u32, WG>;

// The maximum of `v` over the workgroup.
fn wg_max(lid: u32, v: f32) -> f32 {
    red_v[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red_v[lid] = max(red_v[lid], red_v[lid + s]);
        }
        workgroupBarrier();
    }
    let r = red_v[0];
    workgroupBarrier();
    return r;
}

// Whether (v, i) comes before (bv, bi): a larger value, or an equal value at a lower index.
fn red_before(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return bi == NO_INDEX || v > bv || (v == bv && i < bi);
}

// The index of the best (v, i) over the workgroup (largest value, ties to the lower index),
// ignoring i = NO_INDEX; NO_INDEX when every i is.
fn wg_best(lid: u32, v: f32, i: u32) -> u32 {
    red_v[lid] = v;
    red_i[lid] = i;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            let ov = red_v[lid + s];
            let oi = red_i[lid + s];
            if (oi != NO_INDEX && red_before(ov, oi, red_v[lid], red_i[lid])) {
                red_v[lid] = ov;
                red_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    let r = red_i[0];
    workgroupBarrier();
    return r;
}
