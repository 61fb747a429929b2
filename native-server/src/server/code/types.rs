//! The wire shapes of the server-side tool loop: the request fields every chat surface accepts,
//! the record of an executed built-in call that OpenAI and Ollama replies carry, and the
//! chat-UI `tool_progress` / `skill_step` frames.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use weft_sandbox::ArtifactFile;

/// Agent-skill fields of a chat request (OpenAI, Ollama and chat-UI alike).
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
pub struct SkillFields {
    /// Skills the answer should be written under (by id or name); an unknown one is a 400.
    /// The model reads their instructions through the built-in `skills_read` tool.
    pub skills: Option<Vec<String>>,
    /// Also show the model the skills the request did not name (default true).
    #[serde(alias = "skillsDiscovery")]
    pub skills_discovery: Option<bool>,
}

/// A file a built-in call wrote, as saved for download.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct FileLink {
    /// Path inside the run's workspace, `/`-separated.
    pub name: String,
    pub bytes: u64,
    /// `/api/code/artifacts/{runId}/{name}`.
    pub url: String,
}

impl From<&ArtifactFile> for FileLink {
    fn from(f: &ArtifactFile) -> Self {
        FileLink {
            name: f.name.clone(),
            bytes: f.bytes,
            url: f.url.clone(),
        }
    }
}

/// One built-in tool call the server executed while answering (`executed_calls` on the OpenAI
/// and Ollama reply messages; official clients ignore the field).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ExecutedCall {
    /// The tool round (1-based).
    pub round: usize,
    pub id: String,
    /// `run_python`, `read_file`, `skills_read`, ...
    pub name: String,
    /// The arguments object the model gave.
    #[schema(value_type = Object)]
    pub arguments: serde_json::Value,
    /// False when the call failed (an exception, a non-zero exit, a bad path).
    pub ok: bool,
    /// The start of what was fed back to the model (a JSON object as text), at most
    /// [`OUTPUT_EXCERPT`] bytes.
    pub output: String,
    /// What the call acted on (a path, a skill file), if anything.
    pub detail: Option<String>,
    /// The skill involved, for skill tools.
    pub skill: Option<String>,
    pub seconds: f64,
    /// Files the call wrote, downloadable until they expire (an hour).
    pub files: Vec<FileLink>,
}

/// Bytes of a call's output kept in [`ExecutedCall::output`].
pub const OUTPUT_EXCERPT: usize = 2048;

/// Chat-UI frame while a built-in call runs and when it finished:
/// `{"tool_progress":"running","tool":"run_python","text":"","seconds":0,"detail":"..."}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolProgressFrame {
    /// `running` or `finished`.
    pub tool_progress: &'static str,
    pub tool: String,
    /// Live output tail; the sandbox returns output when the run ends, so this is empty.
    pub text: String,
    pub seconds: f64,
    pub detail: Option<String>,
}

/// Chat-UI frame after each built-in call:
/// `{"skill_step":"run_python","skill":null,"detail":"...","ok":true,"round":1,"files":[...]}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillStepFrame {
    /// The tool's name.
    pub skill_step: String,
    pub skill: Option<String>,
    pub detail: Option<String>,
    pub ok: bool,
    pub round: usize,
    pub files: Vec<FileLink>,
}
