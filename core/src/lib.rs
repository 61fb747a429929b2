//! weft-core: everything needed to run a model, with no knowledge of HTTP, browsers or CUDA.

pub mod backend;
pub mod chat;
pub mod dtype;
pub mod engine;
pub mod generation;
pub mod gguf;
pub mod kv_cache;
pub mod loaded;
pub mod model;
pub mod quant;
pub mod sampler;
pub mod scheduler;
pub mod tokenizer;

#[doc(hidden)]
pub mod test_support;
