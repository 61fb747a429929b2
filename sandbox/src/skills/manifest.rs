//! `SKILL.md`: YAML front matter (name, description, license, compatibility) and a Markdown body.

use crate::error::{Error, Result};

/// Longest description the Agent Skills format allows (longer loads, with a warning).
pub const MAX_DESCRIPTION: usize = 1024;
/// Longest skill name.
pub const MAX_NAME: usize = 64;

/// The parsed `SKILL.md`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// `name:` — lowercase letters, digits and hyphens.
    pub name: String,
    /// `description:` — what the skill does and when to use it.
    pub description: String,
    /// `license:`, if given.
    pub license: Option<String>,
    /// `compatibility:`, if given.
    pub compatibility: Option<String>,
    /// The Markdown after the front matter (the instructions).
    pub body: String,
}

#[derive(serde::Deserialize)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    license: Option<String>,
    compatibility: Option<String>,
}

/// True for a valid skill name: 1–64 of `a-z`, `0-9`, `-`, not starting or ending with `-`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Parses `SKILL.md`; `label` names the skill in errors (its folder or archive).
pub fn parse(text: &str, label: &str) -> Result<Manifest> {
    let err = |message: String| Error::Skill {
        name: label.to_string(),
        message,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or_else(|| {
            err("SKILL.md must start with YAML front matter between `---` lines".into())
        })?;
    let (yaml, body) = split_front_matter(rest)
        .ok_or_else(|| err("SKILL.md's front matter has no closing `---` line".into()))?;
    let fm: FrontMatter = serde_saphyr::from_str(yaml)
        .map_err(|e| err(format!("SKILL.md's front matter is not valid YAML: {e}")))?;
    let name = fm
        .name
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| err("SKILL.md is missing the required 'name' field".into()))?;
    let description = fm
        .description
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| err("SKILL.md is missing the required 'description' field".into()))?;
    Ok(Manifest {
        name,
        description,
        license: fm.license,
        compatibility: fm.compatibility,
        body: body.trim_start_matches(['\r', '\n']).to_string(),
    })
}

/// Splits at the first line that is exactly `---`: (yaml, body).
fn split_front_matter(rest: &str) -> Option<(&str, &str)> {
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_front_matter_and_body() {
        let m = parse(
            "---\nname: pdf\ndescription: >\n  Work with PDF files.\nlicense: Apache-2.0\n---\n\n# PDF\nUse it.\n",
            "pdf",
        )
        .unwrap();
        assert_eq!(m.name, "pdf");
        assert_eq!(m.description, "Work with PDF files.");
        assert_eq!(m.license.as_deref(), Some("Apache-2.0"));
        assert_eq!(m.body, "# PDF\nUse it.\n");
    }

    #[test]
    fn missing_fields_are_clear_errors() {
        let e = parse("---\nname: x\n---\nbody", "x").unwrap_err();
        assert!(e.to_string().contains("'description'"), "{e}");
        let e = parse("no front matter", "x").unwrap_err();
        assert!(e.to_string().contains("front matter"), "{e}");
        let e = parse("---\nname: [unclosed\n---\n", "x").unwrap_err();
        assert!(e.to_string().contains("YAML"), "{e}");
    }

    #[test]
    fn names() {
        assert!(valid_name("pdf-tools2"));
        for bad in ["", "-a", "a-", "A", "a_b", "a/b", "..", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
