//! The backend options `run`, `bench` and `serve` share, parsed and turned into a backend in
//! one place so the three commands cannot drift apart.

use anyhow::Result;
use clap::Args;
use weft_core::backend::cpu::physical_cores;
use weft_core::backend::{Backend, BackendOptions, Probe};

use crate::backends::backends;

#[derive(Args, Clone, Debug)]
pub struct BackendArgs {
    /// Compute backend: cpu, wgpu, cuda, or auto (cuda, then a hardware GPU through wgpu,
    /// then the CPU).
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// GPU for a GPU backend (an index from `weft devices`, among that backend's devices).
    #[arg(long)]
    pub gpu_device: Option<usize>,
    /// CPU threads (0: one per physical core; a second hyper-thread per core only adds
    /// contention for the same execution units).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

impl BackendArgs {
    /// Checks the backend name (one line naming the accepted ones), and that a backend named
    /// explicitly can run here (one line saying why not, e.g. no CUDA driver), before any
    /// model is loaded or server started.
    pub fn check(&self) -> Result<()> {
        let reg = backends();
        reg.check_name(&self.backend).map_err(anyhow::Error::msg)?;
        if let Some(f) = reg.find(&self.backend) {
            if let Probe::Missing(why) = f.probe() {
                anyhow::bail!("{why}");
            }
        }
        Ok(())
    }

    /// CPU threads after applying the default.
    pub fn threads(&self) -> usize {
        if self.threads == 0 {
            physical_cores()
        } else {
            self.threads
        }
    }

    /// Creates the chosen backend (`auto` resolved here).
    pub fn create(&self) -> Result<Box<dyn Backend>> {
        let opts = BackendOptions {
            threads: self.threads(),
            gpu_device: self.gpu_device,
        };
        Ok(backends().create(&self.backend, &opts)?)
    }
}
