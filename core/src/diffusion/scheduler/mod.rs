//! Noise schedulers for flow-matching models: the timesteps a generation visits and the update
//! of the latents from each model prediction.
//!
//! Both follow diffusers (0.37) exactly on the settings Wan uses, including where it computes
//! in f64 (the sigma schedule) and where in f32 (everything per step), so the timesteps and
//! sigmas come out identical and the per-step latents agree to the last bit or close to it.

mod config;
mod flow_euler;
mod linalg;
mod sigmas;
mod unipc;

pub use config::SchedulerSpec;
pub use flow_euler::{FlowMatchEuler, FlowMatchEulerConfig};
pub use unipc::{FinalSigma, SolverType, UniPc, UniPcConfig};

/// A denoising schedule, stepped once per model evaluation.
///
/// Usage: for each `t` in [`timesteps`](Self::timesteps), run the model on the current
/// sample at `t`, combine guidance, then call [`step`](Self::step) with that prediction.
pub trait NoiseScheduler: Send {
    /// The timesteps the model is evaluated at, in order (the value its timestep embedding
    /// receives; UniPC's are whole numbers).
    fn timesteps(&self) -> &[f32];

    /// The noise level of each step, then the final one (`timesteps().len() + 1` values).
    fn sigmas(&self) -> &[f32];

    /// How many steps have been taken; `step` next applies to `timesteps()[step_index()]`.
    fn step_index(&self) -> usize;

    /// Advances `sample` in place by one step, given the (guided) model prediction for it.
    fn step(&mut self, model_output: &[f32], sample: &mut [f32]) -> Result<(), SchedulerError>;
}

/// What can go wrong building or stepping a scheduler.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SchedulerError {
    #[error("the {what} has {got} values, expected {expected}")]
    Length {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("all {0} steps were already taken")]
    Finished(usize),
    #[error("the number of inference steps must be at least 1")]
    NoSteps,
    #[error("scheduler setting not supported: {0}")]
    Unsupported(String),
    #[error("invalid scheduler setting: {0}")]
    Invalid(String),
}

/// Checks the per-step inputs' lengths; the sample's length is fixed by the first step.
fn check_lengths(model_output: &[f32], sample: &[f32]) -> Result<(), SchedulerError> {
    if model_output.len() != sample.len() {
        return Err(SchedulerError::Length {
            what: "model output",
            expected: sample.len(),
            got: model_output.len(),
        });
    }
    Ok(())
}
