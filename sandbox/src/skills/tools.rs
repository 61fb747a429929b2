//! The `skills_list` and `skills_read` tools: progressive disclosure of skills to a model.

use serde_json::{json, Value};

use super::SkillRegistry;
use crate::error::{Error, Result};

/// Largest file `skills_read` returns (more is cut, and says so).
const READ_LIMIT: usize = 64 << 10;

/// `skills_list`: every skill's name and description, and its files (when `only` is given, just
/// those skills).
pub fn skills_list(registry: &SkillRegistry, only: Option<&[String]>) -> Value {
    let skills: Vec<Value> = registry
        .list()
        .skills
        .into_iter()
        .filter(|s| only.is_none_or(|o| o.iter().any(|n| n == &s.id || n == &s.name)))
        .map(|s| {
            json!({
                "name": s.id,
                "description": s.description,
                "files": s.files.iter().map(|f| f.path.clone()).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "skills": skills })
}

/// `skills_read`: a skill's instructions (the `SKILL.md` body) when `path` is None, else one
/// of its text files.
pub fn skills_read(registry: &SkillRegistry, name: &str, path: Option<&str>) -> Result<Value> {
    let skill = registry
        .list()
        .skills
        .into_iter()
        .find(|s| s.id == name || s.name == name)
        .ok_or_else(|| Error::NotFound(format!("skill {name}")))?;
    match path {
        None | Some("") | Some("SKILL.md") => Ok(json!({
            "name": skill.id,
            "description": skill.description,
            "instructions": skill.instructions,
            "files": skill.files.iter().map(|f| f.path.clone()).collect::<Vec<_>>(),
        })),
        Some(p) => {
            let bytes = registry.read_file(&skill.id, p)?;
            let truncated = bytes.len() > READ_LIMIT;
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(READ_LIMIT)]).into_owned();
            Ok(json!({
                "name": skill.id,
                "path": p,
                "content": text,
                "bytes": bytes.len(),
                "truncated": truncated,
            }))
        }
    }
}
