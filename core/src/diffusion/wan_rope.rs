//! The two position encodings of Wan's DiT: the sinusoidal timestep embedding and the 3-D
//! rotary embedding of the video tokens.
//!
//! Facts followed (diffusers 0.37's `Timesteps`, `get_1d_rotary_pos_embed` and
//! `WanRotaryPosEmbed`, see tests/data/video/README.md): the timestep sinusoid is computed in
//! f32, cos half first; the rotary angles are made in f64 and rounded to f32 only as cos / sin;
//! the head dimension splits into frame / row / column parts of `d - 4(d/6)`, `2(d/6)`,
//! `2(d/6)` channels, each rotating interleaved pairs `(x[2i], x[2i+1])` by its own position.

/// The rotary base Wan uses.
const THETA: f64 = 10000.0;

/// The sinusoidal embedding of `timestep` with `dim` channels (even): `cos(t f_i)` for the
/// first half, `sin(t f_i)` for the second, `f_i = exp(-ln(10000) i / (dim / 2))`.
pub(super) fn timestep_sinusoid(timestep: f32, dim: usize) -> Vec<f32> {
    let half = dim / 2;
    // diffusers multiplies an f32 `arange` by the Python float -ln(10000) (rounded to f32 by
    // torch), then divides by `half`, each rounded in f32.
    let c = (-THETA.ln()) as f32;
    let angles: Vec<f32> = (0..half)
        .map(|i| timestep * ((c * i as f32) / half as f32).exp())
        .collect();
    let mut out: Vec<f32> = angles.iter().map(|a| a.cos()).collect();
    out.extend(angles.iter().map(|a| a.sin()));
    out
}

/// How many channels of a head the frame, row and column positions rotate.
pub(super) fn axis_dims(head_dim: usize) -> [usize; 3] {
    let hw = 2 * (head_dim / 6);
    [head_dim - 2 * hw, hw, hw]
}

/// The rotations of every token of a `frames x rows x cols` token grid (tokens in frame, row,
/// column order): `cos` and `sin` per token and per pair of a head's channels.
pub(super) struct Rope {
    pairs: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Rope {
    pub(super) fn new(head_dim: usize, grid: [usize; 3]) -> Rope {
        let dims = axis_dims(head_dim);
        // Inverse frequencies of each axis: 1 / theta^(2i / part), in f64.
        let inv: Vec<Vec<f64>> = dims
            .iter()
            .map(|&d| {
                (0..d / 2)
                    .map(|i| 1.0 / THETA.powf((2 * i) as f64 / d as f64))
                    .collect()
            })
            .collect();
        let pairs = head_dim / 2;
        let tokens = grid.iter().product::<usize>();
        let (mut cos, mut sin) = (
            Vec::with_capacity(tokens * pairs),
            Vec::with_capacity(tokens * pairs),
        );
        for f in 0..grid[0] {
            for r in 0..grid[1] {
                for c in 0..grid[2] {
                    for (axis, pos) in [f, r, c].into_iter().enumerate() {
                        for &w in &inv[axis] {
                            let angle = pos as f64 * w;
                            cos.push(angle.cos() as f32);
                            sin.push(angle.sin() as f32);
                        }
                    }
                }
            }
        }
        Rope { pairs, cos, sin }
    }

    /// Rotates `x`, `[tokens, heads * head_dim]`, in place, every head alike.
    pub(super) fn apply(&self, x: &mut [f32]) {
        let head_dim = 2 * self.pairs;
        let tokens = self.cos.len() / self.pairs.max(1);
        let width = x.len() / tokens.max(1);
        for (t, row) in x.chunks_exact_mut(width).enumerate() {
            let cos = &self.cos[t * self.pairs..(t + 1) * self.pairs];
            let sin = &self.sin[t * self.pairs..(t + 1) * self.pairs];
            for head in row.chunks_exact_mut(head_dim) {
                for (i, pair) in head.chunks_exact_mut(2).enumerate() {
                    let (a, b) = (pair[0], pair[1]);
                    pair[0] = a * cos[i] - b * sin[i];
                    pair[1] = a * sin[i] + b * cos[i];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_split_is_wans() {
        assert_eq!(axis_dims(16), [8, 4, 4]);
        assert_eq!(axis_dims(128), [44, 42, 42]);
    }

    #[test]
    fn sinusoid_is_cos_first() {
        let s = timestep_sinusoid(0.0, 8);
        assert_eq!(s, vec![1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
        let s = timestep_sinusoid(2.0, 4);
        // f_0 = 1, f_1 = exp(-ln(10000) / 2) = 0.01.
        assert!((s[0] - 2f32.cos()).abs() < 1e-6 && (s[2] - 2f32.sin()).abs() < 1e-6);
        assert!((s[1] - 0.02f32.cos()).abs() < 1e-6 && (s[3] - 0.02f32.sin()).abs() < 1e-6);
    }

    #[test]
    fn rope_rotates_pairs_by_each_axis_position() {
        // head_dim 6: one pair per axis (t 2, h 2, w 2), frequency 1 each.
        let rope = Rope::new(6, [2, 2, 3]);
        // Token (1, 0, 2): frame 1, row 0, column 2.
        let token = 2 * 3 + 2;
        let mut x = vec![0f32; 12 * 6];
        x[token * 6..token * 6 + 6].copy_from_slice(&[1.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
        rope.apply(&mut x);
        let got = &x[token * 6..token * 6 + 6];
        let want = [1f32.cos(), 1f32.sin(), 1.0, 0.0, 2f32.cos(), 2f32.sin()];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?}");
        }
    }
}
