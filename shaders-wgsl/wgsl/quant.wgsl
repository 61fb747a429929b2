// Dequantization of weight rows for every weight type the wgpu backend supports. Not a kernel
// on its own: the Rust side appends it to a kernel file that declares `w: array<u32>` (the
// weight bytes, read as little-endian words because blocks are not 4-byte aligned) and
// forwarding functions `scales`/`quad` to the `scales_<type>`/`quad_<type>` pair of the
// weight's type.
//
// A row is read in 32-element units (one legacy block, or one K-quant sub-block). For unit `u`
// of the row at byte offset `row`, `scales_<type>(row, u)` gives the unit's two scale values
// and `quad_<type>(row, u, q, sc)` its elements 4q .. 4q + 3 (q < 8) — four values from one
// word of quants, with no per-element arrays, which compilers keep in registers.
// Every formula evaluates scale first, then times the quant, as the CPU dequantizers do.

// The weight bytes of the kernel's binding 0 (quant_f16.wgsl replaces this file for F16
// weights on devices with shader-f16).
@group(0) @binding(0) var<storage, read> w: array<u32>;

fn wbyte(off: u32) -> u32 {
    return (w[off >> 2u] >> ((off & 3u) * 8u)) & 0xFFu;
}

fn wu32(off: u32) -> u32 {
    let s = (off & 3u) * 8u;
    let i = off >> 2u;
    let lo = w[i] >> s;
    // A shift by 32 is undefined in WGSL: select the aligned case instead.
    let hi = select(w[i + 1u] << (32u - s), 0u, s == 0u);
    return lo | hi;
}

fn wf16(off: u32) -> f32 {
    return unpack2x16float(wbyte(off) | (wbyte(off + 1u) << 8u)).x;
}

// The four bytes of a word as sign-extended values.
fn sbytes(word: u32) -> vec4<f32> {
    let v = vec4<i32>(bitcast<i32>(word << 24u), bitcast<i32>(word << 16u), bitcast<i32>(word << 8u), bitcast<i32>(word));
    return vec4<f32>(v >> vec4<u32>(24u));
}

// Bits `shift .. shift + 4` of each byte of a word.
fn nibbles(word: u32, shift: u32) -> vec4<u32> {
    let s = vec4<u32>(0u, 8u, 16u, 24u) + shift;
    return (vec4<u32>(word) >> s) & vec4<u32>(0xFu);
}

// Bit `bit` of each byte of a word.
fn bits(word: u32, bit: u32) -> vec4<u32> {
    let s = vec4<u32>(0u, 8u, 16u, 24u) + bit;
    return (vec4<u32>(word) >> s) & vec4<u32>(1u);
}

// F32 and F16 have no scales.
fn scales_f32(row: u32, u: u32) -> vec2<f32> {
    return vec2<f32>(1.0, 0.0);
}

fn quad_f32(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {
    let b = row + 128u * u + 16u * q;
    return bitcast<vec4<f32>>(vec4<u32>(wu32(b), wu32(b + 4u), wu32(b + 8u), wu32(b + 12u)));
}

fn scales_f16(row: u32, u: u32) -> vec2<f32> {
    return vec2<f32>(1.0, 0.0);
}

fn quad_f16(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {
    let b = row + 64u * u + 8u * q;
    return vec4<f32>(unpack2x16float(wu32(b)), unpack2x16float(wu32(b + 4u)));
}

// Q4_0 (18 B): d, qs[16]; element j < 16 is the low nibble of qs[j], j >= 16 the high one;
// value = d * (q - 8).
fn scales_q4_0(row: u32, u: u32) -> vec2<f32> {
    return vec2<f32>(wf16(row + 18u * u), 0.0);
}

fn quad_q4_0(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {
    let word = wu32(row + 18u * u + 2u + 4u * (q & 3u));
    return sc.x * (vec4<f32>(nibbles(word, 4u * (q >> 2u))) - 8.0);
}

// Q4_1 (20 B): d, m, qs[16]; value = d * q + m.
fn scales_q4_1(row: u32, u: u32) -> vec2<f32> {
    let b = row + 20u * u;
    return vec2<f32>(wf16(b), wf16(b + 2u));
}

// The min m is not part of the quad: callers add min_q4_1 (the product multiplies it by the
// activation block's sum, as the CPU backend does with Q8_1's stored sum).
fn quad_q4_1(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {
    let word = wu32(row + 20u * u + 4u + 4u * (q & 3u));
    return sc.x * vec4<f32>(nibbles(word, 4u * (q >> 2u)));
}

fn min_q4_1(sc: vec2<f32>) -> f32 {
    return sc.y;
}

// Q5_0 (22 B): d, qh (u32, bit j = fifth bit of element j), qs[16]; value = d * (q - 16).
fn scales_q5_0(row: u32, u: u32) -> vec2<f32> {
    return vec2<f32>(wf16(row + 22u * u), 0.0);
}

fn quad_q5_0(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {
    let b = row + 22u * u;
    let word = wu32(b + 6u + 4u * (q & 3u));
    let qh = wu32(b + 2u);
    let hi = (vec4<u32>(qh) >> (vec4<u32>(0u, 1u, 2u, 3u) + 4u * q)) & vec4<u32>(1u);
    let v = nibbles(word, 4u * (q >> 2u)) | (hi << vec4<u32>(4u));
    return sc.x * (vec4<f32>(v) - 16.0);
}

// Q8_0 (34 B): d, qs[32] as i8; value = q * d.
fn scales_q8_0(row: u32, u: u32) -> vec2<f32> {
    return vec2<f32>(wf16(row + 34u * u), 0.0);
}

fn quad_q8_0(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {
    return sbytes(wu32(row + 34u * u + 2u + 4u * q)) * sc.x;
}

// The six-bit (scale, min) pair of sub-block `sub` of a Q4_K/Q5_K block (scales at `s`).
fn scale_min_k4(s: u32, sub: u32) -> vec2<u32> {
    if (sub < 4u) {
        return vec2<u32>(wbyte(s + sub) & 63u, wbyte(s + sub + 4u) & 63u);
    }
    let sc = (wbyte(s + sub + 4u) & 0xFu) | ((wbyte(s + sub - 4u) >> 6u) << 4u);
    let mn = (wbyte(s + sub + 4u) >> 4u) | ((wbyte(s + sub) >> 6u) << 4u);
    return vec2<u32>(sc, mn);
}

// (d * sc, dmin * m) of sub-block `u & 7` of a Q4_K/Q5_K block at `base`.
fn k4_scales(base: u32, sub: u32) -> vec2<f32> {
    let sm = scale_min_k4(base + 4u, sub);
    return vec2<f32>(wf16(base) * f32(sm.x), wf16(base + 2u) * f32(sm.y));
}

// Q4_K (144 B): d, dmin, scales[12], qs[128]. Sub-block sub = 2c + n takes nibble n of
// qs[32c + l]; value = (d * sc) * q - dmin * m.
fn scales_q4_k(row: u32, u: u32) -> vec2<f32> {
    return k4_scales(row + 144u * (u >> 3u), u & 7u);
}

fn quad_q4_k(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {
    let sub = u & 7u;
    let word = wu32(row + 144u * (u >> 3u) + 16u + 32u * (sub >> 1u) + 4u * q);
    return sc.x * vec4<f32>(nibbles(word, 4u * (sub & 1u))) - sc.y;
}

// Q5_K (176 B): d, dmin, scales[12], qh[32], qs[128]; the fifth bit of sub-block `sub`'s
// element l is bit `sub` of qh[l].
fn scales_q5_k(row: u32, u: u32) -> vec2<f32> {
    return k4_scales(row + 176u * (u >> 3u), u & 7u);
}

fn quad_q5_k(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {
    let sub = u & 7u;
    let b = row + 176u * (u >> 3u);
    let word = wu32(b + 48u + 32u * (sub >> 1u) + 4u * q);
    let h = wu32(b + 16u + 4u * q);
    let v = nibbles(word, 4u * (sub & 1u)) | (bits(h, sub) << vec4<u32>(4u));
    return sc.x * vec4<f32>(v) - sc.y;
}

// Q6_K (210 B): ql[128], qh[64], scales[16] (i8), d. Unit u = 8 * block + 4h + s covers
// elements 128h + 32s + l: low nibble (s / 2) of ql[64h + 32(s % 2) + l], top bits
// 2s..2s+2 of qh[32h + l]; value = (d * scale) * (q - 32), scale = scales[8h + 2s + l / 16].
// The two scale values are those of the unit's two halves.
fn scales_q6_k(row: u32, u: u32) -> vec2<f32> {
    let b = row + 210u * (u >> 3u);
    let d = wf16(b + 208u);
    let sc = wu32(b + 192u + 8u * ((u >> 2u) & 1u) + 2u * (u & 3u));
    let s = sbytes(sc);
    return vec2<f32>(d * s.x, d * s.y);
}

fn quad_q6_k(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {
    let b = row + 210u * (u >> 3u);
    let h = (u >> 2u) & 1u;
    let s = u & 3u;
    let lw = wu32(b + 64u * h + 32u * (s & 1u) + 4u * q);
    let hw = wu32(b + 128u + 32u * h + 4u * q);
    let hi = (vec4<u32>(hw) >> (vec4<u32>(0u, 8u, 16u, 24u) + 2u * s)) & vec4<u32>(3u);
    let v = vec4<f32>(vec4<i32>(nibbles(lw, 4u * (s >> 1u)) | (hi << vec4<u32>(4u))) - vec4<i32>(32));
    return select(sc.y, sc.x, q < 4u) * v;
}

// Integer forms, for products with quantized activations that follow the CPU backend's
// arithmetic exactly (matmul.wgsl): `iquad_<type>` gives the integer quants of elements
// 4q .. 4q + 3 of unit `u` (offsets applied: q - 8, q - 16, q - 32; Q4_1, Q4_K and Q5_K are
// unsigned, their minimum handled apart), `lscale_<type>` a 32-element block's (d, m),
// `kscale_<type>` a K sub-block's integer (scale, min) — for Q6_K the scales of the unit's two
// halves — and `kdm_<type>` a K block's (d, dmin).

fn sbytes_i(word: u32) -> vec4<i32> {
    let v = vec4<i32>(bitcast<i32>(word << 24u), bitcast<i32>(word << 16u), bitcast<i32>(word << 8u), bitcast<i32>(word));
    return v >> vec4<u32>(24u);
}

fn iquad_q4_0(row: u32, u: u32, q: u32) -> vec4<i32> {
    let word = wu32(row + 18u * u + 2u + 4u * (q & 3u));
    return vec4<i32>(nibbles(word, 4u * (q >> 2u))) - vec4<i32>(8);
}

fn lscale_q4_0(row: u32, u: u32) -> vec2<f32> {
    return vec2<f32>(wf16(row + 18u * u), 0.0);
}

fn iquad_q4_1(row: u32, u: u32, q: u32) -> vec4<i32> {
    let word = wu32(row + 20u * u + 4u + 4u * (q & 3u));
    return vec4<i32>(nibbles(word, 4u * (q >> 2u)));
}

fn lscale_q4_1(row: u32, u: u32) -> vec2<f32> {
    return scales_q4_1(row, u);
}

fn iquad_q5_0(row: u32, u: u32, q: u32) -> vec4<i32> {
    let b = row + 22u * u;
    let word = wu32(b + 6u + 4u * (q & 3u));
    let qh = wu32(b + 2u);
    let hi = (vec4<u32>(qh) >> (vec4<u32>(0u, 1u, 2u, 3u) + 4u * q)) & vec4<u32>(1u);
    return vec4<i32>(nibbles(word, 4u * (q >> 2u)) | (hi << vec4<u32>(4u))) - vec4<i32>(16);
}

fn lscale_q5_0(row: u32, u: u32) -> vec2<f32> {
    return vec2<f32>(wf16(row + 22u * u), 0.0);
}

fn iquad_q8_0(row: u32, u: u32, q: u32) -> vec4<i32> {
    return sbytes_i(wu32(row + 34u * u + 2u + 4u * q));
}

fn lscale_q8_0(row: u32, u: u32) -> vec2<f32> {
    return vec2<f32>(wf16(row + 34u * u), 0.0);
}

fn iquad_q4_k(row: u32, u: u32, q: u32) -> vec4<i32> {
    let sub = u & 7u;
    let word = wu32(row + 144u * (u >> 3u) + 16u + 32u * (sub >> 1u) + 4u * q);
    return vec4<i32>(nibbles(word, 4u * (sub & 1u)));
}

fn kscale_q4_k(row: u32, u: u32) -> vec2<i32> {
    return vec2<i32>(scale_min_k4(row + 144u * (u >> 3u) + 4u, u & 7u));
}

fn kdm_q4_k(row: u32, blk: u32) -> vec2<f32> {
    let b = row + 144u * blk;
    return vec2<f32>(wf16(b), wf16(b + 2u));
}

fn iquad_q5_k(row: u32, u: u32, q: u32) -> vec4<i32> {
    let sub = u & 7u;
    let b = row + 176u * (u >> 3u);
    let word = wu32(b + 48u + 32u * (sub >> 1u) + 4u * q);
    let h = wu32(b + 16u + 4u * q);
    return vec4<i32>(nibbles(word, 4u * (sub & 1u)) | (bits(h, sub) << vec4<u32>(4u)));
}

fn kscale_q5_k(row: u32, u: u32) -> vec2<i32> {
    return vec2<i32>(scale_min_k4(row + 176u * (u >> 3u) + 4u, u & 7u));
}

fn kdm_q5_k(row: u32, blk: u32) -> vec2<f32> {
    let b = row + 176u * blk;
    return vec2<f32>(wf16(b), wf16(b + 2u));
}

fn iquad_q6_k(row: u32, u: u32, q: u32) -> vec4<i32> {
    let b = row + 210u * (u >> 3u);
    let h = (u >> 2u) & 1u;
    let s = u & 3u;
    let lw = wu32(b + 64u * h + 32u * (s & 1u) + 4u * q);
    let hw = wu32(b + 128u + 32u * h + 4u * q);
    let hi = (vec4<u32>(hw) >> (vec4<u32>(0u, 8u, 16u, 24u) + 2u * s)) & vec4<u32>(3u);
    return vec4<i32>(nibbles(lw, 4u * (s >> 1u)) | (hi << vec4<u32>(4u))) - vec4<i32>(32);
}

fn kscale_q6_k(row: u32, u: u32) -> vec2<i32> {
    let b = row + 210u * (u >> 3u);
    let sc = wu32(b + 192u + 8u * ((u >> 2u) & 1u) + 2u * (u & 3u));
    return sbytes_i(sc).xy;
}

fn kdm_q6_k(row: u32, blk: u32) -> vec2<f32> {
    return vec2<f32>(wf16(row + 210u * blk + 208u), 0.0);
}
