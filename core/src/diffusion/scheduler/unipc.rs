//! UniPC multistep for flow matching (diffusers' `UniPCMultistepScheduler` with
//! `use_flow_sigmas`, `prediction_type="flow_prediction"`, `predict_x0`): Wan's default.
//!
//! Each step first corrects the incoming sample with the new prediction (UniC, from the
//! second step on), then predicts the next sample (UniP) from the last `order` data
//! predictions `x0 = x - sigma * v`. The scalar coefficients are computed in f32 in the same
//! order as diffusers' 0-d tensor arithmetic, so the per-step latents match its to the bit on
//! Wan's settings (order 2).

use std::collections::VecDeque;

use super::linalg::solve;
use super::sigmas::{linspace, shift_f64};
use super::{check_lengths, NoiseScheduler, SchedulerError};

/// How the UniPC update's `B(h)` is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SolverType {
    /// `B(h) = h`.
    Bh1,
    /// `B(h) = e^h - 1` (the default, and Wan's).
    Bh2,
}

/// The last sigma of the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalSigma {
    /// 0: the last step lands on the data prediction (the default, and Wan's).
    Zero,
    /// The smallest sigma of the schedule, repeated.
    SigmaMin,
}

/// Settings of [`UniPc`] (diffusers' names). `Default` is diffusers' constructor defaults for
/// a flow-prediction model; Wan's recipes set `flow_shift` (3 for 480p, 5 for 720p and i2v).
#[derive(Clone, Debug, PartialEq)]
pub struct UniPcConfig {
    pub num_train_timesteps: u32,
    pub flow_shift: f64,
    /// 1 to 3 in practice; 2 is recommended for guided sampling.
    pub solver_order: usize,
    pub solver_type: SolverType,
    /// Lower the order on the last steps (`min(order, steps left)`).
    pub lower_order_final: bool,
    pub final_sigma: FinalSigma,
    /// Step indices whose following corrector is skipped (diffusers' `disable_corrector`).
    pub disable_corrector: Vec<usize>,
}

impl Default for UniPcConfig {
    fn default() -> Self {
        Self {
            num_train_timesteps: 1000,
            flow_shift: 1.0,
            solver_order: 2,
            solver_type: SolverType::Bh2,
            lower_order_final: true,
            final_sigma: FinalSigma::Zero,
            disable_corrector: Vec::new(),
        }
    }
}

/// The UniPC scheduler state for one generation.
#[derive(Clone, Debug)]
pub struct UniPc {
    config: UniPcConfig,
    timesteps: Vec<f32>,
    sigmas: Vec<f32>,
    step_index: usize,
    /// Data predictions of the last `solver_order` steps, oldest first.
    history: VecDeque<Vec<f32>>,
    /// The sample the last predictor started from (the corrector redoes that step).
    last_sample: Option<Vec<f32>>,
    /// Steps taken so far, capped at the order (the warm-up of the multistep method).
    lower_order_nums: usize,
    /// The order the last predictor used; the next corrector uses the same.
    this_order: usize,
}

impl UniPc {
    pub fn new(config: &UniPcConfig, steps: usize) -> Result<Self, SchedulerError> {
        if steps == 0 {
            return Err(SchedulerError::NoSteps);
        }
        if config.num_train_timesteps == 0 {
            return Err(SchedulerError::Invalid(
                "num_train_timesteps must be at least 1".into(),
            ));
        }
        if config.solver_order == 0 {
            return Err(SchedulerError::Invalid(
                "solver_order must be at least 1".into(),
            ));
        }
        if !(config.flow_shift.is_finite() && config.flow_shift > 0.0) {
            return Err(SchedulerError::Invalid(format!(
                "flow_shift must be a positive number, got {}",
                config.flow_shift
            )));
        }
        let n = config.num_train_timesteps as f64;
        let mut sigmas: Vec<f64> = linspace(1.0, 1.0 / n, steps + 1);
        sigmas.pop();
        for s in sigmas.iter_mut() {
            *s = shift_f64(config.flow_shift, *s);
        }
        // diffusers keeps the first sigma off 1 (log(1 - sigma) must stay finite).
        if (sigmas[0] - 1.0).abs() < 1e-6 {
            sigmas[0] -= 1e-6;
        }
        // f64 -> int64 in torch truncates toward zero.
        let timesteps = sigmas.iter().map(|s| (s * n).trunc() as f32).collect();
        let last = match config.final_sigma {
            FinalSigma::Zero => 0.0,
            FinalSigma::SigmaMin => sigmas[steps - 1],
        };
        sigmas.push(last);
        Ok(Self {
            config: config.clone(),
            timesteps,
            sigmas: sigmas.into_iter().map(|s| s as f32).collect(),
            step_index: 0,
            history: VecDeque::new(),
            last_sample: None,
            lower_order_nums: 0,
            this_order: 0,
        })
    }

    /// log(alpha) - log(sigma) with alpha = 1 - sigma, in f32.
    fn lambda(&self, index: usize) -> f32 {
        let sigma = self.sigmas[index];
        (1.0 - sigma).ln() - sigma.ln()
    }

    /// The UniPC coefficients for one update from sigma index `s0` to `t` with `order`
    /// earlier points at sigma indices `s0 - 1, s0 - 2, ...`.
    fn coefficients(&self, t: usize, s0: usize, order: usize) -> Coefficients {
        let sigma_t = self.sigmas[t];
        let sigma_s0 = self.sigmas[s0];
        let alpha_t = 1.0 - sigma_t;
        let lambda_s0 = self.lambda(s0);
        let h = self.lambda(t) - lambda_s0;
        let mut rks: Vec<f32> = (1..order)
            .map(|i| (self.lambda(s0 - i) - lambda_s0) / h)
            .collect();
        rks.push(1.0);
        let hh = -h;
        let h_phi_1 = hh.exp_m1();
        let b_h = match self.config.solver_type {
            SolverType::Bh1 => hh,
            SolverType::Bh2 => hh.exp_m1(),
        };
        let mut h_phi_k = h_phi_1 / hh - 1.0;
        let mut factorial = 1u64;
        let mut r = Vec::with_capacity(order * order);
        let mut b = Vec::with_capacity(order);
        for i in 1..=order {
            r.extend(rks.iter().map(|&x| int_pow(x, i - 1)));
            b.push(h_phi_k * factorial as f32 / b_h);
            factorial *= i as u64 + 1;
            h_phi_k = h_phi_k / hh - (1.0 / factorial as f64) as f32;
        }
        Coefficients {
            ratio: sigma_t / sigma_s0,
            data: alpha_t * h_phi_1,
            correction: alpha_t * b_h,
            rks,
            r,
            b,
        }
    }

    /// Differences of the earlier data predictions to `m0`, the newest in the history, each
    /// divided by its rk: `(m_i - m0) / rk_i`, the one before `m0` first.
    fn differences(&self, m0: &[f32], rks: &[f32]) -> Vec<Vec<f32>> {
        let count = rks.len() - 1;
        (0..count)
            .map(|i| {
                let mi = &self.history[self.history.len() - 2 - i];
                mi.iter().zip(m0).map(|(&a, &b)| (a - b) / rks[i]).collect()
            })
            .collect()
    }

    /// UniC: corrects `sample` (the predicted sample at this step) with this step's data
    /// prediction `model_t`.
    fn correct(&self, model_t: &[f32], sample: &mut [f32]) -> Result<(), SchedulerError> {
        let order = self.this_order;
        let k = self.step_index;
        let c = self.coefficients(k, k - 1, order);
        let m0 = self.history.back().expect("a corrector follows a step");
        let d1s = self.differences(m0, &c.rks);
        let rhos = if order == 1 {
            vec![0.5]
        } else {
            solve(&c.r, &c.b).ok_or_else(singular)?
        };
        let x = self
            .last_sample
            .as_ref()
            .expect("a corrector follows a step");
        let last_rho = rhos[order - 1];
        for j in 0..sample.len() {
            let base = c.ratio * x[j] - c.data * m0[j];
            let d1_t = model_t[j] - m0[j];
            let weighted = last_rho * d1_t;
            let total = if d1s.is_empty() {
                weighted
            } else {
                weighted_sum(&rhos[..order - 1], &d1s, j) + weighted
            };
            sample[j] = base - c.correction * total;
        }
        Ok(())
    }

    /// UniP: predicts the next sample from `sample` and the newest data predictions.
    fn predict(&self, order: usize, sample: &mut [f32]) -> Result<(), SchedulerError> {
        let k = self.step_index;
        let c = self.coefficients(k + 1, k, order);
        let m0 = self.history.back().expect("pushed before predicting");
        let d1s = self.differences(m0, &c.rks);
        let rhos = match order {
            1 => Vec::new(),
            2 => vec![0.5],
            _ => {
                let m = order - 1;
                let r: Vec<f32> = (0..m)
                    .flat_map(|i| c.r[i * order..i * order + m].iter().copied())
                    .collect();
                solve(&r, &c.b[..m]).ok_or_else(singular)?
            }
        };
        for j in 0..sample.len() {
            let base = c.ratio * sample[j] - c.data * m0[j];
            // Order 1 has no correction term. (diffusers subtracts `alpha_t * B(h) * 0`, which
            // is the same except for bh1 landing on sigma 0, where B(h) is -inf and it
            // returns NaN; this returns the data prediction there.)
            sample[j] = if d1s.is_empty() {
                base
            } else {
                base - c.correction * weighted_sum(&rhos, &d1s, j)
            };
        }
        Ok(())
    }
}

/// The per-update scalars: `sigma_t / sigma_s0`, `alpha_t * h_phi_1`, `alpha_t * B(h)`, the
/// rk ratios (then 1), and the order x order system `r` (row i: rk^i) with right side `b`.
struct Coefficients {
    ratio: f32,
    data: f32,
    correction: f32,
    rks: Vec<f32>,
    r: Vec<f32>,
    b: Vec<f32>,
}

/// `torch.pow(x, e)` for the small whole exponents UniPC uses (0 -> 1, 2 -> x * x, ...).
fn int_pow(x: f32, e: usize) -> f32 {
    match e {
        0 => 1.0,
        1 => x,
        2 => x * x,
        3 => x * x * x,
        _ => x.powf(e as f32),
    }
}

/// `sum_k rhos[k] * d1s[k][j]`, accumulated in order.
fn weighted_sum(rhos: &[f32], d1s: &[Vec<f32>], j: usize) -> f32 {
    let mut acc = rhos[0] * d1s[0][j];
    for (rho, d) in rhos.iter().zip(d1s).skip(1) {
        acc += rho * d[j];
    }
    acc
}

fn singular() -> SchedulerError {
    SchedulerError::Invalid("UniPC's coefficient system is singular (repeated sigmas?)".into())
}

impl NoiseScheduler for UniPc {
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
        let k = self.step_index;
        let steps = self.timesteps.len();
        if k >= steps {
            return Err(SchedulerError::Finished(steps));
        }
        check_lengths(model_output, sample)?;
        if let Some(last) = &self.last_sample {
            if last.len() != sample.len() {
                return Err(SchedulerError::Length {
                    what: "sample",
                    expected: last.len(),
                    got: sample.len(),
                });
            }
        }
        let sigma = self.sigmas[k];
        let x0: Vec<f32> = sample
            .iter()
            .zip(model_output)
            .map(|(&x, &v)| x - sigma * v)
            .collect();
        let use_corrector = k > 0
            && !self.config.disable_corrector.contains(&(k - 1))
            && self.last_sample.is_some();
        if use_corrector {
            self.correct(&x0, sample)?;
        }
        if self.history.len() == self.config.solver_order {
            self.history.pop_front();
        }
        self.history.push_back(x0);
        let order = if self.config.lower_order_final {
            self.config.solver_order.min(steps - k)
        } else if self.sigmas[k + 1] == 0.0 {
            // Landing on sigma 0 at order >= 2 divides by an rk of 0 (lambda is infinite
            // there): diffusers returns inf / NaN. Order 1 lands on the data prediction.
            1
        } else {
            self.config.solver_order
        };
        self.this_order = order.min(self.lower_order_nums + 1);
        self.last_sample = Some(sample.to_vec());
        self.predict(self.this_order, sample)?;
        if self.lower_order_nums < self.config.solver_order {
            self.lower_order_nums += 1;
        }
        self.step_index += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wan_schedule() {
        let cfg = UniPcConfig {
            flow_shift: 3.0,
            ..Default::default()
        };
        let s = UniPc::new(&cfg, 4).unwrap();
        assert_eq!(s.timesteps(), &[999.0, 900.0, 750.0, 500.0]);
        assert_eq!(s.sigmas()[0], (1.0f64 - 1e-6) as f32);
        assert_eq!(s.sigmas()[4], 0.0);
    }

    #[test]
    fn landing_on_zero_sigma_gives_the_data_prediction() {
        for (solver_type, lower_order_final) in [(SolverType::Bh1, true), (SolverType::Bh2, false)]
        {
            let cfg = UniPcConfig {
                flow_shift: 3.0,
                solver_type,
                lower_order_final,
                ..Default::default()
            };
            let mut s = UniPc::new(&cfg, 3).unwrap();
            let mut x = vec![0.25f32, -1.0, 2.0];
            for v in [[0.5f32, 0.1, -0.3], [0.2, 0.4, 0.0], [1.0, -1.0, 0.5]] {
                s.step(&v, &mut x).unwrap();
            }
            assert!(x.iter().all(|v| v.is_finite()), "{cfg:?}: {x:?}");
        }
    }

    #[test]
    fn rejects_bad_settings_and_inputs() {
        assert_eq!(
            UniPc::new(&UniPcConfig::default(), 0).unwrap_err(),
            SchedulerError::NoSteps
        );
        let zero_order = UniPcConfig {
            solver_order: 0,
            ..Default::default()
        };
        assert!(UniPc::new(&zero_order, 4).is_err());
        let mut s = UniPc::new(&UniPcConfig::default(), 2).unwrap();
        let mut x = vec![0.5f32; 4];
        assert!(s.step(&[0.0; 3], &mut x).is_err());
        s.step(&[0.1; 4], &mut x).unwrap();
        let mut shorter = vec![0.5f32; 3];
        assert!(s.step(&[0.1; 3], &mut shorter).is_err());
        s.step(&[0.1; 4], &mut x).unwrap();
        assert_eq!(s.step(&[0.1; 4], &mut x), Err(SchedulerError::Finished(2)));
    }
}
