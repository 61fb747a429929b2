// Encoder attention (BERT-style embedding models): bidirectional attention within each
// sequence of a step. One workgroup per (row, head): scores of the row's query head against
// every valid key of its sequence, their softmax, then the weighted sum of the values. Scores
// live in workgroup memory MAX_KEYS at a time: longer sequences (a vision encoder's 4096
// patches) are taken in chunks, the scores of later chunks computed again after the maximum
// pass; the sums run in the same order either way. Head size at most 4 * WG. `spans[2r]`, `spans[2r + 1]` are the first row and the valid
// length of row r's sequence (0: no sequence, the output row is zero). Keys and values are this
// step's own rows (no cache). Needs `exp_acc` (math.wgsl).

const WG: u32 = 64u;
const MAX_KEYS: u32 = 1024u;

struct AttnParams {
    n_head: u32,
    n_head_kv: u32,
    head_dim: u32,
    rows: u32,
    scale: f32,
    groups_x: u32,
    zero: u32, // 0, unknown to the compiler (see `keep` in math.wgsl)
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> spans: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> p: AttnParams;

var<workgroup> scores: array<f32, MAX_KEYS>;
var<workgroup> red: array<f32, WG>;

fn wg_sum(lid: u32, x: f32) -> f32 {
    red[lid] = x;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn wg_max1(lid: u32, x: f32) -> f32 {
    red[lid] = x;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(64)
fn attend(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let item = wid.x + wid.y * p.groups_x;
    if (item >= p.rows * p.n_head) {
        return; // uniform across the workgroup
    }
    let r = item / p.n_head;
    let h = item % p.n_head;
    let kh = h / (p.n_head / p.n_head_kv);
    let hd = p.head_dim;
    let qc = p.n_head * hd;
    let kc = p.n_head_kv * hd;
    let start = spans[2u * r];
    let valid = spans[2u * r + 1u];
    let qo = r * qc + h * hd;
    var m = -3.0e38;
    for (var j = lid; j < valid; j += WG) {
        let s = score(qo, (start + j) * kc + kh * hd, hd);
        if (j < MAX_KEYS) {
            scores[j] = s;
        }
        m = max(m, s);
    }
    m = wg_max1(lid, m);
    var sum = 0.0;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var c0 = 0u; c0 < valid; c0 += MAX_KEYS) {
        let n = min(MAX_KEYS, valid - c0);
        if (c0 > 0u) {
            for (var j = lid; j < n; j += WG) {
                scores[j] = score(qo, (start + c0 + j) * kc + kh * hd, hd);
            }
        }
        for (var j = lid; j < n; j += WG) {
            let e = exp_acc(scores[j] - m);
            scores[j] = e;
            sum += e;
        }
        workgroupBarrier();
        for (var i = 0u; i < 4u; i++) {
            let d = lid + i * WG;
            if (d < hd) {
                var a = acc[i];
                for (var j = 0u; j < n; j++) {
                    a = fma(scores[j], v[(start + c0 + j) * kc + kh * hd + d], a);
                }
                acc[i] = a;
            }
        }
        // The next chunk overwrites the scores.
        workgroupBarrier();
    }
    sum = wg_sum(lid, sum);
    let inv = select(0.0, 1.0 / sum, valid > 0u);
    for (var i = 0u; i < 4u; i++) {
        let d = lid + i * WG;
        if (d < hd) {
            out[qo + d] = acc[i] * inv;
        }
    }
}

// The scaled dot product of query `q[qo..]` and key `k[ko..]`.
fn score(qo: u32, ko: u32, hd: u32) -> f32 {
    var s = 0.0;
    for (var d = 0u; d < hd; d++) {
        s = fma(q[qo + d], k[ko + d], s);
    }
    return s * p.scale;
}
