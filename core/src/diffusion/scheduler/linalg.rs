//! The small f32 linear solve UniPC needs for its coefficients (`torch.linalg.solve`).

/// Solves `a x = b` for a small dense `n x n` system (row-major `a`) in f32, the way LAPACK's
/// `sgesv` does: LU with partial pivoting, each column below the pivot scaled by the pivot's
/// reciprocal, forward then back substitution, dividing by the diagonal through its
/// reciprocal. On the 2 x 2 systems of Wan's order-2 UniPC this gives torch's (MKL's) result
/// bit for bit; larger ones may differ in the last bit (MKL's blocked kernels round
/// differently). Returns `None` for a singular system.
pub(super) fn solve(a: &[f32], b: &[f32]) -> Option<Vec<f32>> {
    let n = b.len();
    debug_assert_eq!(a.len(), n * n);
    let mut m = a.to_vec();
    let mut x = b.to_vec();
    for k in 0..n {
        let p = (k..n).fold(k, |best, r| {
            if m[r * n + k].abs() > m[best * n + k].abs() {
                r
            } else {
                best
            }
        });
        if m[p * n + k] == 0.0 {
            return None;
        }
        if p != k {
            for c in 0..n {
                m.swap(k * n + c, p * n + c);
            }
            x.swap(k, p);
        }
        let inv = 1.0 / m[k * n + k];
        for r in k + 1..n {
            m[r * n + k] *= inv;
            for c in k + 1..n {
                m[r * n + c] -= m[r * n + k] * m[k * n + c];
            }
        }
    }
    for r in 0..n {
        for c in 0..r {
            x[r] -= m[r * n + c] * x[c];
        }
    }
    for r in (0..n).rev() {
        for c in r + 1..n {
            x[r] -= m[r * n + c] * x[c];
        }
        x[r] *= 1.0 / m[r * n + r];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_with_pivoting() {
        // Needs a row swap: the first pivot is 0.
        let x = solve(&[0.0, 1.0, 2.0, 0.0], &[3.0, 4.0]).unwrap();
        assert_eq!(x, vec![2.0, 3.0]);
        let x = solve(
            &[1.0, 1.0, 1.0, 1.0, 2.0, 4.0, 1.0, 3.0, 9.0],
            &[6.0, 17.0, 34.0],
        )
        .unwrap();
        for (got, want) in x.iter().zip([1.0f32, 2.0, 3.0]) {
            assert!((got - want).abs() < 1e-5, "{x:?}");
        }
        assert_eq!(solve(&[1.0, 2.0, 2.0, 4.0], &[1.0, 1.0]), None);
    }
}
