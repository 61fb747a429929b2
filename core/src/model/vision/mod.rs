//! Vision encoders: the image half of a multimodal model, read from the `mmproj` GGUF that
//! llama.cpp's converter writes beside the text model. Each projector family is one file that
//! records its encoder as a backend [`crate::backend::Graph`], like the text families.

pub mod encoder;
pub mod gemma3;
pub mod idefics3;
pub mod idefics3_prompt;
pub mod mmproj;
pub mod qwen25vl;
pub mod siglip;

pub use mmproj::{Mmproj, Projector, VisionError, VisionHparams};
