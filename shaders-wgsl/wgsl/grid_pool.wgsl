// Average pooling of a grid of rows (a vision encoder's patch grid): one invocation per
// (output row, column). Input row `y * width + x` is grid cell (x, y); output row
// `oy * (width / k) + ox` is the mean of the k × k block at (k·ox, k·oy), summed block row by
// block row and then scaled by `inv` = 1 / k² (the CPU backend's order, so results match).

struct GridPoolParams {
    cols: u32,
    width: u32,
    k: u32,
    n_out: u32,
    inv: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> gx: array<f32>;
@group(0) @binding(1) var<storage, read_write> gout: array<f32>;
@group(0) @binding(2) var<uniform> gp: GridPoolParams;

@compute @workgroup_size(64)
fn avg_pool_2d(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let o = gid.y + gid.z * 65535u;
    if (c >= gp.cols || o >= gp.n_out) {
        return;
    }
    let ow = gp.width / gp.k;
    let oy = o / ow;
    let ox = o % ow;
    var acc = 0.0;
    for (var dy = 0u; dy < gp.k; dy++) {
        for (var dx = 0u; dx < gp.k; dx++) {
            let r = (oy * gp.k + dy) * gp.width + ox * gp.k + dx;
            acc += gx[r * gp.cols + c];
        }
    }
    gout[o * gp.cols + c] = acc * gp.inv;
}
