//! The f64 sigma arithmetic diffusers does with numpy, reproduced operation by operation.

/// `numpy.linspace(start, stop, num)` in f64, including its rounding: `i * step + start`, the
/// last value set to `stop` exactly.
pub(super) fn linspace(start: f64, stop: f64, num: usize) -> Vec<f64> {
    let div = num.saturating_sub(1);
    let delta = stop - start;
    let mut y: Vec<f64> = (0..num).map(|i| i as f64).collect();
    if div > 0 {
        let step = delta / div as f64;
        if step == 0.0 {
            // numpy's path for steps that underflow: divide first, then scale.
            y.iter_mut().for_each(|v| *v = *v / div as f64 * delta);
        } else {
            y.iter_mut().for_each(|v| *v *= step);
        }
    } else {
        y.iter_mut().for_each(|v| *v *= delta);
    }
    y.iter_mut().for_each(|v| *v += start);
    if num > 1 {
        y[num - 1] = stop;
    }
    y
}

/// The flow-matching time shift `shift * s / (1 + (shift - 1) * s)` in f64, rounded as
/// numpy evaluates it.
pub(super) fn shift_f64(shift: f64, s: f64) -> f64 {
    shift * s / (1.0 + (shift - 1.0) * s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linspace_matches_numpy() {
        // numpy.linspace(1, 0.001, 5) printed with repr().
        assert_eq!(
            linspace(1.0, 0.001, 5),
            vec![1.0, 0.75025, 0.5005, 0.25075000000000003, 0.001]
        );
        assert_eq!(linspace(2.0, 3.0, 1), vec![2.0]);
        assert!(linspace(2.0, 3.0, 0).is_empty());
        assert_eq!(linspace(1.0, 1.0, 3), vec![1.0, 1.0, 1.0]);
    }

    #[test]
    fn shift_keeps_the_ends() {
        assert_eq!(shift_f64(3.0, 1.0), 1.0);
        assert_eq!(shift_f64(3.0, 0.0), 0.0);
        assert_eq!(shift_f64(1.0, 0.25), 0.25);
        assert_eq!(shift_f64(3.0, 0.5), 0.75);
    }
}
