// The KV cache as attention.wgsl reads it on every device: u32 words holding f16 pairs (the
// low half first; attn_f16) or f32 bit patterns (attn_f32). attn_kv_f16.wgsl is the form for
// devices with shader-f16.

@group(0) @binding(1) var<storage, read> kc: array<u32>;
@group(0) @binding(2) var<storage, read> vc: array<u32>;

fn load_f16(buf_is_k: bool, idx: u32) -> f32 {
    var word = 0u;
    if (buf_is_k) {
        word = kc[idx >> 1u];
    } else {
        word = vc[idx >> 1u];
    }
    let h = unpack2x16float(word);
    return select(h.x, h.y, (idx & 1u) == 1u);
}

// Element `idx` of the key (`buf_is_k`) or value cache, f16 (`half_kv`) or f32.
fn load(half_kv: bool, buf_is_k: bool, idx: u32) -> f32 {
    if (half_kv) {
        return load_f16(buf_is_k, idx);
    }
    if (buf_is_k) {
        return bitcast<f32>(kc[idx]);
    }
    return bitcast<f32>(vc[idx]);
}
