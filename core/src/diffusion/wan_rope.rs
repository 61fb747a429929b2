//! The two position encodings of Wan's DiT: the sinusoidal timestep embedding and the split of
//! a head between the 3-D rotary embedding's axes (the rotation itself is the graph's
//! `RopeMulti` of kind `Video`).
//!
//! Facts followed (diffusers 0.37's `Timesteps`, `get_1d_rotary_pos_embed` and
//! `WanRotaryPosEmbed`, see tests/data/video/README.md): the timestep sinusoid is computed in
//! f32, cos half first; the rotary angles are made in f64 and rounded to f32 only as cos / sin;
//! the head dimension splits into frame / row / column parts of `d - 4(d/6)`, `2(d/6)`,
//! `2(d/6)` channels, each rotating interleaved pairs `(x[2i], x[2i+1])` by its own position.

/// The base of the timestep sinusoid.
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
}
