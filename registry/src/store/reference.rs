//! What a pull reference means: an `http(s)` URL, or `hf.co/{owner}/{repo}:{file-or-quant}`
//! resolved against the Hugging Face endpoint setting.
//!
//! A reference whose part after `:` ends in `.gguf` names the file; anything else is a
//! quantization tag (`Q4_K_M`, `q8_0`), matched case-insensitively against the `.gguf` files
//! the repository lists (`GET {endpoint}/api/models/{owner}/{repo}`). Files are fetched from
//! `{endpoint}/{owner}/{repo}/resolve/main/{file}`, the hub's download scheme.

use serde_json::Value;

use super::StoreError;

/// The public hub; the only place its address is written. `--hf-endpoint` replaces it.
pub const DEFAULT_HF_ENDPOINT: &str = "https://huggingface.co";

/// A reference resolved to a download.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub url: String,
    /// The model name it gets unless the request gives one (the file name without `.gguf`).
    pub default_name: String,
}

/// The last path segment of a URL, without query or fragment.
fn file_of(url: &str) -> &str {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    path.rsplit('/').next().unwrap_or(path)
}

fn name_of_file(file: &str) -> String {
    let stem = file.strip_suffix(".gguf").unwrap_or(file);
    // File names may hold characters names may not; keep the allowed ones.
    stem.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Splits `hf.co/owner/repo[:spec]` (also `huggingface.co/...`), or returns None for other
/// references.
fn split_hf(reference: &str) -> Option<(&str, &str, Option<&str>)> {
    let rest = reference
        .strip_prefix("hf.co/")
        .or_else(|| reference.strip_prefix("huggingface.co/"))?;
    let (repo_path, spec) = match rest.split_once(':') {
        Some((r, s)) => (r, Some(s)),
        None => (rest, None),
    };
    let (owner, repo) = repo_path.split_once('/')?;
    Some((owner, repo, spec))
}

fn check_segment(what: &str, s: &str) -> Result<(), StoreError> {
    let ok = !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::invalid(format!(
            "invalid {what} {s:?} in the reference (letters, digits, '.', '_' and '-' only)"
        )))
    }
}

/// Resolves a reference. `list_files` answers `GET {endpoint}/api/models/{owner}/{repo}` (only
/// called for a quantization tag).
pub fn resolve_reference(
    reference: &str,
    hf_endpoint: &str,
    list_files: &mut dyn FnMut(&str) -> Result<Value, StoreError>,
) -> Result<Resolved, StoreError> {
    let r = reference.trim();
    if r.starts_with("http://") || r.starts_with("https://") {
        let file = file_of(r);
        if file.is_empty() {
            return Err(StoreError::invalid(format!(
                "the URL {:?} names no file; give the .gguf file's URL",
                super::pull_policy::redact(r)
            )));
        }
        return Ok(Resolved {
            url: r.to_string(),
            default_name: name_of_file(file),
        });
    }
    let Some((owner, repo, spec)) = split_hf(r) else {
        return Err(StoreError::invalid(format!(
            "unknown model reference {r:?}: give an http(s) URL or hf.co/OWNER/REPO:FILE_OR_QUANT"
        )));
    };
    check_segment("owner", owner)?;
    check_segment("repository", repo)?;
    let base = hf_endpoint.trim_end_matches('/');
    let file = match spec {
        Some(f) if f.to_ascii_lowercase().ends_with(".gguf") => {
            check_segment("file", f)?;
            f.to_string()
        }
        spec => {
            let tag = spec.unwrap_or("Q4_K_M");
            check_segment("quantization", tag)?;
            let listing = list_files(&format!("{base}/api/models/{owner}/{repo}"))?;
            pick_file(&listing, tag).ok_or_else(|| {
                StoreError::invalid(format!(
                    "hf.co/{owner}/{repo} has no .gguf file matching {tag:?}"
                ))
            })?
        }
    };
    Ok(Resolved {
        url: format!("{base}/{owner}/{repo}/resolve/main/{file}"),
        default_name: name_of_file(&file),
    })
}

/// The `.gguf` file of a repository listing (`{"siblings": [{"rfilename": ...}]}`) whose
/// name contains `tag` (case-insensitive), preferring the shortest such name; split files
/// (`-00001-of-00003`) are skipped.
fn pick_file(listing: &Value, tag: &str) -> Option<String> {
    let tag = tag.to_ascii_lowercase();
    let mut files: Vec<&str> = listing
        .get("siblings")?
        .as_array()?
        .iter()
        .filter_map(|s| s.get("rfilename")?.as_str())
        .filter(|f| {
            let l = f.to_ascii_lowercase();
            l.ends_with(".gguf") && l.contains(&tag) && !l.contains("-of-") && !f.contains('/')
        })
        .collect();
    files.sort_by_key(|f| (f.len(), f.to_string()));
    files.first().map(|f| f.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn no_listing(_: &str) -> Result<Value, StoreError> {
        panic!("no listing expected")
    }

    #[test]
    fn urls_and_hub_references() {
        let r = resolve_reference("https://x.test/a/b/model-q8.gguf?x=1", "E", &mut no_listing)
            .unwrap();
        assert_eq!(r.default_name, "model-q8");
        let r = resolve_reference(
            "hf.co/owner/repo-GGUF:model.Q4_K_M.gguf",
            "http://127.0.0.1:9/",
            &mut no_listing,
        )
        .unwrap();
        assert_eq!(
            r.url,
            "http://127.0.0.1:9/owner/repo-GGUF/resolve/main/model.Q4_K_M.gguf"
        );
        assert_eq!(r.default_name, "model.Q4_K_M");
        let mut asked = Vec::new();
        let r = resolve_reference("hf.co/o/r:q8_0", "http://h", &mut |u| {
            asked.push(u.to_string());
            Ok(
                json!({"siblings": [{"rfilename": "README.md"}, {"rfilename": "m-Q4_K_M.gguf"},
                                    {"rfilename": "m-Q8_0.gguf"}]}),
            )
        })
        .unwrap();
        assert_eq!(asked, ["http://h/api/models/o/r"]);
        assert_eq!(r.url, "http://h/o/r/resolve/main/m-Q8_0.gguf");
    }

    #[test]
    fn bad_references_are_refused() {
        for bad in [
            "ftp://x/y.gguf",
            "qwen",
            "hf.co/onlyowner",
            "hf.co/o/../x:f.gguf",
            "hf.co/o/r:../../etc.gguf",
            "https://host/",
        ] {
            let e = resolve_reference(bad, "http://h", &mut |_| Ok(json!({"siblings": []})));
            assert!(e.is_err(), "{bad} accepted");
        }
        let e = resolve_reference("hf.co/o/r:Q3_K_XL", "http://h", &mut |_| {
            Ok(json!({"siblings": [{"rfilename": "m-Q4_K_M.gguf"}]}))
        })
        .unwrap_err();
        assert!(
            e.message.contains("no .gguf file matching"),
            "{}",
            e.message
        );
    }
}
