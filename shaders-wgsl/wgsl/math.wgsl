// exp(x) to within one f32 ulp (GPU `exp` builtins may be tens of ulps off: lavapipe's is up to
// 61), so that softmax, attention and SiLU follow the CPU backend's (correctly rounded) exp
// closely: their results are rounded to f16 or quantized downstream, where a few ulps change
// outcomes. Cody–Waite reduction x = k·ln2 + r (ln2 split so k·LN2_HI is exact), a degree-8
// Taylor polynomial for e^r − 1 on |r| ≤ ln2/2 (error below 2^-27), then scaling by 2^k.
// Appended to the modules that need it.

const LOG2_E: f32 = 1.44269504;
const LN2_HI: f32 = 0.693145752; // 16 significant bits
const LN2_LO: f32 = 1.42860677e-06;

fn exp_acc(x: f32) -> f32 {
    if (x < -104.0) {
        return 0.0;
    }
    if (x > 88.8) {
        // +inf, formed from a run-time value: a constant infinity is a shader-creation error
        // in browsers (Tint rejects `bitcast<f32>(0x7f800000u)`); x is never NaN here.
        return bitcast<f32>(select(0x7f800000u, 0x7fc00000u, x != x));
    }
    let k = round(x * LOG2_E);
    let r = fma(-k, LN2_LO, fma(-k, LN2_HI, x));
    var p = 2.48015873e-05;
    p = fma(p, r, 1.98412698e-04);
    p = fma(p, r, 1.38888889e-03);
    p = fma(p, r, 8.33333333e-03);
    p = fma(p, r, 4.16666667e-02);
    p = fma(p, r, 1.66666667e-01);
    p = fma(p, r, 0.5);
    let e = 1.0 + fma(p * r, r, r);
    // 2^k may not be representable on its own at the ends of the range: scale in two steps.
    let ki = i32(k);
    if (ki > 127) {
        return ldexp(ldexp(e, 127), ki - 127);
    }
    if (ki < -125) {
        return ldexp(ldexp(e, -125), ki + 125);
    }
    return ldexp(e, ki);
}
