//! Choosing a backend by name (`--backend cpu|wgpu|…|auto`).
//!
//! Core defines what a backend factory is but does not decide which backends a program offers:
//! the program that assembles Weft (the `weft` binary, weft-wasm) builds a [`BackendRegistry`]
//! from the factories it was built with — core's own [`CpuFactory`] and [`WgpuFactory`], and
//! any extension crate's — so adding a backend is a crate implementing [`BackendFactory`] plus
//! one `register` line in that program.

use super::{Backend, BackendError, Result};

/// Settings that apply to some backends.
#[derive(Clone, Debug, Default)]
pub struct BackendOptions {
    /// CPU threads (0 = one per physical core).
    pub threads: usize,
    /// GPU index (`--gpu-device`, see `weft devices`) among the backend's own devices; None = the
    /// backend's default device.
    pub gpu_device: Option<usize>,
}

/// Whether a backend can run on this machine, as found by [`BackendFactory::probe`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// A device is there (for GPU backends: a hardware GPU).
    Ready,
    /// It works, but only on a software device (e.g. wgpu on Mesa lavapipe): usable when asked
    /// for by name, never chosen by `auto`.
    Software(String),
    /// It cannot run here; the one-line reason (missing driver, no device).
    Missing(String),
}

/// Makes one kind of backend. Implemented by core for the CPU and wgpu backends and by
/// extension crates for theirs.
pub trait BackendFactory: Send + Sync {
    /// The name `--backend` takes (`cpu`, `wgpu`, or an extension's own).
    fn name(&self) -> &'static str;

    /// Other names accepted for it (`gpu` for wgpu).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether it can run here. Must be cheap-ish and never panic, even without a driver.
    fn probe(&self) -> Probe;

    /// Makes the backend. A missing driver or device is a one-line
    /// [`BackendError::Unsupported`] that says what to do (e.g. use `--backend cpu`).
    fn create(&self, opts: &BackendOptions) -> Result<Box<dyn Backend>>;
}

/// The backends a program offers, in the order `--backend auto` tries them.
#[derive(Default)]
pub struct BackendRegistry {
    factories: Vec<Box<dyn BackendFactory>>,
}

impl BackendRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a factory; `auto` prefers those registered first.
    pub fn register(mut self, f: impl BackendFactory + 'static) -> Self {
        self.factories.push(Box::new(f));
        self
    }

    /// The registered factories, in `auto` order.
    pub fn factories(&self) -> impl Iterator<Item = &dyn BackendFactory> {
        self.factories.iter().map(|f| f.as_ref())
    }

    /// The accepted `--backend` names: `auto`, then each factory's name.
    pub fn names(&self) -> Vec<&'static str> {
        std::iter::once("auto")
            .chain(self.factories.iter().map(|f| f.name()))
            .collect()
    }

    /// The factory called `name` (or one of its aliases), case-insensitively.
    pub fn find(&self, name: &str) -> Option<&dyn BackendFactory> {
        let n = name.to_ascii_lowercase();
        self.factories()
            .find(|f| f.name() == n || f.aliases().contains(&n.as_str()))
    }

    /// Checks that `name` is `auto` or a registered backend; the error lists the accepted names.
    pub fn check_name(&self, name: &str) -> std::result::Result<(), String> {
        if name.eq_ignore_ascii_case("auto") || self.find(name).is_some() {
            return Ok(());
        }
        let names = self.names();
        let (last, rest) = names.split_last().expect("auto is always listed");
        Err(format!(
            "unknown backend {name:?} (expected {} or {last})",
            rest.join(", ")
        ))
    }

    /// The factory `name` stands for: for `auto`, the first whose probe is [`Probe::Ready`],
    /// else the last registered (the CPU backend, which is always ready).
    pub fn resolve(&self, name: &str) -> std::result::Result<&dyn BackendFactory, String> {
        self.check_name(name)?;
        if let Some(f) = self.find(name) {
            return Ok(f);
        }
        self.factories()
            .find(|f| f.probe() == Probe::Ready)
            .or_else(|| self.factories.last().map(|f| f.as_ref()))
            .ok_or_else(|| "no backend is registered".to_string())
    }

    /// Makes the backend `name` stands for (see [`resolve`](Self::resolve)).
    pub fn create(&self, name: &str, opts: &BackendOptions) -> Result<Box<dyn Backend>> {
        self.resolve(name)
            .map_err(BackendError::Unsupported)?
            .create(opts)
    }
}

/// Core's CPU backend (always available).
pub struct CpuFactory;

impl BackendFactory for CpuFactory {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn probe(&self) -> Probe {
        Probe::Ready
    }
    fn create(&self, opts: &BackendOptions) -> Result<Box<dyn Backend>> {
        Ok(Box::new(super::cpu::CpuBackend::new(opts.threads)))
    }
}

/// Core's wgpu backend (any GPU with a Vulkan, Metal, DX12 or GL driver, or lavapipe).
pub struct WgpuFactory;

impl BackendFactory for WgpuFactory {
    fn name(&self) -> &'static str {
        "wgpu"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["gpu"]
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn probe(&self) -> Probe {
        let adapters = super::wgpu::list_adapters();
        if adapters.iter().any(|a| a.device_type != "Cpu") {
            Probe::Ready
        } else if let Some(a) = adapters.first() {
            Probe::Software(format!("only a software adapter ({})", a.name))
        } else {
            Probe::Missing(super::wgpu::NO_ADAPTER.to_string())
        }
    }

    #[cfg(target_arch = "wasm32")]
    fn probe(&self) -> Probe {
        Probe::Missing("the wgpu backend is created asynchronously in the browser".into())
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn create(&self, opts: &BackendOptions) -> Result<Box<dyn Backend>> {
        let o = super::wgpu::WgpuOptions {
            device_index: opts.gpu_device,
            ..Default::default()
        };
        Ok(Box::new(super::wgpu::WgpuBackend::new(&o)?))
    }

    #[cfg(target_arch = "wasm32")]
    fn create(&self, _opts: &BackendOptions) -> Result<Box<dyn Backend>> {
        Err(BackendError::Unsupported(
            "the wgpu backend is created asynchronously in the browser".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake(&'static str, Probe);
    impl BackendFactory for Fake {
        fn name(&self) -> &'static str {
            self.0
        }
        fn probe(&self) -> Probe {
            self.1.clone()
        }
        fn create(&self, _: &BackendOptions) -> Result<Box<dyn Backend>> {
            Err(BackendError::Unsupported(format!(
                "{} has no driver",
                self.0
            )))
        }
    }

    fn reg(first: Probe, second: Probe) -> BackendRegistry {
        BackendRegistry::new()
            .register(Fake("fast", first))
            .register(Fake("slow", second))
            .register(CpuFactory)
    }

    #[test]
    fn auto_takes_the_first_ready_backend() {
        let r = reg(Probe::Missing("no driver".into()), Probe::Ready);
        assert_eq!(r.resolve("auto").unwrap().name(), "slow");
        let r = reg(Probe::Ready, Probe::Ready);
        assert_eq!(r.resolve("AUTO").unwrap().name(), "fast");
        let r = reg(
            Probe::Missing("x".into()),
            Probe::Software("lavapipe".into()),
        );
        assert_eq!(r.resolve("auto").unwrap().name(), "cpu");
    }

    #[test]
    fn names_and_aliases() {
        let r = reg(Probe::Ready, Probe::Ready).register(WgpuFactory);
        assert_eq!(r.names(), vec!["auto", "fast", "slow", "cpu", "wgpu"]);
        assert_eq!(r.find("GPU").unwrap().name(), "wgpu");
        assert_eq!(
            r.check_name("tpu").unwrap_err(),
            "unknown backend \"tpu\" (expected auto, fast, slow, cpu or wgpu)"
        );
    }

    #[test]
    fn a_named_backend_is_made_even_when_missing() {
        let r = reg(Probe::Missing("no driver".into()), Probe::Ready);
        let e = r.create("fast", &BackendOptions::default()).err().unwrap();
        assert_eq!(e.to_string(), "fast has no driver");
        assert_eq!(
            r.create("cpu", &BackendOptions::default()).unwrap().name(),
            "cpu"
        );
    }
}
