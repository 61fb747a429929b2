//! What the server knows about a model file without loading its weights: read from the GGUF
//! header (a memory map that touches only the first pages), so `/api/tags` and `/api/show`
//! answer for every model, loaded or not, and a corrupt file is found at start-up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use weft_core::chat::ChatTemplate;
use weft_core::gguf::{Gguf, ModelFile};
use weft_core::loaded::Capabilities;

/// Header facts of one GGUF file.
#[derive(Clone, Debug)]
pub struct Facts {
    pub path: PathBuf,
    pub file_size: u64,
    pub modified: SystemTime,
    pub architecture: String,
    pub n_params: u64,
    /// Quantization of most weights, e.g. `Q4_K`.
    pub quantization: String,
    pub context_length: u64,
    pub embedding_length: u64,
    pub block_count: u64,
    pub vocab_size: u64,
    /// The chat template's source (the file's own or the built-in one for its family).
    pub template: Option<String>,
    /// What the model can do, from its family and its own chat template (see
    /// [`Facts::capabilities_with`] for a template given in the registry's overrides).
    pub capabilities: Capabilities,
    /// The vision projector the model is served with (`--mmproj`, or found beside it: see
    /// the `projector` module); `None`: text only.
    pub mmproj: Option<super::ProjectorFacts>,
    /// Bytes of K and V per position and layer (all layers summed), for the memory estimate.
    kv_bytes_per_position: u64,
}

impl Facts {
    /// Reads the header of `path`. The error is one line fit for a client.
    pub fn read(path: &Path) -> Result<Facts, String> {
        Self::read_unscrubbed(path).map_err(|e| super::scrub(&e, path))
    }

    fn read_unscrubbed(path: &Path) -> Result<Facts, String> {
        if path.is_dir() {
            // A Hugging Face folder (an embedding model): its weights file under a GGUF header.
            let hf = weft_core::hf::HfModel::open(path).map_err(|e| e.to_string())?;
            let weights = path.join("model.safetensors");
            let meta = std::fs::metadata(&weights)
                .map_err(|e| format!("{}: {e}", super::shown(&weights)))?;
            return Self::from_header(path, &meta, &hf.file.gguf);
        }
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", super::shown(path)))?;
        let file = ModelFile::open(path).map_err(|e| e.to_string())?;
        let mut facts = Self::from_header(path, &meta, &file.gguf)?;
        if facts.capabilities.completion {
            facts.mmproj = super::ProjectorFacts::beside(path, facts.embedding_length);
        }
        Ok(facts)
    }

    fn from_header(path: &Path, meta: &std::fs::Metadata, g: &Gguf) -> Result<Facts, String> {
        let architecture = g
            .architecture()
            .ok_or("the file has no general.architecture")?
            .to_string();
        let n_params = g.tensors.iter().map(|t| t.n_elements).sum();
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for t in g.tensors.iter().filter(|t| t.dims.len() >= 2) {
            *counts.entry(t.ty.name()).or_default() += t.n_elements;
        }
        let quantization = counts
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(k, _)| k.to_string())
            .unwrap_or_default();
        let key = |k: &str| g.arch_key(k).and_then(|v| v.as_u64()).unwrap_or(0);
        let n_embd = key("embedding_length");
        let n_head = key("attention.head_count").max(1);
        let n_head_kv = match key("attention.head_count_kv") {
            0 => n_head,
            n => n,
        };
        let head_k = match key("attention.key_length") {
            0 => n_embd / n_head,
            n => n,
        };
        let head_v = match key("attention.value_length") {
            0 => n_embd / n_head,
            n => n,
        };
        let block_count = key("block_count");
        // f16 K and V (the server's cache type), every layer at full context: an upper bound
        // (sliding-window layers hold less).
        let kv_bytes_per_position = block_count * n_head_kv * (head_k + head_v) * 2;
        let vocab_size = g
            .get_array("tokenizer.ggml.tokens")
            .map(|a| a.len() as u64)
            .unwrap_or_else(|| key("vocab_size"));
        let template = ChatTemplate::from_gguf(g).ok();
        let capabilities = Capabilities::of(g, template.as_ref());
        Ok(Facts {
            path: path.to_path_buf(),
            file_size: meta.len(),
            modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            architecture,
            n_params,
            quantization,
            context_length: key("context_length"),
            embedding_length: n_embd,
            block_count,
            vocab_size,
            capabilities,
            mmproj: None,
            template: template.map(|t| t.source().to_string()),
            kv_bytes_per_position,
        })
    }

    /// Bytes of K and V one position of one sequence takes (all layers).
    pub fn kv_bytes_per_position(&self) -> u64 {
        self.kv_bytes_per_position
    }

    /// Bytes the model holds once loaded with `positions` KV positions (context × slots): the
    /// mapped weights, the cache, and a margin for step buffers.
    pub fn resident_estimate(&self, positions: u64) -> u64 {
        let kv = self.kv_bytes_per_position * positions;
        let files = self.file_size + self.mmproj.as_ref().map_or(0, |m| m.file_size);
        files + kv + (files + kv) / 10
    }

    /// An embedding model (an encoder): it embeds, it does not generate text.
    pub fn embedding_only(&self) -> bool {
        self.capabilities.embedding && !self.capabilities.completion
    }

    /// The capabilities when the model is served with `template` in place of its own (an
    /// override from `/api/create`): chat, tools and thinking follow the template that will
    /// be used.
    pub fn capabilities_with(&self, template: Option<&str>) -> Capabilities {
        let mut c = self.capabilities;
        if let Some(t) = template {
            c.chat = c.completion;
            c.tools = c.chat && t.contains("tools");
            c.thinking = c.chat && t.contains(weft_core::chat::THINK_OPEN);
        }
        c
    }

    /// A stable identifier of the file's version (path, size and time; not a content hash,
    /// which would mean reading every byte at start-up).
    pub fn digest(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.path.hash(&mut h);
        self.modified.hash(&mut h);
        self.file_size.hash(&mut h);
        format!("{:016x}", h.finish())
    }

    /// `1.2B` / `135M`, as Ollama shows parameter counts.
    pub fn parameter_size(&self) -> String {
        let n = self.n_params;
        if n >= 1_000_000_000 {
            format!("{:.1}B", n as f64 / 1e9)
        } else {
            format!("{}M", (n as f64 / 1e6).round())
        }
    }
}
