//! Reading a diffusers `scheduler_config.json` into a scheduler choice.

use serde_json::Value;

use super::flow_euler::{FlowMatchEuler, FlowMatchEulerConfig};
use super::unipc::{FinalSigma, SolverType, UniPc, UniPcConfig};
use super::{NoiseScheduler, SchedulerError};

/// A scheduler kind with its settings, before the number of steps is known.
#[derive(Clone, Debug, PartialEq)]
pub enum SchedulerSpec {
    UniPc(UniPcConfig),
    FlowMatchEuler(FlowMatchEulerConfig),
}

impl SchedulerSpec {
    /// The scheduler a diffusers folder's `scheduler/scheduler_config.json` describes.
    ///
    /// Only the flow-matching settings Wan-style models use are implemented; any other
    /// setting that would change the result (Karras / exponential / beta sigmas, dynamic
    /// shifting, thresholding, another prediction type, ...) is refused by name rather than
    /// ignored.
    pub fn from_diffusers_config(config: &Value) -> Result<Self, SchedulerError> {
        let class = config
            .get("_class_name")
            .and_then(Value::as_str)
            .ok_or_else(|| SchedulerError::Invalid("no _class_name in the config".into()))?;
        let cfg = Fields(config);
        match class {
            "UniPCMultistepScheduler" => {
                cfg.require_str("prediction_type", "epsilon", "flow_prediction")?;
                cfg.require_bool("use_flow_sigmas", false, true)?;
                cfg.require_bool("predict_x0", true, true)?;
                for off in [
                    "thresholding",
                    "use_karras_sigmas",
                    "use_exponential_sigmas",
                    "use_beta_sigmas",
                    "use_dynamic_shifting",
                    "rescale_betas_zero_snr",
                ] {
                    cfg.require_bool(off, false, false)?;
                }
                cfg.require_null("shift_terminal")?;
                cfg.require_null("solver_p")?;
                let defaults = UniPcConfig::default();
                Ok(Self::UniPc(UniPcConfig {
                    num_train_timesteps: cfg
                        .uint("num_train_timesteps", defaults.num_train_timesteps)?,
                    flow_shift: cfg.float("flow_shift", defaults.flow_shift)?,
                    solver_order: cfg.uint("solver_order", 2)? as usize,
                    // diffusers maps its older names to bh2.
                    solver_type: match cfg.str("solver_type", "bh2")? {
                        "bh1" => SolverType::Bh1,
                        "bh2" | "midpoint" | "heun" | "logrho" => SolverType::Bh2,
                        other => {
                            return Err(SchedulerError::Unsupported(format!(
                                "solver_type {other:?}"
                            )))
                        }
                    },
                    lower_order_final: cfg.bool("lower_order_final", true)?,
                    final_sigma: match cfg.str("final_sigmas_type", "zero")? {
                        "zero" => FinalSigma::Zero,
                        "sigma_min" => FinalSigma::SigmaMin,
                        other => {
                            return Err(SchedulerError::Unsupported(format!(
                                "final_sigmas_type {other:?}"
                            )))
                        }
                    },
                    disable_corrector: cfg.uint_list("disable_corrector")?,
                }))
            }
            "FlowMatchEulerDiscreteScheduler" => {
                for off in [
                    "use_dynamic_shifting",
                    "invert_sigmas",
                    "use_karras_sigmas",
                    "use_exponential_sigmas",
                    "use_beta_sigmas",
                    "stochastic_sampling",
                ] {
                    cfg.require_bool(off, false, false)?;
                }
                cfg.require_null("shift_terminal")?;
                let defaults = FlowMatchEulerConfig::default();
                Ok(Self::FlowMatchEuler(FlowMatchEulerConfig {
                    num_train_timesteps: cfg
                        .uint("num_train_timesteps", defaults.num_train_timesteps)?,
                    shift: cfg.float("shift", defaults.shift)?,
                }))
            }
            other => Err(SchedulerError::Unsupported(format!(
                "scheduler class {other:?} (supported: UniPCMultistepScheduler, \
                 FlowMatchEulerDiscreteScheduler)"
            ))),
        }
    }

    /// The same scheduler with another time shift (a request's `flowShift`).
    pub fn with_shift(mut self, shift: f64) -> Self {
        match &mut self {
            Self::UniPc(c) => c.flow_shift = shift,
            Self::FlowMatchEuler(c) => c.shift = shift,
        }
        self
    }

    /// The scheduler for a generation of `steps` steps.
    pub fn build(&self, steps: usize) -> Result<Box<dyn NoiseScheduler>, SchedulerError> {
        Ok(match self {
            Self::UniPc(c) => Box::new(UniPc::new(c, steps)?),
            Self::FlowMatchEuler(c) => Box::new(FlowMatchEuler::new(c, steps)?),
        })
    }
}

/// Typed reads of optional config fields, with diffusers' defaults for absent or null ones.
struct Fields<'a>(&'a Value);

impl Fields<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    fn wrong(key: &str, want: &str, got: &Value) -> SchedulerError {
        SchedulerError::Invalid(format!("{key} should be {want}, got {got}"))
    }

    fn bool(&self, key: &str, default: bool) -> Result<bool, SchedulerError> {
        self.get(key).map_or(Ok(default), |v| {
            v.as_bool()
                .ok_or_else(|| Self::wrong(key, "true or false", v))
        })
    }

    fn str(&self, key: &str, default: &'static str) -> Result<&str, SchedulerError> {
        self.get(key).map_or(Ok(default), |v| {
            v.as_str().ok_or_else(|| Self::wrong(key, "a string", v))
        })
    }

    fn float(&self, key: &str, default: f64) -> Result<f64, SchedulerError> {
        self.get(key).map_or(Ok(default), |v| {
            v.as_f64().ok_or_else(|| Self::wrong(key, "a number", v))
        })
    }

    fn uint(&self, key: &str, default: u32) -> Result<u32, SchedulerError> {
        self.get(key).map_or(Ok(default), |v| {
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| Self::wrong(key, "a whole number", v))
        })
    }

    fn uint_list(&self, key: &str) -> Result<Vec<usize>, SchedulerError> {
        let Some(v) = self.get(key) else {
            return Ok(Vec::new());
        };
        let items = v
            .as_array()
            .ok_or_else(|| Self::wrong(key, "a list of step indices", v))?;
        items
            .iter()
            .map(|i| {
                i.as_u64()
                    .map(|n| n as usize)
                    .ok_or_else(|| Self::wrong(key, "a list of step indices", v))
            })
            .collect()
    }

    /// Fails unless `key` (default `default`) equals `want`.
    fn require_bool(&self, key: &str, default: bool, want: bool) -> Result<(), SchedulerError> {
        match self.bool(key, default)? {
            v if v == want => Ok(()),
            v => Err(SchedulerError::Unsupported(format!("{key} = {v}"))),
        }
    }

    fn require_str(
        &self,
        key: &str,
        default: &'static str,
        want: &str,
    ) -> Result<(), SchedulerError> {
        match self.str(key, default)? {
            v if v == want => Ok(()),
            v => Err(SchedulerError::Unsupported(format!(
                "{key} = {v:?} (only {want:?})"
            ))),
        }
    }

    fn require_null(&self, key: &str) -> Result<(), SchedulerError> {
        match self.get(key) {
            None => Ok(()),
            Some(v) => Err(SchedulerError::Unsupported(format!("{key} = {v}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_wan_unipc_and_refuses_what_it_does_not_do() {
        let wan = json!({
            "_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
            "use_flow_sigmas": true, "flow_shift": 3.0, "solver_order": 2, "solver_type": "bh2",
            "final_sigmas_type": "zero", "disable_corrector": [], "shift_terminal": null,
            "solver_p": null, "use_karras_sigmas": false
        });
        let spec = SchedulerSpec::from_diffusers_config(&wan).unwrap();
        let SchedulerSpec::UniPc(c) = &spec else {
            panic!("{spec:?}")
        };
        assert_eq!(c.flow_shift, 3.0);
        assert_eq!(
            spec.clone().with_shift(5.0).build(4).unwrap().timesteps()[1],
            937.0
        );

        let mut karras = wan.clone();
        karras["use_karras_sigmas"] = json!(true);
        let err = SchedulerSpec::from_diffusers_config(&karras).unwrap_err();
        assert!(err.to_string().contains("use_karras_sigmas"), "{err}");
        let mut eps = wan.clone();
        eps.as_object_mut().unwrap().remove("prediction_type");
        assert!(SchedulerSpec::from_diffusers_config(&eps).is_err());
        let mut bad = wan;
        bad["solver_order"] = json!("two");
        assert!(SchedulerSpec::from_diffusers_config(&bad)
            .unwrap_err()
            .to_string()
            .contains("solver_order"));
        let ddim = json!({"_class_name": "DDIMScheduler"});
        assert!(SchedulerSpec::from_diffusers_config(&ddim).is_err());
    }

    #[test]
    fn reads_euler() {
        let euler = json!({"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 5.0});
        assert_eq!(
            SchedulerSpec::from_diffusers_config(&euler).unwrap(),
            SchedulerSpec::FlowMatchEuler(FlowMatchEulerConfig {
                num_train_timesteps: 1000,
                shift: 5.0
            })
        );
    }
}
