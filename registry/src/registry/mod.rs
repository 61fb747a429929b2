//! The model registry: name → model, loaded on first use, kept within `--max-loaded` models
//! and a memory budget, unloaded when idle past its keep-alive or to make room for another.
//!
//! Rules (see docs/server.md, "Models"):
//! - A request names a model; it waits (never fails) while that model loads or while another
//!   model leaves to make room.
//! - Only an idle model (no request in flight) is unloaded; a busy model chosen to make room
//!   is marked: it takes no new requests, and goes when its last stream ends. The least
//!   recently used idle model goes first.
//! - A freshly loaded model serves at least one request before it can be chosen to make room,
//!   so two models competing for one place take turns instead of loading and unloading forever.
//! - A model that fails to load fails the requests waiting for it (503 with the reason); the
//!   other models keep serving, and a later request tries again.
//! - Names that share a file share one loaded model.

mod catalog;
mod embed_worker;
mod error;
mod facts;
mod keep_alive;
mod loaded;
pub mod names;
mod projector;
mod scope;
mod totals;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::Notify;
use weft_core::chat::ChatTemplate;

pub use catalog::{scrub, shown, Catalog, Entry, Origin, Overrides, Resolved, Target, STORE_FILE};
pub use embed_worker::{EmbedWorker, WorkerError};
pub use facts::Facts;
pub use keep_alive::KeepAlive;
pub use loaded::{BackendFactory, LoadConfig, Loaded, Slots, AUTO_KV_SHARE};
pub use projector::{is_projector_name, ProjectorFacts, Vision};
pub use scope::Scope;
pub use totals::{HistogramData, Totals};

pub use error::RegistryError;

/// Registry settings.
#[derive(Clone)]
pub struct RegistryConfig {
    pub load: LoadConfig,
    /// Most models resident at once.
    pub max_loaded: usize,
    /// Bytes the resident models may hold together (by [`Facts::resident_estimate`]).
    pub memory_budget: u64,
    /// Keep-alive of requests that do not say.
    pub keep_alive: KeepAlive,
}

/// Where a resident model is in its life.
enum State {
    Loading { attempt: u64 },
    Ready(Arc<Loaded>),
    Unloading,
}

/// A model in memory (or on its way in or out).
struct Slot {
    state: State,
    /// The name it was last asked for (what `/api/ps` shows).
    name: String,
    in_flight: usize,
    /// Requests served since it loaded.
    served: u64,
    last_used: Instant,
    keep_alive: KeepAlive,
    /// Chosen to make room, deleted or asked to unload: no new requests; goes when idle.
    leaving: bool,
    estimate: u64,
    loaded_at: SystemTime,
    /// A file to delete once unloaded (its last name was deleted while it was loaded).
    remove_after: Option<PathBuf>,
}

struct Inner {
    catalog: Catalog,
    slots: HashMap<PathBuf, Slot>,
    next_attempt: u64,
    /// Why load attempts failed, for the requests that waited on them.
    failures: HashMap<u64, RegistryError>,
    /// Figures of models already unloaded.
    retired: Totals,
}

/// The model registry.
pub struct Registry {
    inner: Mutex<Inner>,
    changed: Notify,
    cfg: RegistryConfig,
    /// The queue size set live (the `queue_size` setting); 0: `cfg.load.queue`.
    queue: std::sync::atomic::AtomicUsize,
}

/// A resident model, as `/api/ps` shows it.
#[derive(Clone, Debug)]
pub struct ResidentInfo {
    pub name: String,
    pub facts: Arc<Facts>,
    pub estimate: u64,
    pub in_flight: usize,
    /// `None`: kept until evicted.
    pub expires_at: Option<SystemTime>,
    pub loaded_at: SystemTime,
}

/// One request's hold on a loaded model: while any lease lives, the model stays.
pub struct Lease {
    loaded: Arc<Loaded>,
    /// The stored name the request resolved to.
    pub name: String,
    /// The name's system prompt, template and default parameters.
    pub overrides: Overrides,
    template: Option<ChatTemplate>,
    key: PathBuf,
    registry: Arc<Registry>,
}

impl std::ops::Deref for Lease {
    type Target = Loaded;
    fn deref(&self) -> &Loaded {
        &self.loaded
    }
}

impl Lease {
    /// The chat template for this name: its own override, else the file's.
    pub fn template(&self) -> Option<&ChatTemplate> {
        self.template.as_ref().or(self.loaded.template.as_ref())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.registry.release(&self.key);
    }
}

enum Step {
    Got(Box<Lease>),
    Wait,
}

impl Registry {
    pub fn new(catalog: Catalog, cfg: RegistryConfig) -> Arc<Registry> {
        Arc::new(Registry {
            inner: Mutex::new(Inner {
                catalog,
                slots: HashMap::new(),
                next_attempt: 0,
                failures: HashMap::new(),
                retired: Totals::default(),
            }),
            changed: Notify::new(),
            cfg,
            queue: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn config(&self) -> &RegistryConfig {
        &self.cfg
    }

    /// Runs `f` on the catalog (reads, or changes such as create/alias that need no unload).
    pub fn with_catalog<T>(&self, f: impl FnOnce(&mut Catalog) -> T) -> T {
        f(&mut self.lock().catalog)
    }

    /// KV positions a model holds, for its memory estimate: its whole block pool, the most
    /// its cache can become.
    fn positions(&self, facts: &Facts) -> u64 {
        self.cfg.load.plan(facts).pool_tokens as u64
    }

    /// Takes a lease on `requested` (or the default model), loading it first if needed.
    pub async fn acquire(
        self: &Arc<Self>,
        requested: Option<&str>,
        keep_alive: Option<KeepAlive>,
    ) -> Result<Lease, RegistryError> {
        let mut waited_on = None;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.step(requested, keep_alive, &mut waited_on)? {
                Step::Got(lease) => return Ok(*lease),
                Step::Wait => notified.await,
            }
        }
    }

    fn step(
        self: &Arc<Self>,
        requested: Option<&str>,
        keep_alive: Option<KeepAlive>,
        waited_on: &mut Option<u64>,
    ) -> Result<Step, RegistryError> {
        let mut g = self.lock();
        let name = match requested {
            Some(n) => n.to_string(),
            None => g
                .catalog
                .default_name()
                .ok_or_else(|| RegistryError::invalid("model is required (this server has none)"))?
                .to_string(),
        };
        let r = g.catalog.resolve(&name)?;
        if let Some(e) = waited_on.and_then(|a| g.failures.get(&a)) {
            return Err(e.clone());
        }
        let key = r.facts.path.clone();
        if let Some(slot) = g.slots.get_mut(&key) {
            return match &slot.state {
                State::Ready(l) if !slot.leaving => {
                    let template = compile_template(&r, l)?;
                    slot.in_flight += 1;
                    slot.served += 1;
                    slot.last_used = Instant::now();
                    slot.keep_alive = keep_alive.unwrap_or(self.cfg.keep_alive);
                    slot.name = r.name.clone();
                    Ok(Step::Got(Box::new(Lease {
                        loaded: l.clone(),
                        name: r.name,
                        overrides: r.overrides,
                        template,
                        key,
                        registry: self.clone(),
                    })))
                }
                State::Loading { attempt } => {
                    *waited_on = Some(*attempt);
                    Ok(Step::Wait)
                }
                _ => Ok(Step::Wait),
            };
        }
        let need = r.facts.resident_estimate(self.positions(&r.facts));
        if need > self.cfg.memory_budget {
            return Err(RegistryError::Unavailable(format!(
                "model {:?} needs about {} MiB but the memory budget is {} MiB (raise \
                 --memory-budget, or lower --ctx / --parallel)",
                r.name,
                need >> 20,
                self.cfg.memory_budget >> 20
            )));
        }
        if !self.make_room(&mut g, need) {
            return Ok(Step::Wait);
        }
        let attempt = g.next_attempt;
        g.next_attempt += 1;
        *waited_on = Some(attempt);
        g.slots.insert(
            key.clone(),
            Slot {
                state: State::Loading { attempt },
                name: r.name.clone(),
                in_flight: 0,
                served: 0,
                last_used: Instant::now(),
                keep_alive: keep_alive.unwrap_or(self.cfg.keep_alive),
                leaving: false,
                estimate: need,
                loaded_at: SystemTime::now(),
                remove_after: None,
            },
        );
        drop(g);
        self.spawn_load(key, r.facts, attempt);
        Ok(Step::Wait)
    }

    /// Whether a model of `need` bytes fits now. If not, starts unloading the least recently
    /// used idle model, or marks a busy one to leave when idle, and returns false.
    fn make_room(self: &Arc<Self>, g: &mut Inner, need: u64) -> bool {
        let used: u64 = g.slots.values().map(|s| s.estimate).sum();
        if g.slots.len() < self.cfg.max_loaded && used + need <= self.cfg.memory_budget {
            return true;
        }
        let ready = |s: &Slot| matches!(s.state, State::Ready(_)) && !s.leaving;
        let idle = g
            .slots
            .iter()
            .filter(|(_, s)| ready(s) && s.in_flight == 0)
            .min_by_key(|(_, s)| s.last_used)
            .map(|(k, _)| k.clone());
        if let Some(k) = idle {
            self.begin_unload(g, &k);
            return false;
        }
        let on_the_way = g
            .slots
            .values()
            .any(|s| s.leaving || !matches!(s.state, State::Ready(_)));
        if !on_the_way {
            // Every resident model is busy: the least recently used one that has served since
            // it loaded leaves when its streams end.
            if let Some(s) = g
                .slots
                .values_mut()
                .filter(|s| s.served > 0)
                .min_by_key(|s| s.last_used)
            {
                s.leaving = true;
            }
        }
        false
    }

    fn spawn_load(self: &Arc<Self>, key: PathBuf, facts: Arc<Facts>, attempt: u64) {
        let reg = self.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let result = Loaded::load(facts.clone(), &reg.cfg.load);
            let mut g = reg.lock();
            match result {
                Ok(l) => {
                    if let Some(h) = &l.handle {
                        h.set_queue(reg.queue_size());
                    }
                    tracing::info!(
                        file = %facts.path.display(),
                        secs = t0.elapsed().as_secs_f64(),
                        "model loaded"
                    );
                    if let Some(s) = g.slots.get_mut(&key) {
                        s.state = State::Ready(Arc::new(l));
                        s.loaded_at = SystemTime::now();
                        s.last_used = Instant::now();
                        if s.leaving {
                            // Asked to unload (or deleted) while it loaded.
                            reg.begin_unload(&mut g, &key);
                        }
                    }
                }
                Err(e) => {
                    // The file name only: the message reaches clients (a 503); the log has
                    // the whole path.
                    tracing::error!(file = %facts.path.display(), error = %format!("{e:#}"), "model failed to load");
                    let msg = scrub(
                        &format!("model {} failed to load: {e:#}", shown(&facts.path)),
                        &facts.path,
                    );
                    g.slots.remove(&key);
                    if g.failures.len() > 256 {
                        g.failures.clear();
                    }
                    g.failures.insert(attempt, RegistryError::Unavailable(msg));
                }
            }
            drop(g);
            reg.changed.notify_waiters();
        });
    }

    /// Starts unloading an idle model (on its own thread: joining the scheduler blocks).
    fn begin_unload(self: &Arc<Self>, g: &mut Inner, key: &PathBuf) {
        let Some(slot) = g.slots.get_mut(key) else {
            return;
        };
        let State::Ready(loaded) = std::mem::replace(&mut slot.state, State::Unloading) else {
            return;
        };
        let reg = self.clone();
        let key = key.clone();
        std::thread::spawn(move || {
            loaded.stop();
            let mut g = reg.lock();
            if let Some(h) = &loaded.handle {
                g.retired.retire(h.stats());
            }
            drop(loaded);
            release_freed_memory();
            if let Some(s) = g.slots.remove(&key) {
                if let Some(p) = s.remove_after {
                    let _ = std::fs::remove_file(&p);
                }
            }
            drop(g);
            tracing::info!(file = %key.display(), "model unloaded");
            reg.changed.notify_waiters();
        });
    }

    /// A lease ended.
    fn release(self: &Arc<Self>, key: &PathBuf) {
        let mut g = self.lock();
        if let Some(s) = g.slots.get_mut(key) {
            s.in_flight = s.in_flight.saturating_sub(1);
            s.last_used = Instant::now();
            if s.in_flight == 0 && (s.leaving || s.keep_alive.is_zero()) {
                self.begin_unload(&mut g, key);
            }
        }
        drop(g);
        self.changed.notify_waiters();
    }

    /// Unloads the models idle past their keep-alive. Called every second by
    /// [`start_reaper`](Self::start_reaper).
    pub fn reap(self: &Arc<Self>) {
        let mut g = self.lock();
        let now = Instant::now();
        let expired: Vec<PathBuf> = g
            .slots
            .iter()
            .filter(|(_, s)| matches!(s.state, State::Ready(_)) && s.in_flight == 0)
            .filter(|(_, s)| match s.keep_alive {
                KeepAlive::For(d) => now.duration_since(s.last_used) >= d,
                KeepAlive::Forever => false,
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in expired {
            self.begin_unload(&mut g, &k);
        }
    }

    /// Runs [`reap`](Self::reap) every second on the current tokio runtime.
    pub fn start_reaper(self: &Arc<Self>) {
        let reg = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                match reg.upgrade() {
                    Some(r) => r.reap(),
                    None => return,
                }
            }
        });
    }

    /// Asks a model to leave: now if idle, else when its last stream ends. Returns whether it
    /// was resident.
    pub fn unload(self: &Arc<Self>, requested: &str) -> Result<bool, RegistryError> {
        let mut g = self.lock();
        let r = g.catalog.resolve(requested)?;
        let key = r.facts.path.clone();
        let was = self.leave(&mut g, &key);
        drop(g);
        self.changed.notify_waiters();
        Ok(was)
    }

    fn leave(self: &Arc<Self>, g: &mut Inner, key: &PathBuf) -> bool {
        let Some(s) = g.slots.get_mut(key) else {
            return false;
        };
        s.leaving = true;
        if s.in_flight == 0 && matches!(s.state, State::Ready(_)) {
            self.begin_unload(g, key);
        }
        true
    }

    /// Deletes a name. A loaded model whose file no other name uses leaves when idle; the
    /// file (if in the models directory and unused) is deleted once it has left.
    pub fn delete(self: &Arc<Self>, requested: &str) -> Result<String, RegistryError> {
        let mut g = self.lock();
        let path = g
            .catalog
            .resolve(requested)
            .ok()
            .map(|r| r.facts.path.clone());
        let (name, remove) = g.catalog.delete(requested)?;
        if let Some(p) = remove {
            match g.slots.get_mut(&p) {
                Some(s) => {
                    s.remove_after = Some(p.clone());
                    self.leave(&mut g, &p);
                }
                None => {
                    std::fs::remove_file(&p).map_err(|e| {
                        RegistryError::Io(format!("cannot delete {}: {e}", p.display()))
                    })?;
                }
            }
        } else if let Some(p) = path {
            // Only the name went: the model stays under another name leading to its file,
            // or leaves when idle if none does.
            let other = g
                .catalog
                .names()
                .into_iter()
                .find(|n| g.catalog.resolve(n).is_ok_and(|r| r.facts.path == p));
            match other {
                Some(n) => {
                    if let Some(s) = g.slots.get_mut(&p) {
                        s.name = n;
                    }
                }
                None => {
                    self.leave(&mut g, &p);
                }
            }
        }
        drop(g);
        self.changed.notify_waiters();
        Ok(name)
    }

    /// The models in memory and ready (not those loading or leaving).
    pub fn resident(&self) -> Vec<ResidentInfo> {
        let g = self.lock();
        let now = Instant::now();
        let mut out: Vec<ResidentInfo> = g
            .slots
            .values()
            .filter_map(|s| match &s.state {
                State::Ready(l) if !s.leaving || s.in_flight > 0 => Some(ResidentInfo {
                    name: s.name.clone(),
                    facts: l.facts.clone(),
                    estimate: s.estimate,
                    in_flight: s.in_flight,
                    expires_at: match s.keep_alive {
                        KeepAlive::Forever => None,
                        KeepAlive::For(d) => {
                            let idle = if s.in_flight > 0 {
                                Duration::ZERO
                            } else {
                                now.duration_since(s.last_used)
                            };
                            Some(SystemTime::now() + d.saturating_sub(idle))
                        }
                    },
                    loaded_at: s.loaded_at,
                }),
                _ => None,
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Whether the model behind `requested` is resident and ready.
    pub fn is_loaded(&self, requested: &str) -> bool {
        let g = self.lock();
        g.catalog.resolve(requested).is_ok_and(|r| {
            g.slots
                .get(&r.facts.path)
                .is_some_and(|s| matches!(s.state, State::Ready(_)))
        })
    }

    /// Scheduler figures of every model since the server started.
    pub fn totals(&self) -> Totals {
        let g = self.lock();
        let mut t = g.retired.clone();
        for s in g.slots.values() {
            if let State::Ready(l) = &s.state {
                if let Some(h) = &l.handle {
                    t.add(h.stats());
                }
            }
        }
        t
    }

    /// How many requests may wait for a slot, per model.
    pub fn queue_size(&self) -> usize {
        match self.queue.load(std::sync::atomic::Ordering::Relaxed) {
            0 => self.cfg.load.queue,
            n => n,
        }
    }

    /// Sets the queue size of every loaded model and of those loaded later (`None`: back to
    /// `--queue`).
    pub fn set_queue_size(&self, n: Option<usize>) {
        self.queue
            .store(n.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
        let size = self.queue_size();
        let g = self.lock();
        for s in g.slots.values() {
            if let State::Ready(l) = &s.state {
                if let Some(h) = &l.handle {
                    h.set_queue(size);
                }
            }
        }
    }

    /// Stops every model's scheduler from taking requests (server shutdown); running
    /// requests finish.
    pub fn shutdown(&self) {
        let g = self.lock();
        for s in g.slots.values() {
            if let State::Ready(l) = &s.state {
                if let Some(h) = &l.handle {
                    h.shutdown();
                }
            }
        }
    }
}

/// Compiles a name's template override with the model's BOS/EOS strings.
fn compile_template(r: &Resolved, l: &Loaded) -> Result<Option<ChatTemplate>, RegistryError> {
    let Some(src) = &r.overrides.template else {
        return Ok(None);
    };
    let (bos, eos) = l
        .template
        .as_ref()
        .map(|t| (t.bos_token().to_string(), t.eos_token().to_string()))
        .unwrap_or_default();
    ChatTemplate::new(src, bos, eos).map(Some).map_err(|e| {
        RegistryError::invalid(format!(
            "the template of model {:?} is invalid: {e}",
            r.name
        ))
    })
}

/// Bytes of memory available to new allocations now (`MemAvailable`), if known.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Parses a size such as `8GiB`, `512MB`, `2G` or a plain byte count.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("invalid size {s:?} (e.g. 8GiB, 512MiB)"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" => 1e12,
        "tib" => 1024f64.powi(4),
        _ => return Err(format!("invalid size {s:?} (e.g. 8GiB, 512MiB)")),
    };
    Ok((n * scale) as u64)
}

/// Hands the memory an unloaded model freed back to the system before the next model loads.
/// glibc keeps freed heap blocks (cache slots, activations of the model's threads) in its
/// arenas, where they still count as resident; the next model would then add to them.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns unused memory of the allocator to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5 GB").unwrap(), 1_500_000_000);
        assert_eq!(parse_size("300MiB").unwrap(), 300 << 20);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5 parsecs").is_err());
    }
}
