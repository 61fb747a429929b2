//! Flow-matching Euler (diffusers' `FlowMatchEulerDiscreteScheduler`, static shift).

use super::sigmas::{linspace, shift_f64};
use super::{check_lengths, NoiseScheduler, SchedulerError};

/// Settings of [`FlowMatchEuler`] (diffusers' names).
#[derive(Clone, Debug, PartialEq)]
pub struct FlowMatchEulerConfig {
    pub num_train_timesteps: u32,
    /// The time shift (Wan's recipes: 3 to 5 for small sizes, more for large ones).
    pub shift: f64,
}

impl Default for FlowMatchEulerConfig {
    /// diffusers' constructor defaults.
    fn default() -> Self {
        Self {
            num_train_timesteps: 1000,
            shift: 1.0,
        }
    }
}

/// `x_next = x + (sigma_next - sigma) * v` over a shifted sigma schedule.
///
/// diffusers shifts twice on the way to the schedule, and this keeps that: the training
/// sigmas `t / N` (t = N..1) are shifted in f32, and the `linspace` between the first and last
/// of those is shifted again in f64 before rounding to f32. The timesteps are `sigma * N` in
/// f32 (not whole numbers).
#[derive(Clone, Debug)]
pub struct FlowMatchEuler {
    timesteps: Vec<f32>,
    sigmas: Vec<f32>,
    step_index: usize,
}

impl FlowMatchEuler {
    pub fn new(config: &FlowMatchEulerConfig, steps: usize) -> Result<Self, SchedulerError> {
        if steps == 0 {
            return Err(SchedulerError::NoSteps);
        }
        if config.num_train_timesteps == 0 {
            return Err(SchedulerError::Invalid(
                "num_train_timesteps must be at least 1".into(),
            ));
        }
        if !(config.shift.is_finite() && config.shift > 0.0) {
            return Err(SchedulerError::Invalid(format!(
                "shift must be a positive number, got {}",
                config.shift
            )));
        }
        let n = config.num_train_timesteps;
        // The constructor's schedule (f32 tensors): only its two ends are used.
        let train_sigma = |t: u32| {
            let s = t as f32 / n as f32;
            config.shift as f32 * s / (1.0 + (config.shift - 1.0) as f32 * s)
        };
        let (sigma_max, sigma_min) = (train_sigma(n) as f64, train_sigma(1) as f64);
        let mut sigmas: Vec<f32> = linspace(sigma_max * n as f64, sigma_min * n as f64, steps)
            .into_iter()
            .map(|t| shift_f64(config.shift, t / n as f64) as f32)
            .collect();
        let timesteps = sigmas.iter().map(|s| s * n as f32).collect();
        sigmas.push(0.0);
        Ok(Self {
            timesteps,
            sigmas,
            step_index: 0,
        })
    }
}

impl NoiseScheduler for FlowMatchEuler {
    fn timesteps(&self) -> &[f32] {
        &self.timesteps
    }

    fn sigmas(&self) -> &[f32] {
        &self.sigmas
    }

    fn step_index(&self) -> usize {
        self.step_index
    }

    fn step(&mut self, model_output: &[f32], sample: &mut [f32]) -> Result<(), SchedulerError> {
        let i = self.step_index;
        if i >= self.timesteps.len() {
            return Err(SchedulerError::Finished(self.timesteps.len()));
        }
        check_lengths(model_output, sample)?;
        let dt = self.sigmas[i + 1] - self.sigmas[i];
        for (x, &v) in sample.iter_mut().zip(model_output) {
            *x += dt * v;
        }
        self.step_index += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_ends_and_errors() {
        let cfg = FlowMatchEulerConfig {
            shift: 3.0,
            ..Default::default()
        };
        let mut s = FlowMatchEuler::new(&cfg, 4).unwrap();
        assert_eq!(s.timesteps()[0], 1000.0);
        assert_eq!(s.sigmas().len(), 5);
        assert_eq!(*s.sigmas().last().unwrap(), 0.0);
        let mut x = vec![1.0; 3];
        assert!(matches!(
            s.step(&[0.0; 2], &mut x),
            Err(SchedulerError::Length { .. })
        ));
        for _ in 0..4 {
            s.step(&[1.0; 3], &mut x).unwrap();
        }
        // sum of dt is -sigma_0 = -1: a constant velocity of 1 takes 1 to 0.
        assert!(x.iter().all(|v| v.abs() < 1e-6), "{x:?}");
        assert_eq!(s.step(&[1.0; 3], &mut x), Err(SchedulerError::Finished(4)));
        assert_eq!(
            FlowMatchEuler::new(&cfg, 0).unwrap_err(),
            SchedulerError::NoSteps
        );
        let bad = FlowMatchEulerConfig {
            shift: -1.0,
            ..Default::default()
        };
        assert!(FlowMatchEuler::new(&bad, 4).is_err());
    }
}
