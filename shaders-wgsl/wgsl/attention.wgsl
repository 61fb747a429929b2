// Causal attention over one layer's KV cache, for decode and prefill alike. One workgroup per
// (query row, query head); query heads share key/value heads in groups (GQA). A row at
// position `pos` of sequence `seq` attends to cached positions max(0, pos + 1 - window) ..= pos.
//
// Pass 1: each invocation scores a strided subset of the keys and keeps a running
// (max, sum of exp) pair; the pairs are merged across the workgroup, giving the softmax
// normaliser exactly. Pass 2 walks the keys in tiles of WG: each invocation scores one key of
// the tile into workgroup memory as its final weight, then every invocation accumulates its
// own output dimensions over the tile. With an f16 cache, queries and weights are rounded to
// f16 first, as the CPU backend (and llama.cpp) multiply in the cache's type.
// Entry points: attn_f16 (cache of packed f16 pairs) and attn_f32 (f32 bit patterns).

const WG: u32 = 64u;
const MAX_HEAD: u32 = 256u;
const PER_INV: u32 = 4u; // MAX_HEAD / WG output dimensions per invocation

struct Params {
    n_head: u32,
    n_kv_head: u32,
    hk: u32,
    hv: u32,
    capacity: u32,
    window: u32,     // 0: none
    scale: f32,
    n_tok: u32,
    groups_x: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<u32>;
@group(0) @binding(2) var<storage, read> vc: array<u32>;
@group(0) @binding(3) var<storage, read> positions: array<u32>;
@group(0) @binding(4) var<storage, read> seqs: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> qh: array<f32, 256>;
var<workgroup> wts: array<f32, 64>;
var<workgroup> red_m: array<f32, 64>;
var<workgroup> red_s: array<f32, 64>;

fn to_f16(v: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

fn load_f16(buf_is_k: bool, idx: u32) -> f32 {
    var word: u32;
    if (buf_is_k) {
        word = kc[idx >> 1u];
    } else {
        word = vc[idx >> 1u];
    }
    let h = unpack2x16float(word);
    return select(h.x, h.y, (idx & 1u) == 1u);
}

fn load(half_kv: bool, buf_is_k: bool, idx: u32) -> f32 {
    if (half_kv) {
        return load_f16(buf_is_k, idx);
    }
    if (buf_is_k) {
        return bitcast<f32>(kc[idx]);
    }
    return bitcast<f32>(vc[idx]);
}

fn score(half_kv: bool, key_base: u32) -> f32 {
    var s = 0.0;
    for (var d = 0u; d < p.hk; d++) {
        s += qh[d] * load(half_kv, true, key_base + d);
    }
    return s * p.scale;
}

fn attend(half_kv: bool, wid: vec3<u32>, lid: u32) {
    let item = wid.x + wid.y * p.groups_x;
    if (item >= p.n_tok * p.n_head) {
        return; // uniform across the workgroup
    }
    let row = item / p.n_head;
    let h = item % p.n_head;
    let kvh = h / (p.n_head / p.n_kv_head);
    let pos = positions[row];
    let seq = seqs[row];
    var lo = 0u;
    if (p.window != 0u && pos + 1u > p.window) {
        lo = pos + 1u - p.window;
    }
    let n = pos + 1u - lo;
    let wk = p.n_kv_head * p.hk;
    let wv = p.n_kv_head * p.hv;

    for (var d = lid; d < p.hk; d += WG) {
        var v = q[(row * p.n_head + h) * p.hk + d];
        if (half_kv) {
            v = to_f16(v);
        }
        qh[d] = v;
    }
    workgroupBarrier();

    // Pass 1: softmax max and normaliser.
    var m = -3.0e38;
    var sum = 0.0;
    for (var j = lid; j < n; j += WG) {
        let slot = seq * p.capacity + (lo + j) % p.capacity;
        let s = score(half_kv, slot * wk + kvh * p.hk);
        let m2 = max(m, s);
        sum = sum * exp_acc(m - m2) + exp_acc(s - m2);
        m = m2;
    }
    red_m[lid] = m;
    red_s[lid] = sum;
    workgroupBarrier();
    for (var st = WG / 2u; st > 0u; st >>= 1u) {
        if (lid < st) {
            let ma = red_m[lid];
            let mb = red_m[lid + st];
            let mm = max(ma, mb);
            red_s[lid] = red_s[lid] * exp_acc(ma - mm) + red_s[lid + st] * exp_acc(mb - mm);
            red_m[lid] = mm;
        }
        workgroupBarrier();
    }
    let gmax = red_m[0];
    let inv = 1.0 / red_s[0];

    // Pass 2: weighted sum of values.
    var acc: array<f32, 4>;
    for (var t0 = 0u; t0 < n; t0 += WG) {
        let j = t0 + lid;
        var wgt = 0.0;
        if (j < n) {
            let slot = seq * p.capacity + (lo + j) % p.capacity;
            wgt = exp_acc(score(half_kv, slot * wk + kvh * p.hk) - gmax) * inv;
            if (half_kv) {
                wgt = to_f16(wgt);
            }
        }
        wts[lid] = wgt;
        workgroupBarrier();
        let tn = min(WG, n - t0);
        for (var jj = 0u; jj < tn; jj++) {
            let slot = seq * p.capacity + (lo + t0 + jj) % p.capacity;
            let vb = slot * wv + kvh * p.hv;
            let wj = wts[jj];
            for (var i = 0u; i < PER_INV; i++) {
                let d = lid + i * WG;
                if (d < p.hv) {
                    acc[i] += wj * load(half_kv, false, vb + d);
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < PER_INV; i++) {
        let d = lid + i * WG;
        if (d < p.hv) {
            out[(row * p.n_head + h) * p.hv + d] = acc[i];
        }
    }
}

@compute @workgroup_size(64)
fn attn_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    attend(true, wid, lid);
}

@compute @workgroup_size(64)
fn attn_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    attend(false, wid, lid);
}
