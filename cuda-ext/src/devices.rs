//! Finding the CUDA driver and listing its devices, without ever letting cudarc panic.

use cudarc::driver::{result, sys};

/// The one line `--backend cuda` prints when there is no usable CUDA driver.
pub const NO_DRIVER: &str = "no CUDA driver found (libcuda.so.1 is not loadable); install the NVIDIA driver or use --backend wgpu or --backend cpu";

/// One CUDA device, as `weft devices` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaDevice {
    /// Ordinal, as `--gpu-device` takes it with `--backend cuda`.
    pub index: usize,
    pub name: String,
    /// Total device memory in bytes.
    pub memory: u64,
    /// Compute capability (major, minor), e.g. (9, 0) for an H100.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// The driver's CUDA version (major, minor), e.g. (12, 8).
    pub driver_version: (u32, u32),
}

impl CudaDevice {
    /// The NVRTC architecture option for this device (`sm_90`, ...).
    pub fn arch(&self) -> String {
        let (ma, mi) = self.compute_capability;
        format!("sm_{ma}{mi}")
    }
}

/// Whether the driver library can be loaded at all (cheap, never panics).
fn driver_library_present() -> bool {
    // SAFETY: only tries dlopen on cudarc's candidate names; nothing is called through it.
    unsafe { sys::is_culib_present() }
}

/// Initialises the driver: Err(one line) when there is no driver or no usable device.
pub fn probe() -> Result<(), String> {
    if !driver_library_present() {
        return Err(NO_DRIVER.to_string());
    }
    result::init().map_err(|e| {
        format!("the CUDA driver failed to start ({e}); use --backend wgpu or --backend cpu")
    })?;
    let n = result::device::get_count().map_err(|e| format!("cannot count CUDA devices ({e})"))?;
    if n <= 0 {
        return Err("the CUDA driver sees no GPU; use --backend wgpu or --backend cpu".to_string());
    }
    Ok(())
}

/// The driver's CUDA version as (major, minor), from its encoded `1000 * major + 10 * minor`.
pub fn decode_driver_version(v: i32) -> (u32, u32) {
    let v = v.max(0) as u32;
    (v / 1000, (v % 1000) / 10)
}

fn attribute(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> Result<i32, String> {
    // SAFETY: `dev` comes from `device::get` after a successful init.
    unsafe { result::device::get_attribute(dev, a) }.map_err(|e| format!("{e}"))
}

/// Every CUDA device, or the one-line reason there are none.
pub fn list_devices() -> Result<Vec<CudaDevice>, String> {
    probe()?;
    let mut raw = 0i32;
    // SAFETY: a plain out-parameter call after a successful init.
    unsafe { sys::cuDriverGetVersion(&mut raw) }
        .result()
        .map_err(|e| format!("cannot read the CUDA driver version ({e})"))?;
    let driver_version = decode_driver_version(raw);
    let n = result::device::get_count().map_err(|e| format!("{e}"))?;
    let mut out = Vec::new();
    for i in 0..n {
        let dev = result::device::get(i).map_err(|e| format!("CUDA device {i}: {e}"))?;
        let name = result::device::get_name(dev).unwrap_or_else(|_| "unknown".into());
        // SAFETY: as above.
        let memory = unsafe { result::device::total_mem(dev) }.unwrap_or(0) as u64;
        use sys::CUdevice_attribute::*;
        let major = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let sms = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        out.push(CudaDevice {
            index: i as usize,
            name,
            memory,
            compute_capability: (major as u32, minor as u32),
            sm_count: sms as u32,
            driver_version,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions_decode() {
        assert_eq!(decode_driver_version(12080), (12, 8));
        assert_eq!(decode_driver_version(13000), (13, 0));
        assert_eq!(decode_driver_version(-1), (0, 0));
    }

    #[test]
    fn arch_names() {
        let d = CudaDevice {
            index: 0,
            name: "x".into(),
            memory: 0,
            compute_capability: (9, 0),
            sm_count: 132,
            driver_version: (12, 8),
        };
        assert_eq!(d.arch(), "sm_90");
    }

    /// Without a driver (CI, this machine) probing and listing fail with one line, never panic.
    #[test]
    fn probing_never_panics() {
        match list_devices() {
            Ok(d) => eprintln!("CUDA devices: {d:?}"),
            Err(e) => assert!(!e.contains('\n'), "{e}"),
        }
    }
}
