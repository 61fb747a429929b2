//! The [`BackendFactory`] the `weft` binary registers: probing, device choice, creation.

use weft_core::backend::{Backend, BackendError, BackendFactory, BackendOptions, Probe, Result};

use crate::devices::{list_devices, probe, CudaDevice};

/// Makes CUDA backends (`--backend cuda`, `--gpu-device N` among CUDA devices).
pub struct CudaFactory;

/// The device `--gpu-device` names among `devices`, or a one-line error.
pub fn choose_device(devices: &[CudaDevice], index: Option<usize>) -> Result<&CudaDevice> {
    let i = index.unwrap_or(0);
    devices.get(i).ok_or_else(|| {
        BackendError::Unsupported(format!(
            "--gpu-device {i}: there are {} CUDA devices (see `weft devices`)",
            devices.len()
        ))
    })
}

impl BackendFactory for CudaFactory {
    fn name(&self) -> &'static str {
        "cuda"
    }

    /// Ready only with a driver, a GPU and NVRTC, so `auto` falls back to wgpu or the CPU on a
    /// machine that has the driver but not NVRTC instead of failing there.
    fn probe(&self) -> Probe {
        match probe().and_then(|()| crate::nvrtc::load().map(|_| ())) {
            Ok(()) => Probe::Ready,
            Err(e) => Probe::Missing(e),
        }
    }

    fn create(&self, opts: &BackendOptions) -> Result<Box<dyn Backend>> {
        let devices = list_devices().map_err(BackendError::Unsupported)?;
        let dev = choose_device(&devices, opts.gpu_device)?;
        crate::nvrtc::load().map_err(BackendError::Unsupported)?;
        crate::backend::open(dev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_index_out_of_range_is_one_line() {
        let e = choose_device(&[], Some(2)).err().unwrap().to_string();
        assert_eq!(
            e,
            "--gpu-device 2: there are 0 CUDA devices (see `weft devices`)"
        );
    }

    #[test]
    fn without_a_driver_creation_fails_cleanly() {
        if probe().is_ok() {
            eprintln!("a CUDA driver is present; skipping the no-driver check");
            return;
        }
        let e = CudaFactory
            .create(&BackendOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, crate::NO_DRIVER);
        assert!(matches!(CudaFactory.probe(), Probe::Missing(_)));
    }
}
