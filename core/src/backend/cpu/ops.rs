//! Row-wise and element-wise ops of the CPU backend (norms, RoPE, activations, top-k).

use crate::backend::MultiRope;

/// RMS-normalises each `group`-element slice of `x` into `out`, then multiplies by `w`.
/// The sum of squares is accumulated in f64, as llama.cpp does.
pub fn rms_norm(x: &[f32], out: &mut [f32], w: Option<&[f32]>, eps: f32, group: usize) {
    for (xs, os) in x.chunks_exact(group).zip(out.chunks_exact_mut(group)) {
        let ss: f64 = xs.iter().map(|&v| v as f64 * v as f64).sum();
        let scale = 1.0 / ((ss / group as f64) as f32 + eps).sqrt();
        match w {
            Some(w) => {
                for ((o, &v), &wi) in os.iter_mut().zip(xs).zip(w) {
                    *o = v * scale * wi;
                }
            }
            None => {
                for (o, &v) in os.iter_mut().zip(xs) {
                    *o = v * scale;
                }
            }
        }
    }
}

/// Layer normalisation of each `cols`-element row, then `* w + b`.
pub fn layer_norm(
    x: &[f32],
    out: &mut [f32],
    cols: usize,
    w: Option<&[f32]>,
    b: Option<&[f32]>,
    eps: f32,
) {
    for (xs, os) in x.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
        let mean = (xs.iter().map(|&v| v as f64).sum::<f64>() / cols as f64) as f32;
        let var: f64 = xs.iter().map(|&v| ((v - mean) as f64).powi(2)).sum::<f64>() / cols as f64;
        let scale = 1.0 / (var as f32 + eps).sqrt();
        for (i, (o, &v)) in os.iter_mut().zip(xs).enumerate() {
            let mut y = (v - mean) * scale;
            if let Some(w) = w {
                y *= w[i];
            }
            if let Some(b) = b {
                y += b[i];
            }
            *o = y;
        }
    }
}

/// Rotates the first `n_rot` elements of every `head_dim` head of each row by its position.
#[allow(clippy::too_many_arguments)]
#[cfg(test)]
pub fn rope(
    x: &mut [f32],
    cols: usize,
    positions: &[u32],
    head_dim: usize,
    n_rot: usize,
    base: f32,
    neox: bool,
    freq_factors: Option<&[f32]>,
) {
    let table = rope_table(positions, n_rot, base, freq_factors);
    rope_apply(x, cols, &table, head_dim, n_rot, neox);
}

/// The (cos, sin) pairs of every position, `[positions.len()][n_rot / 2]`: the same for every
/// RoPE node of a step with this base (the backend computes them once per step).
pub fn rope_table(
    positions: &[u32],
    n_rot: usize,
    base: f32,
    freq_factors: Option<&[f32]>,
) -> Vec<(f32, f32)> {
    let half = n_rot / 2;
    // Angles as llama.cpp forms them: start at the position and multiply by
    // base^(-2/n_rot) once per pair, in f32 (the accumulated rounding shifts logits by a
    // measurable amount, so we follow it rather than computing each power afresh).
    let step = base.powf(-2.0 / n_rot as f32);
    let mut cs = Vec::with_capacity(positions.len() * half);
    for &pos in positions {
        let mut theta = pos as f32;
        for i in 0..half {
            let t = theta / freq_factors.map_or(1.0, |ff| ff[i]);
            cs.push((t.cos(), t.sin()));
            theta *= step;
        }
    }
    cs
}

/// The (cos, sin) table of [`crate::backend::Op::RopeMulti`]: for each row, one angle per
/// rotated pair, each from its section's position component. Angles are formed as llama.cpp
/// forms them (a position times a frequency kept by repeated multiplication in f32).
pub fn rope_multi_table(
    positions: &[[u32; 4]],
    n_rot: usize,
    base: f32,
    sections: [u32; 4],
    kind: MultiRope,
) -> Vec<(f32, f32)> {
    if kind == MultiRope::Video {
        return rope_video_table(positions, n_rot, base, sections);
    }
    let vision = kind == MultiRope::Vision;
    let half = n_rot / 2;
    let s: [usize; 4] = sections.map(|v| v as usize);
    let total = s.iter().sum::<usize>().max(1);
    let dims = if vision { half } else { n_rot };
    let step = base.powf(-2.0 / dims as f32);
    let starts = [0, s[0], s[0] + s[1], s[0] + s[1] + s[2]];
    let mut cs = Vec::with_capacity(positions.len() * half);
    for p in positions {
        // One running angle per component, as llama.cpp keeps them.
        let mut theta = p.map(|v| v as f32);
        for i in 0..half {
            let sector = i % total;
            let k = (0..4).rev().find(|&k| sector >= starts[k]).unwrap_or(0);
            if vision && sector == starts[k] {
                theta[k] = p[k] as f32;
            }
            let t = theta[k];
            cs.push((t.cos(), t.sin()));
            for th in &mut theta {
                *th *= step;
            }
        }
    }
    cs
}

/// [`rope_multi_table`] for [`MultiRope::Video`] (Wan): section `s` holds `sections[s]`
/// consecutive pairs turned by position component `s`, with frequencies
/// `base^(-2j / (2·sections[s]))` for its `j`-th pair; angles, cos and sin in f64, rounded to
/// f32 at the end (diffusers' `get_1d_rotary_pos_embed(..., freqs_dtype=float64)`).
fn rope_video_table(
    positions: &[[u32; 4]],
    n_rot: usize,
    base: f32,
    sections: [u32; 4],
) -> Vec<(f32, f32)> {
    let base = base as f64;
    // One inverse frequency per pair, with the component it reads.
    let mut freqs: Vec<(usize, f64)> = Vec::with_capacity(n_rot / 2);
    for (s, &n) in sections.iter().enumerate() {
        let d = 2 * n as usize;
        for j in 0..n as usize {
            freqs.push((s, 1.0 / base.powf((2 * j) as f64 / d as f64)));
        }
    }
    let mut cs = Vec::with_capacity(positions.len() * freqs.len());
    for p in positions {
        for &(s, f) in &freqs {
            let angle = p[s] as f64 * f;
            cs.push((angle.cos() as f32, angle.sin() as f32));
        }
    }
    cs
}

/// Applies a [`rope_table`] to each row of `x` (one row per position of the table).
pub fn rope_apply(
    x: &mut [f32],
    cols: usize,
    table: &[(f32, f32)],
    head_dim: usize,
    n_rot: usize,
    neox: bool,
) {
    let half = n_rot / 2;
    for (row, cs) in x
        .chunks_exact_mut(cols)
        .zip(table.chunks_exact(half.max(1)))
    {
        for head in row.chunks_exact_mut(head_dim) {
            for (i, &(c, s)) in cs.iter().enumerate() {
                let (a, b) = if neox {
                    (i, i + half)
                } else {
                    (2 * i, 2 * i + 1)
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * c - x1 * s;
                head[b] = x0 * s + x1 * c;
            }
        }
    }
}

/// GELU with the tanh approximation, as llama.cpp's CPU backend computes it: inputs are
/// rounded to f16 and looked up in a table of f16 results (saturating outside ±10). Matching
/// this keeps our logits within the reference tolerances on GeGLU models, and avoids a `tanh`
/// per element.
#[inline]
pub fn gelu(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        gelu_table()[half::f16::from_f32(x).to_bits() as usize]
    }
}

fn gelu_table() -> &'static [f32] {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| {
                let x = half::f16::from_bits(bits).to_f32();
                half::f16::from_f32(gelu_exact(x)).to_f32()
            })
            .collect()
    })
}

/// GELU with the tanh approximation, in f32.
#[inline]
pub fn gelu_exact(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x * x)).tanh())
}

/// SiLU: x·σ(x).
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// In-place softmax of one row.
pub fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f64;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    for v in row.iter_mut() {
        *v *= inv;
    }
}

/// The `k` largest values of `row` with their indices, best first (ties: lower index first).
pub fn top_k(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    for (i, &v) in row.iter().enumerate() {
        if best.len() == k
            && best
                .last()
                .is_some_and(|&(_, w)| v.partial_cmp(&w) != Some(std::cmp::Ordering::Greater))
        {
            continue;
        }
        let at = best.partition_point(|&(_, w)| w >= v);
        best.insert(at, (i as u32, v));
        best.truncate(k);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_gives_unit_rms() {
        let x = [1.0, 2.0, 3.0, 4.0, -1.0, -1.0, -1.0, -1.0];
        let mut out = [0.0; 8];
        rms_norm(&x, &mut out, None, 0.0, 4);
        for g in out.chunks(4) {
            let ms: f32 = g.iter().map(|v| v * v).sum::<f32>() / 4.0;
            assert!((ms - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn rope_layouts_rotate_the_right_pairs() {
        // Position 1, one frequency (n_rot = 2): a pure rotation by 1 radian.
        let mut x = vec![1.0, 0.0, 5.0, 7.0];
        rope(&mut x, 4, &[1], 4, 2, 10000.0, false, None);
        assert!((x[0] - 1f32.cos()).abs() < 1e-6 && (x[1] - 1f32.sin()).abs() < 1e-6);
        assert_eq!(&x[2..], &[5.0, 7.0]);
        // NeoX pairs element i with i + n_rot/2.
        let mut y = vec![1.0, 3.0, 0.0, 9.0];
        rope(&mut y, 4, &[1], 4, 4, 1.0, true, None);
        assert!((y[0] - 1f32.cos()).abs() < 1e-6 && (y[2] - 1f32.sin()).abs() < 1e-6);
        // Position 0 is the identity.
        let mut z = vec![0.3, -0.2, 0.1, 0.9];
        rope(&mut z, 4, &[0], 4, 4, 10000.0, true, None);
        assert_eq!(z, vec![0.3, -0.2, 0.1, 0.9]);
    }

    #[test]
    fn multi_rope_tables() {
        // Text M-RoPE with equal components is NeoX RoPE at that position.
        let plain = rope_table(&[7, 300], 16, 1e6, None);
        let multi = rope_multi_table(&[[7; 4], [300; 4]], 16, 1e6, [2, 3, 3, 0], MultiRope::Text);
        assert_eq!(plain, multi);
        // Distinct components: pairs 0-1 turn by t, 2-4 by h, 5-7 by w, frequency base^(-i/8).
        let m = rope_multi_table(&[[1, 2, 3, 0]], 16, 100.0, [2, 3, 3, 0], MultiRope::Text);
        for (i, &(c, s)) in m.iter().enumerate() {
            let p = [1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0][i];
            let a = p * 100f32.powf(-(i as f32) / 8.0);
            assert!(
                (c - a.cos()).abs() < 1e-5 && (s - a.sin()).abs() < 1e-5,
                "{i}"
            );
        }
        // Vision: head size 8 (4 pairs), sections of 2 pairs; the exponent restarts at the
        // second section, which turns by the column.
        let v = rope_multi_table(&[[5, 9, 5, 9]], 8, 100.0, [2, 2, 2, 2], MultiRope::Vision);
        let want = [5.0, 5.0 / 10.0, 9.0, 9.0 / 10.0];
        for (i, &(c, s)) in v.iter().enumerate() {
            let a: f32 = want[i];
            assert!(
                (c - a.cos()).abs() < 1e-5 && (s - a.sin()).abs() < 1e-5,
                "{i}"
            );
        }
    }

    #[test]
    fn video_rope_table_restarts_each_section_at_its_own_width() {
        // Wan's split of a 16-wide head: 4 frame pairs, 2 row pairs, 2 column pairs.
        let v = rope_multi_table(&[[3, 5, 7, 0]], 16, 10000.0, [4, 2, 2, 0], MultiRope::Video);
        let mut want = Vec::new();
        for (pos, d) in [(3.0f64, 8.0f64), (5.0, 4.0), (7.0, 4.0)] {
            for j in 0..(d as usize / 2) {
                let a = pos / 10000f64.powf(2.0 * j as f64 / d);
                want.push((a.cos() as f32, a.sin() as f32));
            }
        }
        assert_eq!(v, want);
    }

    #[test]
    fn top_k_orders_and_breaks_ties_by_index() {
        let r = top_k(&[0.5, 2.0, -1.0, 2.0, 1.0], 3);
        assert_eq!(r, vec![(1, 2.0), (3, 2.0), (4, 1.0)]);
    }

    #[test]
    fn activations_have_known_values() {
        assert!((gelu_exact(1.0) - 0.841192).abs() < 1e-5);
        assert!((gelu(1.0) - 0.841192).abs() < 1e-3 && gelu(-11.0) == 0.0 && gelu(12.0) == 12.0);
        assert!((silu(1.0) - 0.731059).abs() < 1e-5);
        let mut r = [1.0, 2.0, 3.0];
        softmax(&mut r);
        assert!((r.iter().sum::<f32>() - 1.0).abs() < 1e-6 && r[2] > r[1]);
    }
}
