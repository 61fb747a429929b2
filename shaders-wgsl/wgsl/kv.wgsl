// KV-cache append: writes each row's keys and values at its slot of one layer's cache: for a
// full-attention layer, position pos % 64 of the pool block its sequence's table maps for
// pos / 64; for a sliding-window ring, seq · capacity + pos % capacity. One invocation per element pair, so an f16 cache (two halves packed
// per u32 word) is written without races, rounded by exact.wgsl's `f32_to_f16_bits` (appended).
// `store_f32` keeps full precision (bit patterns as u32).

struct Params {
    n_tok: u32,
    wk: u32,       // key elements per row (n_kv_head · head_dim_k), even
    wv: u32,       // value elements per row, even
    capacity: u32,
    paged: u32,    // 1: a full-attention layer, reached through `tables`
    per_seq: u32,  // table entries per sequence
    _pad0: u32,
    _pad1: u32,
}

const BLOCK: u32 = 64u; // KV_BLOCK (backend/block_table.rs)

@group(0) @binding(0) var<storage, read> k: array<f32>;
@group(0) @binding(1) var<storage, read> v: array<f32>;
@group(0) @binding(2) var<storage, read> positions: array<u32>;
@group(0) @binding(3) var<storage, read> seqs: array<u32>;
@group(0) @binding(4) var<storage, read_write> kc: array<u32>;
@group(0) @binding(5) var<storage, read_write> vc: array<u32>;
@group(0) @binding(6) var<storage, read> tables: array<u32>;
@group(0) @binding(7) var<uniform> p: Params;

// Two values rounded to f16 by exact.wgsl's integer rounding (the CPU cache's), packed as
// pack2x16float packs them: the first in the low half.
fn f16_pair(a: f32, b: f32) -> u32 {
    return f32_to_f16_bits(bitcast<u32>(a)) | (f32_to_f16_bits(bitcast<u32>(b)) << 16u);
}

fn slot(t: u32) -> u32 {
    let pos = positions[t];
    if (p.paged != 0u) {
        return tables[seqs[t] * p.per_seq + pos / BLOCK] * BLOCK + pos % BLOCK;
    }
    return seqs[t] * p.capacity + pos % p.capacity;
}

@compute @workgroup_size(64)
fn store_f16(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x;
    let t = gid.y;
    if (t >= p.n_tok) {
        return;
    }
    let s = slot(t);
    if (2u * j < p.wk) {
        let src = t * p.wk + 2u * j;
        kc[(s * p.wk) / 2u + j] = f16_pair(k[src], k[src + 1u]);
    }
    if (2u * j < p.wv) {
        let src = t * p.wv + 2u * j;
        vc[(s * p.wv) / 2u + j] = f16_pair(v[src], v[src + 1u]);
    }
}

@compute @workgroup_size(64)
fn store_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x;
    let t = gid.y;
    if (t >= p.n_tok) {
        return;
    }
    let s = slot(t);
    for (var h = 0u; h < 2u; h++) {
        let e = 2u * j + h;
        if (e < p.wk) {
            kc[s * p.wk + e] = bitcast<u32>(k[t * p.wk + e]);
        }
        if (e < p.wv) {
            vc[s * p.wv + e] = bitcast<u32>(v[t * p.wv + e]);
        }
    }
}
