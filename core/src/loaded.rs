//! [`LoadedModel`]: a model file opened and ready to run — weights on a backend with their KV
//! cache, tokenizer (which owns the end-of-generation set), chat template and capabilities.
//! `weft run`, `weft bench`, the server's registry and the browser build all open models
//! through it, so they read a file the same way.
//!
//! ```no_run
//! # use weft_core::{backend::cpu::CpuBackend, engine::EngineConfig, loaded::LoadedModel};
//! # use weft_core::generation::GenParams;
//! let mut m = LoadedModel::open(
//!     "models/SmolLM2-135M-Instruct.Q4_1.gguf",
//!     Box::new(CpuBackend::new(0)),
//!     EngineConfig::default(),
//!     &mut |_, _| {},
//! )
//! .unwrap();
//! let ids = m.encode_prompt("The sky is", false);
//! let mut session = m.session().unwrap();
//! let out = session
//!     .generate(&mut m, &ids, &GenParams::default(), &mut |step| {
//!         print!("{}", step.text);
//!         true
//!     })
//!     .unwrap();
//! println!("\n{:?}: {} tokens", out.finish, out.tokens.len());
//! ```

use std::sync::{Arc, OnceLock};

use serde::Serialize;

use crate::backend::Backend;
use crate::chat::{ChatError, ChatTemplate};
use crate::engine::{Engine, EngineConfig, EngineError};
use crate::generation::Session;
use crate::gguf::{Gguf, GgufError, ModelFile};
use crate::model::{self, Role};
use crate::sampler::TokenTexts;
use crate::tokenizer::{Tokenizer, TokenizerError};

/// What a model can be asked to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// Continue raw text.
    pub completion: bool,
    /// Answer a conversation (it generates and has a chat template).
    pub chat: bool,
    /// Offer tools to the model (its chat template renders them).
    pub tools: bool,
    /// Write reasoning apart from the answer (its chat template marks it with `<think>`).
    pub thinking: bool,
    /// Turn text into an embedding vector.
    pub embedding: bool,
}

impl Capabilities {
    /// What a file offers, from its family's role (see [`model::FAMILY_ROLES`]) and its chat
    /// template (the file's own or the built-in one for the family). Reads only metadata, so
    /// it answers for files that are not loaded.
    pub fn of(gguf: &Gguf, template: Option<&ChatTemplate>) -> Capabilities {
        let role = gguf.architecture().and_then(model::role);
        let generates = role == Some(Role::Generate);
        let chat = generates && template.is_some();
        Capabilities {
            completion: generates,
            chat,
            tools: chat && template.is_some_and(|t| t.source().contains("tools")),
            thinking: chat && template.is_some_and(ChatTemplate::marks_reasoning),
            embedding: role == Some(Role::Embed),
        }
    }
}

/// Why a model could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not a readable GGUF file.
    #[error(transparent)]
    File(#[from] GgufError),
    /// The file's tokenizer is missing or unsupported.
    #[error("reading the tokenizer: {0}")]
    Tokenizer(#[from] TokenizerError),
    /// The weights could not be loaded (unsupported architecture, backend out of memory ...).
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// A model ready to run.
pub struct LoadedModel {
    pub file: Arc<ModelFile>,
    /// Weights on their backend, and the KV cache.
    pub engine: Engine,
    /// The tokenizer; it holds the model's one end-of-generation set
    /// ([`Tokenizer::eog_ids`]).
    pub tokenizer: Arc<Tokenizer>,
    /// The chat template (the file's own, or the built-in one for its family), or why there
    /// is none.
    pub template: Result<ChatTemplate, ChatError>,
    pub capabilities: Capabilities,
    /// Token texts for constrained decoding, built on first use.
    texts: OnceLock<Arc<TokenTexts>>,
}

impl LoadedModel {
    /// Memory-maps and loads the file at `path` onto `backend`. `progress(done, total)`
    /// reports tensors loaded.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(
        path: impl AsRef<std::path::Path>,
        backend: Box<dyn Backend>,
        cfg: EngineConfig,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<LoadedModel, LoadError> {
        let file = Arc::new(ModelFile::open(path)?);
        Self::from_file(file, backend, cfg, progress)
    }

    /// Loads a model file held in memory (the browser build).
    pub fn from_bytes(
        bytes: Vec<u8>,
        backend: Box<dyn Backend>,
        cfg: EngineConfig,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<LoadedModel, LoadError> {
        let file = Arc::new(ModelFile::from_vec(bytes)?);
        Self::from_file(file, backend, cfg, progress)
    }

    /// Loads an opened file: tokenizer and template first (cheap, so a bad file fails before
    /// any weight is uploaded), then the weights.
    pub fn from_file(
        file: Arc<ModelFile>,
        backend: Box<dyn Backend>,
        cfg: EngineConfig,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<LoadedModel, LoadError> {
        let tokenizer = Arc::new(Tokenizer::from_gguf(&file.gguf)?);
        let template = ChatTemplate::from_gguf(&file.gguf);
        let capabilities = Capabilities::of(&file.gguf, template.as_ref().ok());
        let engine = Engine::load(file.clone(), backend, cfg, progress)?;
        Ok(LoadedModel {
            file,
            engine,
            tokenizer,
            template,
            capabilities,
            texts: OnceLock::new(),
        })
    }

    /// The chat template, if the model has one.
    pub fn chat_template(&self) -> Option<&ChatTemplate> {
        self.template.as_ref().ok()
    }

    /// The ids that end generation, sorted.
    pub fn eog_ids(&self) -> &[u32] {
        self.tokenizer.eog_ids()
    }

    /// Rendered prompt text to ids, with the one rule for BOS
    /// ([`Tokenizer::encode_prompt`]).
    pub fn encode_prompt(&self, text: &str, parse_special: bool) -> Vec<u32> {
        self.tokenizer.encode_prompt(text, parse_special)
    }

    /// The bytes of every token, for constrained decoding (built once, then shared).
    pub fn token_texts(&self) -> Arc<TokenTexts> {
        self.texts
            .get_or_init(|| Arc::new(TokenTexts::new(&self.tokenizer)))
            .clone()
    }

    /// Takes a sequence slot of the engine for generating on it by itself.
    pub fn session(&mut self) -> Result<Session, EngineError> {
        Session::new(&mut self.engine)
    }
}
