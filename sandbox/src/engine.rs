//! The shared sandbox: one wasmtime engine, the linker, the compiled runtimes and the epoch ticker.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use wasmtime::{Config, Engine, Linker, Module};

use crate::cache::{self, Origin};
use crate::error::Result;
use crate::run::State;
use crate::runtimes::{self, Language};

/// How often the epoch advances. Each tick lets a running guest yield, so a wall-clock timeout
/// is noticed within about one tick.
pub(crate) const TICK: Duration = Duration::from_millis(10);

/// Where the sandbox finds its runtimes and keeps compiled code.
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// Directory with `python.wasm` and `quickjs.wasm` ([`runtimes::default_dir`]).
    pub runtime_dir: PathBuf,
    /// Directory for `.cwasm` files; None compiles on every start.
    pub cache_dir: Option<PathBuf>,
}

impl Default for SandboxConfig {
    /// The runtimes from [`runtimes::default_dir`]; compiled code in `$WEFT_SANDBOX_CACHE`, else
    /// `compiled/` beside the runtimes.
    fn default() -> Self {
        let runtime_dir = runtimes::default_dir();
        let cache_dir = Some(
            std::env::var_os("WEFT_SANDBOX_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| runtime_dir.join("compiled")),
        );
        SandboxConfig {
            runtime_dir,
            cache_dir,
        }
    }
}

/// How a runtime was made ready by [`Sandbox::prepare`].
#[derive(Clone, Copy, Debug)]
pub struct Prepared {
    /// Compiled now, or loaded from the cache.
    pub origin: Origin,
    /// Time spent reading, checking and compiling or loading (zero when already in memory).
    pub took: Duration,
}

/// Runs untrusted Python and JavaScript. Cheap to share (`Arc<Sandbox>`); every run gets its
/// own store, so concurrent runs share nothing but compiled code.
pub struct Sandbox {
    pub(crate) engine: Engine,
    /// wasmtime-wasi with the quota wrappers in front.
    pub(crate) linker: Linker<State>,
    config: SandboxConfig,
    modules: [Mutex<Option<Module>>; 2],
}

impl Sandbox {
    /// A sandbox using `config`. Runtimes are loaded on first use (or by [`Sandbox::prepare`]).
    pub fn new(config: SandboxConfig) -> Result<Sandbox> {
        let mut cfg = Config::new();
        cfg.consume_fuel(true);
        cfg.epoch_interruption(true);
        let engine = Engine::new(&cfg)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |s: &mut State| &mut s.wasi)?;
        crate::quota::wasi::wrap(&mut linker)?;
        start_ticker(&engine);
        Ok(Sandbox {
            engine,
            linker,
            config,
            modules: [Mutex::new(None), Mutex::new(None)],
        })
    }

    /// A sandbox with the default directories.
    pub fn from_env() -> Result<Sandbox> {
        Sandbox::new(SandboxConfig::default())
    }

    /// The directories in use.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// Loads (compiling or from cache) the runtime for `language` so the first run is fast.
    pub fn prepare(&self, language: Language) -> Result<Prepared> {
        let slot = &self.modules[language as usize];
        let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_some() {
            return Ok(Prepared {
                origin: Origin::Cached,
                took: Duration::ZERO,
            });
        }
        let (bytes, sha) = runtimes::load(&self.config.runtime_dir, language)?;
        let loaded = cache::load(
            &self.engine,
            self.config.cache_dir.as_deref(),
            language.file_name(),
            &bytes,
            &sha,
        )?;
        *guard = Some(loaded.module);
        Ok(Prepared {
            origin: loaded.origin,
            took: loaded.took,
        })
    }

    /// True when `language`'s runtime is ready without compiling: already loaded, or its
    /// compiled code is in the cache (checked again when loaded). A caller can print a
    /// progress line before a first, slow compile.
    pub fn is_ready(&self, language: Language) -> bool {
        let loaded = self.modules[language as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        loaded
            || cache::is_cached(
                &self.engine,
                self.config.cache_dir.as_deref(),
                language.file_name(),
                language.sha256(),
            )
    }

    /// The compiled module for `language`, loading it if needed.
    pub(crate) fn module(&self, language: Language) -> Result<Module> {
        self.prepare(language)?;
        let guard = self.modules[language as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Ok(guard.clone().expect("prepared above"))
    }
}

/// Advances the engine's epoch every [`TICK`] until the engine is dropped.
fn start_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("weft-sandbox-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        })
        .expect("spawning the sandbox epoch thread");
}
