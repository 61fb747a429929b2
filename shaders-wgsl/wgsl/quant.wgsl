// Dequantization of weight rows, 32 elements ("a unit") at a time, for every weight type the
// wgpu backend supports. Not a kernel on its own: the Rust side appends it to a kernel file
// that declares `w: array<u32>` (the weight bytes, read as little-endian words because blocks
// are not 4-byte aligned) and a `fn unit(row: u32, u: u32) -> array<f32, 32>` that forwards to
// the `unit_<type>` function of the weight's type.
//
// `row` is the byte offset of a row inside `w`; `u` the unit index within the row (elements
// 32u .. 32u + 31). Every formula evaluates scale first, then times the quant, as the CPU
// dequantizers do, so results match them.

fn wbyte(off: u32) -> u32 {
    return (w[off >> 2u] >> ((off & 3u) * 8u)) & 0xFFu;
}

fn wu32(off: u32) -> u32 {
    let s = (off & 3u) * 8u;
    let i = off >> 2u;
    if (s == 0u) {
        return w[i];
    }
    return (w[i] >> s) | (w[i + 1u] << (32u - s));
}

fn wf16(off: u32) -> f32 {
    return unpack2x16float(wbyte(off) | (wbyte(off + 1u) << 8u)).x;
}

// Sign-extends byte `b` (0..255) of a word to i32.
fn sbyte(word: u32, b: u32) -> f32 {
    return f32(i32(word << (24u - 8u * b)) >> 24u);
}

fn unit_f32(row: u32, u: u32) -> array<f32, 32> {
    var y: array<f32, 32>;
    let base = row + 128u * u;
    for (var j = 0u; j < 32u; j++) {
        y[j] = bitcast<f32>(wu32(base + 4u * j));
    }
    return y;
}

fn unit_f16(row: u32, u: u32) -> array<f32, 32> {
    var y: array<f32, 32>;
    let base = row + 64u * u;
    for (var j = 0u; j < 16u; j++) {
        let h = unpack2x16float(wu32(base + 4u * j));
        y[2u * j] = h.x;
        y[2u * j + 1u] = h.y;
    }
    return y;
}

// Q4_0 (18 B): d, qs[16]; element j < 16 is the low nibble of qs[j], j >= 16 the high one.
fn unit_q4_0(row: u32, u: u32) -> array<f32, 32> {
    var y: array<f32, 32>;
    let base = row + 18u * u;
    let d = wf16(base);
    for (var i = 0u; i < 4u; i++) {
        let q = wu32(base + 2u + 4u * i);
        for (var b = 0u; b < 4u; b++) {
            let v = (q >> (8u * b)) & 0xFFu;
            y[4u * i + b] = d * f32(i32(v & 0xFu) - 8);
            y[16u + 4u * i + b] = d * f32(i32(v >> 4u) - 8);
        }
    }
    return y;
}

// Q4_1 (20 B): d, m, qs[16]; value = d * q + m.
fn unit_q4_1(row: u32, u: u32) -> array<f32, 32> {
    var y: array<f32, 32>;
    let base = row + 20u * u;
    let d = wf16(base);
    let m = wf16(base + 2u);
    for (var i = 0u; i < 4u; i++) {
        let q = wu32(base + 4u + 4u * i);
        for (var b = 0u; b < 4u; b++) {
            let v = (q >> (8u * b)) & 0xFFu;
            y[4u * i + b] = d * f32(v & 0xFu) + m;
            y[16u + 4u * i + b] = d * f32(v >> 4u) + m;
        }
    }
    return y;
}

// Q5_0 (22 B): d, qh (u32, bit j = fifth bit of element j), qs[16]; value = d * (q - 16).
fn unit_q5_0(row: u32, u: u32) -> array<f32, 32> {
    var y: array<f32, 32>;
    let base = row + 22u * u;
    let d = wf16(base);
    let qh = wu32(base + 2u);
    for (var i = 0u; i < 4u; i++) {
        let q = wu32(base + 6u + 4u * i);
        for (var b = 0u; b < 4u; b++) {
            let j = 4u * i + b;
            let v = (q >> (8u * b)) & 0xFFu;
            let lo = (v & 0xFu) | (((qh >> j) & 1u) << 4u);
            let hi = (v >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
            y[j] = d * f32(i32(lo) - 16);
            y[j + 16u] = d * f32(i32(hi) - 16);
        }
    }
    return y;
}

// Q8_0 (34 B): d, qs[32] as i8; value = q * d.
fn unit_q8_0(row: u32, u: u32) -> array<f32, 32> {
    var y: array<f32, 32>;
    let base = row + 34u * u;
    let d = wf16(base);
    for (var i = 0u; i < 8u; i++) {
        let q = wu32(base + 2u + 4u * i);
        for (var b = 0u; b < 4u; b++) {
            y[4u * i + b] = sbyte(q, b) * d;
        }
    }
    return y;
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

// Q4_K (144 B): d, dmin, scales[12], qs[128]. Sub-block sub = 2c + n takes nibble n of
// qs[32c + l]; value = (d * sc) * q - dmin * m.
fn unit_q4_k(row: u32, u: u32) -> array<f32, 32> {
    var y: array<f32, 32>;
    let base = row + 144u * (u >> 3u);
    let sub = u & 7u;
    let d = wf16(base);
    let dmin = wf16(base + 2u);
    let sm = scale_min_k4(base + 4u, sub);
    let dl = d * f32(sm.x);
    let ml = dmin * f32(sm.y);
    let qs = base + 16u + 32u * (sub >> 1u);
    let shift = 4u * (sub & 1u);
    for (var i = 0u; i < 8u; i++) {
        let q = wu32(qs + 4u * i);
        for (var b = 0u; b < 4u; b++) {
            let v = (q >> (8u * b + shift)) & 0xFu;
            y[4u * i + b] = dl * f32(v) - ml;
        }
    }
    return y;
}

// Q5_K (176 B): d, dmin, scales[12], qh[32], qs[128]; the fifth bit of sub-block `sub`'s
// element l is bit `sub` of qh[l].
fn unit_q5_k(row: u32, u: u32) -> array<f32, 32> {
    var y: array<f32, 32>;
    let base = row + 176u * (u >> 3u);
    let sub = u & 7u;
    let d = wf16(base);
    let dmin = wf16(base + 2u);
    let sm = scale_min_k4(base + 4u, sub);
    let dl = d * f32(sm.x);
    let ml = dmin * f32(sm.y);
    let qs = base + 48u + 32u * (sub >> 1u);
    let shift = 4u * (sub & 1u);
    for (var i = 0u; i < 8u; i++) {
        let q = wu32(qs + 4u * i);
        let h = wu32(base + 16u + 4u * i);
        for (var b = 0u; b < 4u; b++) {
            let lo = (q >> (8u * b + shift)) & 0xFu;
            let hi = (h >> (8u * b + sub)) & 1u;
            y[4u * i + b] = dl * f32(lo | (hi << 4u)) - ml;
        }
    }
    return y;
}

// Q6_K (210 B): ql[128], qh[64], scales[16] (i8), d. Unit u = 8 * block + 4h + s covers
// elements 128h + 32s + l: low nibble (s / 2) of ql[64h + 32(s % 2) + l], top bits
// 2s..2s+2 of qh[32h + l]; value = (d * scale) * (q - 32).
fn unit_q6_k(row: u32, u: u32) -> array<f32, 32> {
    var y: array<f32, 32>;
    let base = row + 210u * (u >> 3u);
    let h = (u >> 2u) & 1u;
    let s = u & 3u;
    let d = wf16(base + 208u);
    let ql = base + 64u * h + 32u * (s & 1u);
    let lshift = 4u * (s >> 1u);
    let qh = base + 128u + 32u * h;
    let sc = base + 192u + 8u * h + 2u * s;
    let dl0 = d * sbyte(wbyte(sc), 0u);
    let dl1 = d * sbyte(wbyte(sc + 1u), 0u);
    for (var i = 0u; i < 8u; i++) {
        let lw = wu32(ql + 4u * i);
        let hw = wu32(qh + 4u * i);
        for (var b = 0u; b < 4u; b++) {
            let lo = (lw >> (8u * b + lshift)) & 0xFu;
            let hi = (hw >> (8u * b + 2u * s)) & 3u;
            let q = f32(i32(lo | (hi << 4u)) - 32);
            let l = 4u * i + b;
            if (l < 16u) {
                y[l] = dl0 * q;
            } else {
                y[l] = dl1 * q;
            }
        }
    }
    return y;
}
