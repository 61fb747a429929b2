// Causal attention over one layer's KV cache, for decode and prefill alike. One workgroup per
// (query row, query head); query heads share key/value heads in groups (GQA). A row at
// position `pos` of sequence `seq` attends to cached positions max(0, pos + 1 - window) ..= end,
// where `end` (binding 7) is `pos` itself for a causal row and a bidirectional range's last
// position for its rows (an image's tokens that see each other both ways, as Gemma 3 decodes
// them); the window is still counted back from the row's own position.
//
// The arithmetic is the CPU backend's (backend/cpu/attention.rs), so that both give the same
// bits as far as `exp` allows: scores in `simd::dot`'s order; the softmax max, then exps
// summed in f64 in key order (exact.wgsl) and the normaliser rounded from f64; then each
// invocation accumulates its own output dimensions key after key. Scores are computed in
// parallel (three times: max, sum, weights) and combined in workgroup memory, tile by tile.
// With an f16 cache, queries and weights are rounded to f16 first, as the CPU backend (and
// llama.cpp) multiply in the cache's type. `keep` hides a product from the compiler, so it is
// not fused with the following addition (the CPU rounds both).
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
    zero: u32,      // 0, unknown to the compiler (see `keep`)
    per_seq: u32,   // block table entries per sequence
    _pad2: u32,
}

const BLOCK: u32 = 64u; // KV_BLOCK (backend/block_table.rs)

@group(0) @binding(0) var<storage, read> q: array<f32>;
// Bindings 1 and 2, the key and value caches `kc` and `vc`, and `load` come from attn_kv.wgsl
// (u32 words) or attn_kv_f16.wgsl (native f16, attn_f16 only).
@group(0) @binding(3) var<storage, read> positions: array<u32>;
@group(0) @binding(4) var<storage, read> seqs: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
// Each sequence's pool blocks, for a full-attention layer (window 0).
@group(0) @binding(6) var<storage, read> tables: array<u32>;
// Per row, the last position it attends to (at least its own).
@group(0) @binding(7) var<storage, read> ends: array<u32>;
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> qh: array<f32, 256>;
var<workgroup> wts: array<f32, 64>;
var<workgroup> inv_shared: f32;

// The CPU's f16 rounding (exact.wgsl), not pack2x16float's implementation-defined one.
fn to_f16(v: f32) -> f32 {
    return round_f16(v);
}

fn qk4(half_kv: bool, key_base: u32, d: u32) -> vec4<f32> {
    let k = vec4<f32>(load(half_kv, true, key_base + d), load(half_kv, true, key_base + d + 1u), load(half_kv, true, key_base + d + 2u), load(half_kv, true, key_base + d + 3u));
    return keep4(vec4<f32>(qh[d], qh[d + 1u], qh[d + 2u], qh[d + 3u]) * k);
}

// q·k times the scale, in the CPU backend's order (`simd::dot`): 16 lane sums over chunks of
// 16, a sequential tail, the lanes added in order, then the tail.
fn score(half_kv: bool, key_base: u32) -> f32 {
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    let full = p.hk / 16u * 16u;
    for (var d = 0u; d < full; d += 16u) {
        a0 += qk4(half_kv, key_base, d);
        a1 += qk4(half_kv, key_base, d + 4u);
        a2 += qk4(half_kv, key_base, d + 8u);
        a3 += qk4(half_kv, key_base, d + 12u);
    }
    var tail = 0.0;
    for (var d = full; d < p.hk; d++) {
        tail += keep(qh[d] * load(half_kv, true, key_base + d));
    }
    var s = a0.x;
    s += a0.y;
    s += a0.z;
    s += a0.w;
    s += a1.x;
    s += a1.y;
    s += a1.z;
    s += a1.w;
    s += a2.x;
    s += a2.y;
    s += a2.z;
    s += a2.w;
    s += a3.x;
    s += a3.y;
    s += a3.z;
    s += a3.w;
    return keep((s + tail) * p.scale);
}

// Cache slot of position lo + j: through the block table for a full-attention layer, in the
// sequence's ring for a sliding-window one.
fn slot_of(seq: u32, lo: u32, j: u32) -> u32 {
    let pos = lo + j;
    if (p.window == 0u) {
        return tables[seq * p.per_seq + pos / BLOCK] * BLOCK + pos % BLOCK;
    }
    return seq * p.capacity + pos % p.capacity;
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
    let n = max(ends[row], pos) + 1u - lo;
    let wk = p.n_kv_head * p.hk;
    let wv = p.n_kv_head * p.hv;
    let kb = kvh * p.hk;

    for (var d = lid; d < p.hk; d += WG) {
        var v = q[(row * p.n_head + h) * p.hk + d];
        if (half_kv) {
            v = to_f16(v);
        }
        qh[d] = v;
    }
    workgroupBarrier();

    // The softmax as the CPU backend forms it: the max (any order), exp of each score minus
    // it, those summed in f64 in key order, the normaliser (1/sum) rounded from f64.
    var m = -3.0e38;
    for (var j = lid; j < n; j += WG) {
        m = max(m, score(half_kv, slot_of(seq, lo, j) * wk + kb));
    }
    let gmax = wg_max(lid, m); // reduce.wgsl or reduce_sg.wgsl
    var sum = F64(0u, 0u, 0);
    for (var t0 = 0u; t0 < n; t0 += WG) {
        let j = t0 + lid;
        var e = 0.0;
        if (j < n) {
            e = exp_cr(score(half_kv, slot_of(seq, lo, j) * wk + kb) - gmax);
        }
        wts[lid] = e;
        workgroupBarrier();
        if (lid == 0u) {
            for (var jj = 0u; jj < min(WG, n - t0); jj++) {
                sum = f64_add(sum, f64_from_f32(wts[jj]));
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        inv_shared = f64_recip_to_f32(sum);
    }
    workgroupBarrier();
    let inv = inv_shared;

    // Weighted sum of values, key after key (the CPU's axpy: product, then sum).
    var acc = array<f32, 4>();
    for (var t0 = 0u; t0 < n; t0 += WG) {
        let j = t0 + lid;
        var wgt = 0.0;
        if (j < n) {
            wgt = exp_cr(score(half_kv, slot_of(seq, lo, j) * wk + kb) - gmax) * inv;
            if (half_kv) {
                wgt = to_f16(wgt);
            }
        }
        wts[lid] = wgt;
        workgroupBarrier();
        let tn = min(WG, n - t0);
        for (var jj = 0u; jj < tn; jj++) {
            let vb = slot_of(seq, lo, t0 + jj) * wv + kvh * p.hv;
            let wj = wts[jj];
            for (var i = 0u; i < PER_INV; i++) {
                let d = lid + i * WG;
                if (d < p.hv) {
                    acc[i] += keep(wj * load(half_kv, false, vb + d));
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
