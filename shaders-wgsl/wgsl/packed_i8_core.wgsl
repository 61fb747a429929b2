// The functions of packed_i8.wgsl in core WGSL (shifts and masks), for implementations without
// the `packed_4x8_integer_dot_product` language extension. Integer results, so the same values.

fn pack_i8(v: vec4<i32>) -> u32 {
    let b = vec4<u32>(bitcast<vec4<u32>>(v) & vec4<u32>(0xffu));
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

fn unpack_i8(w: u32) -> vec4<i32> {
    // Each byte moved to the top, then shifted back down with its sign.
    let s = bitcast<vec4<i32>>(vec4<u32>(w << 24u, w << 16u, w << 8u, w));
    return s >> vec4<u32>(24u);
}

fn dot_i8(a: u32, b: u32) -> i32 {
    return dot(unpack_i8(a), unpack_i8(b));
}
