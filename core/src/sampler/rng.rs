//! A small seeded random generator with no global state, giving the same stream on every
//! platform (native and wasm), plus an `exp` built from basic IEEE operations only, so that
//! sampling from the same logits with the same seed picks the same token everywhere.

/// xoshiro256** (Blackman & Vigna), seeded through SplitMix64.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut st = seed;
        let s = [
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
        ];
        Rng { s }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// A seed from whatever varies between calls without asking the OS for entropy: a counter, an
/// address, and natively std's per-process hash keys (not used on `wasm32-unknown-unknown`,
/// which has no entropy source; the browser side should pass a seed drawn in JavaScript).
pub fn fresh_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let local = 0u8;
    let mut st =
        COUNTER.fetch_add(1, Ordering::Relaxed) ^ (&local as *const u8 as u64).rotate_left(32);
    #[cfg(not(all(target_arch = "wasm32", not(target_os = "wasi"))))]
    {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(st);
        st = h.finish();
    }
    splitmix64(&mut st)
}

/// e^x using only +, -, * and exact scaling, so every platform computes the same bits
/// (library `exp` implementations may differ in the last place). Relative error below 1e-9:
/// plenty for sampling weights, and half the cost of a full-precision version.
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.0 {
        return f64::INFINITY;
    }
    if x < -745.0 {
        return 0.0;
    }
    // x = k ln2 + r with |r| <= ln2 / 2; ln2 split in two parts so k*LN2_HI is exact.
    const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000); // low 21 mantissa bits zero
    const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76); // ln2 - LN2_HI
    let k = (x * std::f64::consts::LOG2_E).round();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    // Taylor polynomial to r^10 / 10! (Horner form); the first omitted term is < 2e-12.
    const C: [f64; 11] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
        1.0 / 40320.0,
        1.0 / 362_880.0,
        1.0 / 3_628_800.0,
    ];
    let mut sum = C[10];
    for &c in C[..10].iter().rev() {
        sum = sum * r + c;
    }
    // Scale by 2^k in two steps so that subnormal results do not overflow the exponent field.
    let k = k as i32;
    let (k1, k2) = (k / 2, k - k / 2);
    sum * pow2(k1) * pow2(k2)
}

fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xoshiro_reference_stream() {
        // Same seed, same stream; different seeds, different streams.
        let a: Vec<u64> = (0..4)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..4)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..4)
            .scan(Rng::new(8), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // SplitMix64's published first output for seed 0.
        assert_eq!(splitmix64(&mut 0), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn uniform_mean_and_range() {
        let mut r = Rng::new(1);
        let n = 100_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let u = r.next_f64();
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        let mean = sum / n as f64;
        assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
    }

    #[test]
    fn exp_matches_std_closely() {
        let mut x = -740.0;
        while x < 709.0 {
            let (a, b) = (exp(x), x.exp());
            assert!(
                ((a - b) / b).abs() < 1e-11 || (a - b).abs() < 1e-300,
                "exp({x}) = {a}, std {b}"
            );
            x += 0.37;
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-1000.0), 0.0);
        assert_eq!(exp(1000.0), f64::INFINITY);
    }
}
