// The reductions of `reduce.wgsl` on subgroups (browsers need `enable subgroups;` first):
// each subgroup reduces its values, one invocation per subgroup folds that into a workgroup
// atomic, 2-3 barriers instead of log2(WG). Exact: a maximum and a minimum do not depend on the
// order they are taken in, and floats are compared through an order-preserving u32 key. The
// invocation with the lowest index of its subgroup (`subgroupMin(lid)`) stands for it.

const NO_INDEX: u32 = 0xFFFFFFFFu;

var<workgroup> red_key: atomic<u32>;
var<workgroup> red_idx: atomic<u32>;

// A u32 that orders as the float of bits `b` does (-0 below +0; NaNs at the ends).
fn order_key(b: u32) -> u32 {
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn key_value(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k & 0x7FFFFFFFu, (k & 0x80000000u) != 0u));
}

// The maximum of `v` over the workgroup.
fn wg_max(lid: u32, v: f32) -> f32 {
    if (lid == 0u) {
        atomicStore(&red_key, 0u);
    }
    workgroupBarrier();
    let m = subgroupMax(v);
    if (lid == subgroupMin(lid)) {
        atomicMax(&red_key, order_key(bitcast<u32>(m)));
    }
    workgroupBarrier();
    let r = key_value(atomicLoad(&red_key));
    workgroupBarrier();
    return r;
}

// The index of the best (v, i) over the workgroup (largest value, ties to the lower index),
// ignoring i = NO_INDEX; NO_INDEX when every i is. -0 and +0 are one value, as `==` has them.
fn wg_best(lid: u32, v: f32, i: u32) -> u32 {
    if (lid == 0u) {
        atomicStore(&red_key, 0u);
        atomicStore(&red_idx, NO_INDEX);
    }
    workgroupBarrier();
    var b = bitcast<u32>(v);
    if ((b & 0x7FFFFFFFu) == 0u) {
        b = 0u;
    }
    var k = 0u;
    if (i != NO_INDEX) {
        k = order_key(b);
    }
    let leader = lid == subgroupMin(lid);
    let km = subgroupMax(k);
    if (leader) {
        atomicMax(&red_key, km);
    }
    workgroupBarrier();
    let best = atomicLoad(&red_key);
    var ci = NO_INDEX;
    if (i != NO_INDEX && k == best) {
        ci = i;
    }
    let im = subgroupMin(ci);
    if (leader) {
        atomicMin(&red_idx, im);
    }
    workgroupBarrier();
    let r = atomicLoad(&red_idx);
    workgroupBarrier();
    return r;
}
