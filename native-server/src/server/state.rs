//! What every handler shares: the server settings and, once loaded, the model.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime};

use weft_core::chat::{ChatTemplate, Message};
use weft_core::model::ModelInfo;
use weft_core::scheduler::Handle;
use weft_core::tokenizer::Tokenizer;

use super::error::ApiError;
use super::sampling::{Precedence, SamplingFields};

/// Settings from the `weft serve` command line.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub model_path: PathBuf,
    /// The name clients use for the model (default: the file name without `.gguf`).
    pub model_name: String,
    pub backend: String,
    pub n_ctx: usize,
    pub parallel: usize,
    /// Default and cap of generated tokens per request.
    pub max_tokens: usize,
    pub queue: usize,
    /// Largest request body accepted, in bytes.
    pub body_limit: usize,
    pub sampling: SamplingFields,
    pub precedence: Precedence,
}

/// The loaded model and the scheduler serving it.
pub struct Loaded {
    pub handle: Handle,
    pub tokenizer: Arc<Tokenizer>,
    pub template: Option<ChatTemplate>,
    pub info: ModelInfo,
    /// Model file size in bytes.
    pub file_size: u64,
    /// Quantization of most weights, e.g. `Q4_1`.
    pub quantization: String,
    pub n_params: u64,
}

/// Shared server state.
pub struct AppState {
    pub cfg: ServeConfig,
    pub loaded: OnceLock<Loaded>,
    /// Why loading failed, if it did.
    pub load_error: OnceLock<String>,
    pub started: Instant,
    pub modified: SystemTime,
    /// Chat-UI sessions: id → tracked conversation.
    pub sessions: Mutex<HashMap<String, Vec<Message>>>,
}

/// The handle handlers get.
pub type Shared = Arc<AppState>;

impl AppState {
    pub fn new(cfg: ServeConfig) -> Self {
        let modified = std::fs::metadata(&cfg.model_path)
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        AppState {
            cfg,
            loaded: OnceLock::new(),
            load_error: OnceLock::new(),
            started: Instant::now(),
            modified,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The model, or 503 while it loads (or after loading failed).
    pub fn model(&self) -> Result<&Loaded, ApiError> {
        match self.loaded.get() {
            Some(l) if !l.handle.is_closing() => Ok(l),
            Some(_) => Err(ApiError::unavailable("the server is shutting down")),
            None => Err(ApiError::unavailable(match self.load_error.get() {
                Some(e) => format!("the model failed to load: {e}"),
                None => "the model is still loading; retry shortly".into(),
            })),
        }
    }

    /// Whether `name` refers to the served model: its name, with `.gguf`, with an Ollama tag
    /// (`name:latest`), or the file name.
    pub fn is_model(&self, name: &str) -> bool {
        let served = self.cfg.model_name.as_str();
        let file = self
            .cfg
            .model_path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let base = name.strip_suffix(":latest").unwrap_or(name);
        let base = base.strip_suffix(".gguf").unwrap_or(base);
        base == served || name == file || base == file.trim_end_matches(".gguf")
    }

    /// 404 unless `name` is the served model.
    pub fn check_model(&self, name: &str) -> Result<(), ApiError> {
        if self.is_model(name) {
            Ok(())
        } else {
            Err(ApiError::unknown_model(name, &self.cfg.model_name))
        }
    }

    /// Seconds since the Unix epoch.
    pub fn now_unix() -> u64 {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }
}
