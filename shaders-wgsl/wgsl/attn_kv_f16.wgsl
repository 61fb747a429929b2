// The f16 KV cache as attention.wgsl reads it on devices with shader-f16 (WGSL `enable f16;`,
// wgpu's SHADER_F16): a native f16 storage binding over the same buffer the store kernel
// writes as packed words, so no unpacking. f16 to f32 is exact, so the results are those of
// attn_kv.wgsl bit for bit. Modules with this file build only `attn_f16` (`half_kv` is true).

@group(0) @binding(1) var<storage, read> kc: array<f16>;
@group(0) @binding(2) var<storage, read> vc: array<f16>;

// Element `idx` of the key (`buf_is_k`) or value cache.
fn load(half_kv: bool, buf_is_k: bool, idx: u32) -> f32 {
    if (buf_is_k) {
        return f32(kc[idx]);
    }
    return f32(vc[idx]);
}
