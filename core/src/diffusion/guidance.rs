//! Classifier-free guidance and the expert choice of two-expert models (Wan 2.2 A14B).

use super::scheduler::SchedulerError;

/// `uncond + scale * (cond - uncond)`, written into `cond`.
///
/// The three operations are rounded one by one in this order, as diffusers' pipelines do, so
/// the result is bit-identical to theirs. A `scale` of 1 gives `cond` back up to rounding;
/// pipelines skip the unconditional pass entirely when `scale <= 1`.
pub fn classifier_free_guidance(
    cond: &mut [f32],
    uncond: &[f32],
    scale: f32,
) -> Result<(), SchedulerError> {
    if cond.len() != uncond.len() {
        return Err(SchedulerError::Length {
            what: "unconditional prediction",
            expected: cond.len(),
            got: uncond.len(),
        });
    }
    for (c, &u) in cond.iter_mut().zip(uncond) {
        *c = u + scale * (*c - u);
    }
    Ok(())
}

/// Which network of a two-expert model denoises a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expert {
    /// The first (high-noise) transformer, with the first guidance scale (`cfg`).
    High,
    /// The second (low-noise) transformer, with the second guidance scale (`cfg2`).
    Low,
}

/// The switch between Wan 2.2 A14B's two experts: the high-noise one while
/// `timestep >= boundary_ratio * num_train_timesteps`, the low-noise one after.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpertSwitch {
    /// `None` for single-network models (every step is [`Expert::High`]).
    pub boundary_ratio: Option<f64>,
    pub num_train_timesteps: u32,
}

impl ExpertSwitch {
    /// The expert for a step at `timestep` (a scheduler's timestep, as the model receives it).
    pub fn expert(&self, timestep: f32) -> Expert {
        match self.boundary_ratio {
            // diffusers compares the timestep with the boundary in f32 (tensor vs. Python float).
            Some(r) if timestep < (r * self.num_train_timesteps as f64) as f32 => Expert::Low,
            _ => Expert::High,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guidance_is_uncond_plus_scaled_difference() {
        let mut cond = vec![1.0, -2.0, 0.5];
        classifier_free_guidance(&mut cond, &[0.0, 1.0, 0.5], 5.0).unwrap();
        assert_eq!(cond, vec![5.0, -14.0, 0.5]);
        let err = classifier_free_guidance(&mut cond, &[0.0], 5.0).unwrap_err();
        assert!(err.to_string().contains("unconditional"), "{err}");
    }

    #[test]
    fn experts_switch_at_the_boundary() {
        let two = ExpertSwitch {
            boundary_ratio: Some(0.875),
            num_train_timesteps: 1000,
        };
        assert_eq!(two.expert(999.0), Expert::High);
        assert_eq!(two.expert(875.0), Expert::High);
        assert_eq!(two.expert(874.9), Expert::Low);
        let one = ExpertSwitch {
            boundary_ratio: None,
            num_train_timesteps: 1000,
        };
        assert_eq!(one.expert(1.0), Expert::High);
    }
}
