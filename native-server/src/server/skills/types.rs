//! The bodies of the skills routes, as the chat-UI peer spells them: one skill object shared by
//! `/api/skills` and `/v1/skills`, the `/api` listing (with load errors) and the `/v1` list.

use serde::Serialize;
use utoipa::ToSchema;
use weft_sandbox::skills::{LoadError, Skill, SkillOrigin};

/// One skill.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillObject {
    pub id: String,
    /// Always `skill`.
    pub object: &'static str,
    pub name: String,
    pub description: String,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub files: Vec<SkillFileObject>,
    /// Total size of the files.
    pub bytes: u64,
    /// `discovered` (found in a configured directory, read-only) or `installed` (uploaded,
    /// deletable).
    pub origin: &'static str,
    /// What loaded despite being out of spec.
    pub warnings: Vec<String>,
    /// Last change of `SKILL.md`, RFC 3339.
    pub modified: Option<String>,
    /// The `SKILL.md` body; only on the one-skill routes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// One file of a skill.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillFileObject {
    pub path: String,
    pub bytes: u64,
    /// `script`, `reference`, `asset`, `manifest` or `other`.
    pub kind: &'static str,
    pub text: bool,
}

/// A folder that looked like a skill and failed to load.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillLoadError {
    pub path: String,
    pub message: String,
}

/// `GET /api/skills`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillsListing {
    pub enabled: bool,
    /// Whether `POST /api/skills` can install.
    pub installable: bool,
    pub skills: Vec<SkillObject>,
    pub errors: Vec<SkillLoadError>,
}

/// `GET /v1/skills`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillList {
    /// Always `list`.
    pub object: &'static str,
    pub data: Vec<SkillObject>,
}

/// `DELETE /api/skills/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Removed {
    pub removed: bool,
}

/// The form `POST /api/skills` takes (multipart/form-data).
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct SkillUpload {
    /// A zip of the skill folder (`name/SKILL.md`) or of its contents (`SKILL.md` at the root).
    #[schema(value_type = String, format = Binary)]
    pub file: Vec<u8>,
    /// `true` replaces an installed skill of the same name (otherwise a clash is a 409).
    pub overwrite: Option<bool>,
}

impl SkillObject {
    pub fn new(s: Skill, with_instructions: bool) -> Self {
        SkillObject {
            object: "skill",
            origin: match s.origin {
                SkillOrigin::Discovered => "discovered",
                SkillOrigin::Installed => "installed",
            },
            files: s
                .files
                .into_iter()
                .map(|f| SkillFileObject {
                    path: f.path,
                    bytes: f.bytes,
                    kind: f.kind,
                    text: f.text,
                })
                .collect(),
            instructions: with_instructions.then_some(s.instructions),
            id: s.id,
            name: s.name,
            description: s.description,
            license: s.license,
            compatibility: s.compatibility,
            bytes: s.bytes,
            warnings: s.warnings,
            modified: s.modified,
        }
    }
}

impl From<LoadError> for SkillLoadError {
    fn from(e: LoadError) -> Self {
        SkillLoadError {
            path: e.path,
            message: e.message,
        }
    }
}
