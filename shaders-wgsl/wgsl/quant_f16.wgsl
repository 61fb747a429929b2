// F16 weights read through a native f16 storage binding (WGSL `enable f16;`, wgpu's
// SHADER_F16): the replacement of quant.wgsl for F16 weights on devices that have it, with the
// same interface (byte offsets, `scales_f16` / `quad_f16`). f16 to f32 is exact, so products
// are those of quant.wgsl's word unpacking bit for bit. Rows of F16 weights are whole
// 32-element units, so every 4-element group starts on an 8-byte boundary.

@group(0) @binding(0) var<storage, read> w: array<vec2<f16>>;

fn scales_f16(row: u32, u: u32) -> vec2<f32> {
    return vec2<f32>(1.0, 0.0);
}

fn quad_f16(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {
    let i = (row + 64u * u + 8u * q) >> 2u;
    return vec4<f32>(vec2<f32>(w[i]), vec2<f32>(w[i + 1u]));
}
