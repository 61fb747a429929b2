//! What several surfaces share: Ollama-style `options`, sampling resolution, structured output,
//! tool calling and forcing, replies taken apart (reasoning, answer, calls), ids, image and
//! video input.

pub mod ids;
pub mod images;
pub mod options;
pub mod reply;
pub mod sampling;
pub mod structured;
pub mod tool_choice;
pub mod tools;
pub mod video;

use serde::Deserialize;
use utoipa::ToSchema;

/// A string or a list of strings (OpenAI `stop`).
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}
