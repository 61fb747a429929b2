// Packed 8-bit integers, four to a u32 word (element k in byte k), through WGSL's
// `packed_4x8_integer_dot_product` built-ins: single instructions on most GPUs. Appended to
// the modules that use packed quants where the implementation has the language extension
// (naga everywhere natively; browsers list it in `navigator.gpu.wgslLanguageFeatures`);
// packed_i8_core.wgsl defines the same functions in core WGSL for the others.

fn pack_i8(v: vec4<i32>) -> u32 {
    return pack4xI8(v);
}

fn unpack_i8(w: u32) -> vec4<i32> {
    return unpack4xI8(w);
}

fn dot_i8(a: u32, b: u32) -> i32 {
    return dot4I8Packed(a, b);
}
