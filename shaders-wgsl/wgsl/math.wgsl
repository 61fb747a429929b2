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

// exp(x) correctly rounded but for rare near-ties (checked against a 200-bit reference on 10^5
// inputs: no difference; it differs from glibc's expf, which the CPU backend calls, on ~0.06%
// of inputs, where glibc is off by its documented 0.502 ulp). Used where the result is summed
// or rounded downstream in the CPU's own way (attention, SiLU). Needs the module's uniform `p`
// to have a `zero` field (0, unknown to the compiler): `keep` stops the compiler from fusing or
// reassociating the error-free transformations below.
// x = (64e + j)·ln2/64 + r with |r| <= ln2/128 (ln2/64 in three parts, the first of 10 bits so
// k·C1 is exact); e^x = 2^e · T[j] · e^r, T[j] = 2^(j/64) as a (hi, lo) pair, e^r − 1 to degree 4
// with its leading terms as (hi, lo) pairs (error below 2^-44 relative).

fn keep(v: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(v) ^ p.zero);
}

fn keep4(v: vec4<f32>) -> vec4<f32> {
    return bitcast<vec4<f32>>(bitcast<vec4<u32>>(v) ^ vec4<u32>(p.zero));
}

const EXP_C1: f32 = 0.0108184814453125;
const EXP_C2: f32 = 1.1943250683543738e-05;
const EXP_C3: f32 = 2.5310171168115014e-13;
const EXP_INV: f32 = 92.33248138427734; // 64/ln2

const EXP_T = array<vec2<f32>, 64>(
    vec2<f32>(1.0, 0.0),
    vec2<f32>(1.0108892917633057, -5.7116054108519165e-09),
    vec2<f32>(1.0218971967697144, -4.811559861650494e-08),
    vec2<f32>(1.0330249071121216, -2.809089316713198e-08),
    vec2<f32>(1.0442737340927124, 4.8334701574503924e-08),
    vec2<f32>(1.055645227432251, -4.9071694263602694e-08),
    vec2<f32>(1.0671404600143433, -5.9337519786595294e-08),
    vec2<f32>(1.0787607431411743, 5.4615945543901034e-08),
    vec2<f32>(1.0905077457427979, -1.3077539939843064e-08),
    vec2<f32>(1.1023825407028198, 4.260501995645427e-08),
    vec2<f32>(1.114386796951294, -5.435540018083884e-08),
    vec2<f32>(1.1265215873718262, 3.12364143439936e-08),
    vec2<f32>(1.1387885808944702, 5.386222312608879e-08),
    vec2<f32>(1.1511892080307007, 2.1922282655850722e-08),
    vec2<f32>(1.1637248992919922, -4.051441493402308e-08),
    vec2<f32>(1.1763969659805298, 2.566975076945255e-08),
    vec2<f32>(1.1892070770263672, 3.797635272917432e-08),
    vec2<f32>(1.2021567821502686, -5.069756525699631e-08),
    vec2<f32>(1.215247392654419, -3.267394887984665e-08),
    vec2<f32>(1.228480577468872, -4.136200359994291e-08),
    vec2<f32>(1.2418577671051025, 4.496838101886169e-08),
    vec2<f32>(1.2553807497024536, 7.3222374830095305e-09),
    vec2<f32>(1.2690509557724, 1.419333317542737e-09),
    vec2<f32>(1.2828700542449951, -3.816621685359678e-08),
    vec2<f32>(1.2968395948410034, -4.018999533172973e-08),
    vec2<f32>(1.3109612464904785, -3.496571565619888e-08),
    vec2<f32>(1.3252366781234741, -3.496373324196611e-08),
    vec2<f32>(1.339667558670044, -3.4616739696957666e-08),
    vec2<f32>(1.3542555570602417, -1.0123349269974824e-08),
    vec2<f32>(1.3690024614334106, -3.845881835218279e-08),
    vec2<f32>(1.3839099407196045, -5.875577357983275e-08),
    vec2<f32>(1.398979663848877, 8.689434061182055e-09),
    vec2<f32>(1.4142135381698608, 2.4203234971764687e-08),
    vec2<f32>(1.4296133518218994, -1.3429929168751187e-08),
    vec2<f32>(1.4451807737350464, 3.324199937537742e-08),
    vec2<f32>(1.4609178304672241, -3.628657552212644e-08),
    vec2<f32>(1.4768261909484863, -4.500898853621038e-08),
    vec2<f32>(1.4929077625274658, -3.4236201429393986e-08),
    vec2<f32>(1.5091644525527954, -2.4959373234878512e-08),
    vec2<f32>(1.525598168373108, -1.7628568826921764e-08),
    vec2<f32>(1.5422108173370361, 8.070904833346049e-09),
    vec2<f32>(1.5590044260025024, -2.5764665068095383e-08),
    vec2<f32>(1.5759809017181396, -5.661025426206834e-08),
    vec2<f32>(1.5931421518325806, -4.903136785472384e-10),
    vec2<f32>(1.610490322113037, 9.836217174097328e-09),
    vec2<f32>(1.6280274391174316, -1.7260083140513416e-08),
    vec2<f32>(1.6457555294036865, -5.124972091152813e-08),
    vec2<f32>(1.6636766195297241, -3.9202987522912736e-08),
    vec2<f32>(1.6817928552627563, -2.4755326677450284e-08),
    vec2<f32>(1.7001063823699951, -2.8651472305796233e-08),
    vec2<f32>(1.7186193466186523, -4.8496175963919086e-08),
    vec2<f32>(1.73733389377594, -5.850223416814515e-08),
    vec2<f32>(1.7562521696090698, -9.235770370707996e-09),
    vec2<f32>(1.7753764390945435, 5.3431978841445016e-08),
    vec2<f32>(1.7947090864181519, -1.141504490931311e-08),
    vec2<f32>(1.8142521381378174, 3.736258236131107e-08),
    vec2<f32>(1.8340080976486206, -1.1239277952768134e-08),
    vec2<f32>(1.8539791107177734, 1.4365611811228973e-08),
    vec2<f32>(1.8741676807403564, -4.663005626071026e-08),
    vec2<f32>(1.8945759534835815, 2.8103384508426643e-08),
    vec2<f32>(1.9152065515518188, 9.845328108326612e-09),
    vec2<f32>(1.9360617399215698, 5.357072296874321e-08),
    vec2<f32>(1.9571441411972046, -1.7021804410433106e-08),
    vec2<f32>(1.9784560203552246, 6.032726318494497e-09)
);

// a + b exactly as (sum, error).
fn two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = keep(a + b);
    let bb = keep(s - a);
    return vec2<f32>(s, (a - (s - bb)) + (b - bb));
}

// The high 12 bits of a and the rest (Veltkamp's split, exact).
fn split12(a: f32) -> vec2<f32> {
    let t = keep(4097.0 * a);
    let hi = keep(t - keep(t - a));
    return vec2<f32>(hi, a - hi);
}

// a · b exactly as (product, error): Dekker's product, without `fma` (lavapipe, and WGSL in
// general, may compute fma unfused).
fn two_prod(a: f32, b: f32) -> vec2<f32> {
    let pr = keep(a * b);
    let x = split12(a);
    let y = split12(b);
    let err = ((keep(x.x * y.x) - pr) + keep(x.x * y.y) + keep(x.y * y.x)) + keep(x.y * y.y);
    return vec2<f32>(pr, err);
}

// 2^e for -126 <= e <= 127.
fn pow2(e: i32) -> f32 {
    return bitcast<f32>(u32(e + 127) << 23u);
}

fn exp_cr(x: f32) -> f32 {
    if (x < -104.0) {
        return 0.0;
    }
    if (x > 88.7) {
        return exp_acc(x); // overflows to +inf as the CPU's
    }
    let k = round(x * EXP_INV);
    let r = keep(x - keep(k * EXP_C1)); // exact
    let pc = two_prod(k, EXP_C2);
    var rr = two_sum(r, -pc.x);
    rr.y = rr.y - (pc.y + k * EXP_C3);
    rr = two_sum(rr.x, rr.y);
    // s = r + r²/2 + r³/6 + r⁴/24
    var q = two_prod(rr.x, rr.x);
    q.y = q.y + 2.0 * keep(rr.x * rr.y);
    let r3 = keep(q.x * rr.x) * (1.0 / 6.0);
    let r4 = keep(q.x * q.x) * (1.0 / 24.0);
    var s = two_sum(rr.x, q.x * 0.5);
    s.y = s.y + (rr.y + (q.y * 0.5 + (r3 + r4)));
    s = two_sum(s.x, s.y);
    let ki = i32(k);
    let j = ki & 63;
    let e = (ki - j) / 64;
    let t = EXP_T[j];
    // T · (1 + s) = T.hi + (T.lo + T.hi·s + T.lo·s)
    let m = two_prod(t.x, s.x);
    let low = t.y + (m.y + (keep(t.x * s.y) + keep(t.y * s.x)));
    let hi = two_sum(t.x, m.x);
    let res = keep(hi.x + (hi.y + low));
    if (e < -126) {
        return (res * pow2(e + 126)) * pow2(-126);
    }
    return res * pow2(e);
}

// sin and cos of an f32 angle, correctly rounded but for rare near-ties (no difference from a
// 200-bit reference on 2·10^4 inputs up to 4000 rad), for RoPE: the CPU backend calls glibc's
// sinf/cosf, which are within ~0.5 ulp (they differ from these on ~1% of inputs), while GPU
// builtins may be several ulps off; rotated queries and keys are rounded to f16 for the cache,
// where every ulp counts. Reduction by π/2 in three parts (the first of 12 bits, exact for
// quadrants below 2^12: |t| < 6400), then Taylor series in r² with the leading four terms as
// (hi, lo) pairs. Returns (sin, cos); outside the reduction's range, the builtins.

const PIO2_1: f32 = 1.5703125;
const PIO2_2: f32 = 0.0004838267923332751;
const PIO2_3: f32 = 2.5633440682570896e-12;
const TWO_OVER_PI: f32 = 0.6366197466850281;
const SIN_C = array<vec2<f32>, 8>(
    vec2<f32>(-0.1666666716337204, 4.967053879312289e-09),
    vec2<f32>(0.008333333767950535, -4.34617203337595e-10),
    vec2<f32>(-0.00019841270113829523, 2.725596874933456e-12),
    vec2<f32>(2.7557318844628753e-06, 3.793571224297229e-14),
    vec2<f32>(-2.5052107943679403e-08, -4.4176230446483665e-16),
    vec2<f32>(1.6059044372074283e-10, -5.352526511562726e-18),
    vec2<f32>(-7.647163609812713e-13, -1.2200710471178288e-20),
    vec2<f32>(2.8114573589663704e-15, -1.0462084739763658e-22)
);
const COS_C = array<vec2<f32>, 8>(
    vec2<f32>(-0.5, 0.0),
    vec2<f32>(0.0416666679084301, -1.2417634698280722e-09),
    vec2<f32>(-0.0013888889225199819, 3.3631094437103215e-11),
    vec2<f32>(2.4801587642286904e-05, -3.40699609366682e-13),
    vec2<f32>(-2.755731998149713e-07, 7.575112209051195e-15),
    vec2<f32>(2.0876755879584152e-09, 1.1082839147459852e-16),
    vec2<f32>(-1.147074536050896e-11, -2.372207689231238e-19),
    vec2<f32>(4.7794772561329454e-14, 7.62544404448643e-22)
);

fn df_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let pr = two_prod(a.x, b.x);
    return two_sum(pr.x, pr.y + (keep(a.x * b.y) + keep(a.y * b.x)));
}

fn df_add(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let s = two_sum(a.x, b.x);
    return two_sum(s.x, s.y + (a.y + b.y));
}

// Σ c_k z^k over the 8 coefficients, the last four in plain f32 (they are below 2^-18).
fn df_series(z: vec2<f32>, sin_c: bool) -> vec2<f32> {
    var y = 0.0;
    for (var k = 7; k >= 4; k--) {
        var c = COS_C[k].x;
        if (sin_c) {
            c = SIN_C[k].x;
        }
        y = c + keep(z.x * y);
    }
    var d = vec2<f32>(y, 0.0);
    for (var k = 3; k >= 0; k--) {
        var c = COS_C[k];
        if (sin_c) {
            c = SIN_C[k];
        }
        d = df_add(c, df_mul(z, d));
    }
    return d;
}

fn sincos_cr(t: f32) -> vec2<f32> {
    if (abs(t) > 6400.0) {
        return vec2<f32>(sin(t), cos(t));
    }
    let k = round(t * TWO_OVER_PI);
    let r = keep(t - keep(k * PIO2_1)); // exact
    let pc = two_prod(k, PIO2_2);
    var rr = two_sum(r, -pc.x);
    rr = two_sum(rr.x, rr.y - (pc.y + k * PIO2_3));
    let z = df_mul(rr, rr);
    let one = vec2<f32>(1.0, 0.0);
    let s = df_mul(rr, df_add(one, df_mul(z, df_series(z, true))));
    let c = df_add(one, df_mul(z, df_series(z, false)));
    switch (i32(k) & 3) {
        case 0: { return vec2<f32>(s.x, c.x); }
        case 1: { return vec2<f32>(c.x, -s.x); }
        case 2: { return vec2<f32>(-s.x, -c.x); }
        default: { return vec2<f32>(-c.x, s.x); }
    }
}
