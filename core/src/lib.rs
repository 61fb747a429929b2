//! weft-core: everything needed to run a model, with no knowledge of HTTP, browsers or any backend it does not implement itself.

pub mod backend;
pub mod chat;
// Reads diffusers folders with the safetensors crate, a native-only dependency (as hf/).
#[cfg(not(target_arch = "wasm32"))]
pub mod diffusion;
pub mod dtype;
pub mod embed;
pub mod engine;
pub mod generation;
pub mod gguf;
#[cfg(not(target_arch = "wasm32"))]
pub mod hf;
pub mod kv_cache;
pub mod loaded;
pub mod model;
pub mod quant;
pub mod quantize;
pub mod sampler;
pub mod scheduler;
pub mod tokenizer;
pub mod vision;

#[doc(hidden)]
pub mod test_support;
