// Pooling of an encoder step (BERT-style embedding models): one invocation per (sequence,
// column): the mean, first or last of a sequence's valid rows; `seqs[3s..3s+3]` = (start, len,
// valid).

struct PoolParams {
    cols: u32,
    n_seq: u32,
    mode: u32, // 0 mean, 1 first, 2 last
    _pad0: u32,
}

@group(0) @binding(0) var<storage, read> px: array<f32>;
@group(0) @binding(1) var<storage, read> seqs: array<u32>;
@group(0) @binding(2) var<storage, read_write> pout: array<f32>;
@group(0) @binding(3) var<uniform> pp: PoolParams;

@compute @workgroup_size(64)
fn pool(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let s = gid.y;
    if (c >= pp.cols || s >= pp.n_seq) {
        return;
    }
    let start = seqs[3u * s];
    let valid = seqs[3u * s + 2u];
    var r = 0.0;
    switch pp.mode {
        case 1u: { r = px[start * pp.cols + c]; }
        case 2u: { r = px[(start + valid - 1u) * pp.cols + c]; }
        default: {
            var acc = 0.0;
            for (var i = 0u; i < valid; i++) {
                acc += px[(start + i) * pp.cols + c];
            }
            r = acc * (1.0 / f32(valid));
        }
    }
    pout[s * pp.cols + c] = r;
}
