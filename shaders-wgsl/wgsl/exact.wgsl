// Correctly rounded arithmetic built from integer operations, for the values that decide an
// activation's 8-bit quants: WGSL's `/` and `sqrt` may be a few ulps off (2.5 ulp allowed) and
// WGSL has no f64, but the CPU backend divides and takes square roots correctly rounded and sums
// RMSNorm's squares in f64. One ulp of an inverse scale or a norm moves quants by one step, so
// these reproduce the CPU's results bit for bit. Integer operations are exact on every device,
// and results are assembled from bit patterns (no ldexp), so no driver rounding is involved.
// Inputs are positive, finite and normal where noted; results are assumed to be normal f32s
// (activations, scales and norms of real models are far from the f32 limits).
// Appended to the modules that need it.

// The 64-bit product of two u32s, as (low word, high word).
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xFFFFu;
    let a1 = a >> 16u;
    let b0 = b & 0xFFFFu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 16u) + (p01 & 0xFFFFu) + (p10 & 0xFFFFu);
    return vec2<u32>((p00 & 0xFFFFu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

// a <= b for 64-bit values (low, high).
fn le64(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.y < b.y || (a.y == b.y && a.x <= b.x);
}

// Number of significant bits of v (0 for 0).
fn bit_len(v: u32) -> u32 {
    return 32u - countLeadingZeros(v);
}

// The f32 m · 2^e for a 24-bit m (2^23 <= m < 2^24) and a normal result.
fn make_f32(m: u32, e: i32) -> f32 {
    return bitcast<f32>((u32(e + 150) << 23u) | (m & 0x7FFFFFu));
}

// Rounds q (bits significant bits, bits > 24) to 24 bits, half to even, with `sticky` set when
// nonzero bits lie below q; returns the f32 q · 2^e.
fn round_to_f32(q: u32, bits: u32, sticky: bool, e: i32) -> f32 {
    let sh = bits - 24u;
    var m = q >> sh;
    let rest = q & ((1u << sh) - 1u);
    let half = 1u << (sh - 1u);
    // `rest == half` with a sticky bit is above the half; an exact half rounds to even.
    if (rest > half || (rest == half && (sticky || (m & 1u) == 1u))) {
        m += 1u;
    }
    var ex = e + i32(sh);
    if (m == 0x1000000u) {
        m >>= 1u;
        ex += 1;
    }
    return make_f32(m, ex);
}

// (24-bit significand, exponent) of a positive normal f32: v = m · 2^e.
fn split_f32(v: f32) -> vec2<i32> {
    let b = bitcast<u32>(v);
    return vec2<i32>(i32((b & 0x7FFFFFu) | 0x800000u), i32((b >> 23u) & 0xFFu) - 150);
}

// a / b correctly rounded (round half to even), for positive normal a and b.
fn div_rn(a: f32, b: f32) -> f32 {
    let sa = split_f32(a);
    let sb = split_f32(b);
    let ma = u32(sa.x);
    let mb = u32(sb.x);
    // Restoring long division: 27 quotient bits of ma / mb · 2^26 (the remainder stays below
    // 2 · mb < 2^25, so nothing overflows).
    var rem = ma;
    var q = 0u;
    for (var i = 0u; i < 27u; i++) {
        q <<= 1u;
        if (rem >= mb) {
            rem -= mb;
            q |= 1u;
        }
        rem <<= 1u;
    }
    return round_to_f32(q, bit_len(q), rem != 0u, sa.y - sb.y - 26);
}

// sqrt(a) correctly rounded, for positive normal a.
fn sqrt_rn(a: f32) -> f32 {
    let s = split_f32(a);
    var m = u32(s.x);
    var e = s.y;
    if ((e & 1) != 0) {
        m <<= 1u;
        e -= 1;
    }
    // R = m · 2^28 (51 to 53 bits, two words); r = floor(sqrt(R)) has 26 or 27 bits.
    let big = vec2<u32>(m << 28u, m >> 4u);
    var r = 0u;
    for (var bit = 27; bit >= 0; bit--) {
        let c = r | (1u << u32(bit));
        if (le64(mul_wide(c, c), big)) {
            r = c;
        }
    }
    let sq = mul_wide(r, r);
    let exact = sq.x == big.x && sq.y == big.y;
    return round_to_f32(r, bit_len(r), !exact, (e - 28) / 2);
}

// f32(v) rounded half to even (WGSL leaves the rounding of large integer conversions open).
fn i2f_rn(v: i32) -> f32 {
    let mag = u32(abs(v));
    if (mag < 0x1000000u) {
        return f32(v); // exact
    }
    let r = round_to_f32(mag, bit_len(mag), false, 0);
    return select(r, -r, v < 0);
}

// An f64 value that is zero or positive and normal, unpacked: significand (2^52 <= m < 2^53,
// as low and high words) and exponent: m · 2^e. Zero has m = 0.
struct F64 {
    lo: u32,
    hi: u32,
    e: i32,
}

// v · v as an exact f64 (the CPU backend's `v as f64 * v as f64`).
fn f64_square(v: f32) -> F64 {
    let b = bitcast<u32>(v) & 0x7FFFFFFFu;
    if (b == 0u) {
        return F64(0u, 0u, 0);
    }
    var m = b & 0x7FFFFFu;
    var e = i32(b >> 23u) - 150;
    if ((b >> 23u) == 0u) {
        e = -149; // subnormal: no implicit bit
    } else {
        m |= 0x800000u;
    }
    let p = mul_wide(m, m); // up to 48 bits
    // Normalise to 53 bits: shift left by 53 - len.
    let len = select(bit_len(p.x), 32u + bit_len(p.y), p.y != 0u);
    let sh = 53u - len;
    return F64(shl64(p, sh).x, shl64(p, sh).y, 2 * e - i32(sh));
}

// 64-bit shifts (by less than 64).
fn shl64(v: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) {
        return v;
    }
    if (s >= 32u) {
        return vec2<u32>(0u, v.x << (s - 32u));
    }
    return vec2<u32>(v.x << s, (v.y << s) | (v.x >> (32u - s)));
}

fn shr64(v: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) {
        return v;
    }
    if (s >= 32u) {
        return vec2<u32>(v.y >> (s - 32u), 0u);
    }
    return vec2<u32>((v.x >> s) | (v.y << (32u - s)), v.y >> s);
}

fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

// a + b rounded as f64 addition rounds (half to even), for zero or positive a and b.
fn f64_add(a: F64, b: F64) -> F64 {
    if (a.hi == 0u && a.lo == 0u) {
        return b;
    }
    if (b.hi == 0u && b.lo == 0u) {
        return a;
    }
    var x = a;
    var y = b;
    if (y.e > x.e) {
        x = b;
        y = a;
    }
    let d = u32(x.e - y.e);
    if (d > 55u) {
        return x; // y is below a quarter ulp of x
    }
    // Three guard bits: significands as m · 8, y shifted right with a sticky bit.
    let mx = shl64(vec2<u32>(x.lo, x.hi), 3u);
    var my = shl64(vec2<u32>(y.lo, y.hi), 3u);
    if (d > 0u) {
        let kept = shr64(my, d);
        let back = shl64(kept, d);
        let lost = back.x != my.x || back.y != my.y;
        my = vec2<u32>(kept.x | select(0u, 1u, lost), kept.y);
    }
    var s = add64(mx, my);
    var e = x.e - 3;
    if ((s.y >> 24u) != 0u) {
        // 2^56 or more: one more bit, folded into the sticky bit.
        let lost = s.x & 1u;
        s = shr64(s, 1u);
        s.x |= lost;
        e += 1;
    }
    let r = s.x & 7u;
    var m = shr64(s, 3u);
    e += 3;
    if (r > 4u || (r == 4u && (m.x & 1u) == 1u)) {
        m = add64(m, vec2<u32>(1u, 0u));
        if ((m.y >> 21u) != 0u) {
            m = shr64(m, 1u);
            e += 1;
        }
    }
    return F64(m.x, m.y, e);
}

// f32(a / n) for an f64 a and an integer 0 < n < 2^16: the f64 quotient rounded half to even,
// then rounded to f32 half to even (the CPU backend's `(ss / n as f64) as f32`).
fn f64_div_to_f32(a: F64, n: u32) -> f32 {
    if (a.hi == 0u && a.lo == 0u) {
        return 0.0;
    }
    // N = m · 2^s with s = 3 + bit_len(n), so that Q = floor(N / n) has 56 or 57 bits. Long
    // division in 16-bit digits (the remainder stays below n < 2^16).
    let s = 3u + bit_len(n);
    let hiw = shr64(vec2<u32>(a.lo, a.hi), 64u - s); // N >> 64
    let low = shl64(vec2<u32>(a.lo, a.hi), s);
    var digits = array<u32, 5>(hiw.x & 0xFFFFu, low.y >> 16u, low.y & 0xFFFFu, low.x >> 16u, low.x & 0xFFFFu);
    var rem = 0u;
    var qd = array<u32, 5>();
    for (var i = 0u; i < 5u; i++) {
        let cur = (rem << 16u) | digits[i];
        qd[i] = cur / n;
        rem = cur % n;
    }
    // Q < 2^57 fits the low four digits.
    let q = vec2<u32>((qd[3] << 16u) | qd[4], (qd[1] << 16u) | qd[2]);
    return round_wide_to_f32(q, rem != 0u, a.e - i32(s));
}

// q · 2^e (q of 54 to 63 bits, `sticky` when nonzero bits lie below q) rounded half to even
// to an f64, then that rounded to an f32 (the CPU's `(... f64 ...) as f32`).
fn round_wide_to_f32(q: vec2<u32>, sticky: bool, e0: i32) -> f32 {
    var e = e0;
    let len = 32u + bit_len(q.y);
    let sh = len - 53u;
    let rest = q.x & ((1u << sh) - 1u);
    let half = 1u << (sh - 1u);
    var m = shr64(q, sh);
    e += i32(sh);
    if (rest > half || (rest == half && (sticky || (m.x & 1u) == 1u))) {
        m = add64(m, vec2<u32>(1u, 0u));
        if ((m.y >> 21u) != 0u) {
            m = shr64(m, 1u);
            e += 1;
        }
    }
    // Then to 24 bits: drop 29 bits, half to even (the f64 is exact now: no sticky).
    let top = (m.y << 3u) | (m.x >> 29u); // 24 bits
    let low29 = m.x & 0x1FFFFFFFu;
    var m24 = top;
    if (low29 > 0x10000000u || (low29 == 0x10000000u && (m24 & 1u) == 1u)) {
        m24 += 1u;
    }
    var e24 = e + 29;
    if (m24 == 0x1000000u) {
        m24 >>= 1u;
        e24 += 1;
    }
    return make_f32(m24, e24);
}

fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

// f32(1 / a) for a positive f64 a: the f64 quotient rounded half to even, then rounded to f32
// (the CPU backend's softmax normaliser `(1.0 / sum) as f32`).
fn f64_recip_to_f32(a: F64) -> f32 {
    // 58 bits of 2^53 / m (in (1, 2]) by restoring division; the remainder stays below
    // 2m < 2^54.
    let m = vec2<u32>(a.lo, a.hi);
    var rem = vec2<u32>(0u, 1u << 21u); // 2^53
    var q = vec2<u32>(0u, 0u);
    for (var i = 0u; i < 58u; i++) {
        q = shl64(q, 1u);
        if (le64(m, rem)) {
            rem = sub64(rem, m);
            q.x |= 1u;
        }
        rem = shl64(rem, 1u);
    }
    // q = floor(2^53 / m · 2^57); 1/a = q · 2^(-57 - 53 - e).
    return round_wide_to_f32(q, rem.x != 0u || rem.y != 0u, -110 - a.e);
}

// A zero or positive f32 as an exact f64.
fn f64_from_f32(v: f32) -> F64 {
    let b = bitcast<u32>(v);
    if (b == 0u) {
        return F64(0u, 0u, 0);
    }
    var m = b & 0x7FFFFFu;
    var e = -149; // subnormal: no implicit bit
    if ((b >> 23u) != 0u) {
        m |= 0x800000u;
        e = i32(b >> 23u) - 150;
    }
    let sh = 53u - bit_len(m);
    let w = shl64(vec2<u32>(m, 0u), sh);
    return F64(w.x, w.y, e - i32(sh));
}

// The f16 nearest to the f32 with bits `x` (ties to even), as f16 bits: the conversion of the
// CPU backend's f16 KV cache and attention (the `half` crate's `f16::from_f32`). WGSL leaves the
// rounding of `pack2x16float` and `f16()` to the implementation, so it is done on integers:
// overflow gives ±inf (from 65520 up), values below half the smallest subnormal give ±0, NaN
// stays NaN (quiet bit set, the top payload bits kept), the sign of zero is kept.
fn f32_to_f16_bits(x: u32) -> u32 {
    let sign = (x >> 16u) & 0x8000u;
    let e = (x >> 23u) & 0xFFu;
    let man = x & 0x7FFFFFu;
    if (e == 0xFFu) {
        return sign | 0x7C00u | select(0u, 0x200u | (man >> 13u), man != 0u);
    }
    if (e >= 143u) {
        return sign | 0x7C00u; // 2^16 and up: past the largest finite f16 even before rounding
    }
    var q = 0u;
    var rest = 0u;
    var half = 0u;
    if (e >= 113u) {
        // A normal f16: rebias the exponent, keep 10 of 23 fraction bits. A carry out of the
        // fraction steps into the next binade (or to inf), which is the right bit pattern.
        q = ((e - 112u) << 10u) | (man >> 13u);
        rest = man & 0x1FFFu;
        half = 0x1000u;
    } else {
        // A subnormal f16 (or zero): the value in units of 2^-24 is m · 2^(e - 126).
        let s = 126u - e; // 14 ..= 126
        if (s >= 25u) {
            return sign; // below 2^-25, half the smallest subnormal: ±0
        }
        let m = man | 0x800000u; // e >= 102 here, so the f32 is normal
        q = m >> s;
        rest = m & ((1u << s) - 1u);
        half = 1u << (s - 1u);
    }
    if (rest > half || (rest == half && (q & 1u) == 1u)) {
        q += 1u;
    }
    return sign | q;
}

// The f32 value of f16 bits `h` (exact; subnormal f16s become normal f32s, never flushed).
fn f16_bits_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1Fu;
    let man = h & 0x3FFu;
    if (e == 0x1Fu) {
        return bitcast<f32>(sign | 0x7F800000u | (man << 13u));
    }
    if (e != 0u) {
        return bitcast<f32>(sign | ((e + 112u) << 23u) | (man << 13u));
    }
    if (man == 0u) {
        return bitcast<f32>(sign);
    }
    // Subnormal: man · 2^-24 with man < 2^10; normalise so its top bit is the implicit one.
    let top = 31u - countLeadingZeros(man); // 0 ..= 9
    let frac = (man << (23u - top)) & 0x7FFFFFu;
    return bitcast<f32>(sign | ((top + 103u) << 23u) | frac);
}

// v rounded to the nearest f16 (ties to even), as an f32.
fn round_f16(v: f32) -> f32 {
    return f16_bits_to_f32(f32_to_f16_bits(bitcast<u32>(v)));
}
