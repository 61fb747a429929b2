//! Pulling a model over HTTP: streamed to a partial file in the store, resumed with a `Range`
//! request after a dropped connection (or, when the process died mid-way, by the next pull of
//! the same URL), verified against a sha256 (the request's, or the one the hub publishes in
//! `X-Linked-Etag` / `ETag`), checked to be a GGUF, then renamed into place.
//!
//! Redirects are followed here rather than by the client library, so the hub's own headers
//! (`X-Linked-Etag`, `X-Linked-Size`) are seen even when the bytes come from elsewhere, and
//! each one is checked against the store's [`PullPolicy`] (as is every address connected to).
//! Messages name URLs only through [`redact`]: no credential reaches a job row or a log.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::pull_policy::{check_literal, redact, unreachable, PullPolicy};
use super::{check_gguf, finish, resolve_reference, write_error, Store, StoreError};

/// What to pull.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PullRequest {
    /// An http(s) URL or `hf.co/{owner}/{repo}:{file-or-quant}`.
    #[serde(alias = "model", alias = "url")]
    pub reference: String,
    /// The name to store it under (default: the file name without `.gguf`).
    #[serde(default)]
    pub name: Option<String>,
    /// The expected sha256 (hex); default: what the server publishes, if anything.
    #[serde(default)]
    pub sha256: Option<String>,
}

/// How far a pull is.
#[derive(Clone, Debug, Default)]
pub struct PullProgress {
    /// `resolving`, `downloading`, `verifying`.
    pub phase: &'static str,
    pub done: u64,
    /// 0 while unknown.
    pub total: u64,
    /// The sha256 being checked against, once known.
    pub digest: Option<String>,
}

/// What a finished pull made.
#[derive(Clone, Debug, Serialize)]
pub struct Pulled {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    pub sha256: String,
    /// Whether the sha256 was checked against an expected value.
    pub verified: bool,
    /// Requests that resumed with `Range` (0 when it came in one go).
    pub resumed: u32,
}

/// What the partial file belongs to (saved beside it, so a later pull can resume).
#[derive(Serialize, Deserialize, Default, Clone)]
struct PartialMeta {
    /// The SHA-256 of the URL (not the URL: it may hold credentials).
    url: String,
    etag: Option<String>,
    total: u64,
    expected: Option<String>,
}

/// Attempts in a row that fail (or end early having received under a MiB) before giving up.
const RETRIES: u32 = 4;
const MAX_REDIRECTS: u32 = 10;

fn agent(policy: &PullPolicy) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_connect(Some(Duration::from_secs(15)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_recv_body(None)
        .user_agent(concat!("weft/", env!("CARGO_PKG_VERSION")))
        .build();
    policy.agent(config)
}

/// The one message for any transport error (refused, reset, not HTTP, timed out, unknown
/// host, or an address the policy refuses): which one it was goes to the log only, so the
/// caller cannot map ports and hosts through pulls.
fn transport(url: &str, e: &ureq::Error) -> String {
    tracing::info!(url = %redact(url), error = %e, "pull: connection failed");
    unreachable(url)
}

/// A sha256 from an ETag-style header (quotes and `W/` removed), if it is one.
fn sha_of_etag(v: &str) -> Option<String> {
    let v = v
        .trim()
        .trim_start_matches("W/")
        .trim_matches('"')
        .to_ascii_lowercase();
    (v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit())).then_some(v)
}

fn header(r: &ureq::http::Response<ureq::Body>, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Resolves a relative `Location` against the URL it came from.
fn join_location(base: &str, loc: &str) -> String {
    if loc.starts_with("http://") || loc.starts_with("https://") {
        return loc.to_string();
    }
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    if loc.starts_with('/') {
        format!("{}{loc}", &base[..host_end])
    } else {
        let dir = base
            .rfind('/')
            .filter(|&i| i >= host_end)
            .unwrap_or(host_end);
        format!("{}/{loc}", &base[..dir])
    }
}

/// What the server said about the file, gathered over redirects.
#[derive(Default)]
struct Seen {
    linked_sha: Option<String>,
    linked_size: Option<u64>,
    etag: Option<String>,
}

/// Sends a GET (with `Range` from `from` when non-zero), following redirects by hand.
fn get(
    agent: &ureq::Agent,
    policy: &PullPolicy,
    url: &str,
    from: u64,
    if_range: Option<&str>,
    seen: &mut Seen,
) -> Result<ureq::http::Response<ureq::Body>, String> {
    let mut url = url.to_string();
    for _ in 0..=MAX_REDIRECTS {
        check_literal(policy, &url).map_err(|()| unreachable(&url))?;
        let mut req = agent.get(&url);
        if from > 0 {
            req = req.header("Range", format!("bytes={from}-"));
            if let Some(tag) = if_range {
                req = req.header("If-Range", tag);
            }
        }
        let r = req.call().map_err(|e| transport(&url, &e))?;
        if let Some(s) = header(&r, "x-linked-etag").and_then(|v| sha_of_etag(&v)) {
            seen.linked_sha = Some(s);
        }
        if let Some(n) = header(&r, "x-linked-size").and_then(|v| v.trim().parse().ok()) {
            seen.linked_size = Some(n);
        }
        if r.status().is_redirection() {
            let loc = header(&r, "location")
                .ok_or_else(|| format!("{} redirected without a Location", redact(&url)))?;
            let next = join_location(&url, &loc);
            if !policy.may_redirect(&url, &next) {
                return Err(format!(
                    "{} redirected to {}, another scheme, host or port: refused (redirects stay \
                     on the same origin unless --pull-redirect-host names the target)",
                    redact(&url),
                    redact(&next)
                ));
            }
            url = next;
            continue;
        }
        seen.etag = header(&r, "etag");
        return Ok(r);
    }
    Err(format!("too many redirects from {}", redact(&url)))
}

/// Fetches a small JSON document (a repository listing).
fn get_json(agent: &ureq::Agent, policy: &PullPolicy, url: &str) -> Result<Value, StoreError> {
    let mut seen = Seen::default();
    let mut r = get(agent, policy, url, 0, None, &mut seen).map_err(StoreError::failed)?;
    let status = r.status().as_u16();
    let url = &redact(url);
    if status == 404 {
        return Err(StoreError::invalid(format!("{url}: not found (404)")));
    }
    if status != 200 {
        return Err(StoreError::failed(format!("{url}: HTTP {status}")));
    }
    let text = r
        .body_mut()
        .with_config()
        .limit(16 << 20)
        .read_to_string()
        .map_err(|e| StoreError::failed(format!("{url}: {e}")))?;
    serde_json::from_str(&text)
        .map_err(|e| StoreError::failed(format!("{url}: not a JSON listing: {e}")))
}

fn partial_paths(store: &Store, url: &str) -> Result<(PathBuf, PathBuf), StoreError> {
    let key = hex(&Sha256::digest(url.as_bytes()))[..24].to_string();
    let dir = store.partial_dir()?;
    Ok((
        dir.join(format!("pull-{key}.part")),
        dir.join(format!("pull-{key}.json")),
    ))
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn file_sha256(path: &Path, cancel: &mut dyn FnMut(u64) -> bool) -> Result<String, StoreError> {
    let mut f =
        File::open(path).map_err(|e| StoreError::failed(format!("{}: {e}", path.display())))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| StoreError::failed(format!("{}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        done += n as u64;
        if !cancel(done) {
            return Err(StoreError::failed("cancelled"));
        }
    }
    Ok(hex(&h.finalize()))
}

/// Removes the partial file and its note when dropped, unless disarmed.
struct PartialGuard {
    paths: Option<(PathBuf, PathBuf)>,
}

impl Drop for PartialGuard {
    fn drop(&mut self) {
        if let Some((a, b)) = self.paths.take() {
            let _ = std::fs::remove_file(a);
            let _ = std::fs::remove_file(b);
        }
    }
}

/// Pulls a model into the store. `progress` is called as bytes arrive; returning `false`
/// cancels (the partial file is removed). Every error removes the partial file too, except
/// when the process dies, in which case the next pull of the same URL resumes it.
pub fn pull(
    store: &Store,
    req: &PullRequest,
    progress: &mut dyn FnMut(&PullProgress) -> bool,
) -> Result<Pulled, StoreError> {
    let policy = &store.pull_policy;
    let agent = agent(policy);
    let mut p = PullProgress {
        phase: "resolving",
        ..PullProgress::default()
    };
    if !progress(&p) {
        return Err(StoreError::failed("cancelled"));
    }
    let resolved = resolve_reference(&req.reference, &store.hf_endpoint, &mut |u| {
        get_json(&agent, policy, u)
    })?;
    let (name, dest) = store.model_path(req.name.as_deref().unwrap_or(&resolved.default_name))?;
    let expected = match &req.sha256 {
        Some(s) => Some(sha_of_etag(s).ok_or_else(|| {
            StoreError::invalid(format!("sha256 {s:?} is not 64 hexadecimal digits"))
        })?),
        None => None,
    };
    let url = resolved.url;
    // What messages show of the URL.
    let shown = redact(&url);
    let url_key = hex(&Sha256::digest(url.as_bytes()));
    let (part, meta_path) = partial_paths(store, &url)?;
    let mut guard = PartialGuard {
        paths: Some((part.clone(), meta_path.clone())),
    };
    // A partial file from an earlier attempt at the same URL is resumed.
    let mut meta: PartialMeta = std::fs::read_to_string(&meta_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .filter(|m: &PartialMeta| m.url == url_key)
        .unwrap_or_default();
    meta.url.clone_from(&url_key);
    let mut file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(&part)
        .map_err(|e| write_error(&part, &e))?;
    let mut have = file.metadata().map(|m| m.len()).unwrap_or(0);
    if meta.etag.is_none() && have > 0 {
        // Nothing says what the bytes belong to: start over.
        file.set_len(0).map_err(|e| write_error(&part, &e))?;
        have = 0;
    }
    let mut resumed = 0u32;
    let mut failures = 0u32;
    let mut digest = expected.clone();
    p.phase = "downloading";
    loop {
        let mut seen = Seen::default();
        let attempt = get(&agent, policy, &url, have, meta.etag.as_deref(), &mut seen);
        let mut resp = match attempt {
            Ok(r) => r,
            Err(e) => {
                failures += 1;
                if failures > RETRIES {
                    return Err(StoreError::failed(e));
                }
                std::thread::sleep(Duration::from_millis(250 * failures as u64));
                continue;
            }
        };
        let status = resp.status().as_u16();
        match status {
            200 => {
                if have > 0 {
                    file.set_len(0).map_err(|e| write_error(&part, &e))?;
                    have = 0;
                }
            }
            206 => {
                let range = header(&resp, "content-range").unwrap_or_default();
                let start: Option<u64> = range
                    .strip_prefix("bytes ")
                    .and_then(|r| r.split('-').next())
                    .and_then(|s| s.trim().parse().ok());
                if start != Some(have) {
                    return Err(StoreError::failed(format!(
                        "{shown}: asked for bytes from {have}, got range {range:?}"
                    )));
                }
                resumed += 1;
            }
            416 if have > 0 && have == meta.total => break,
            404 => {
                return Err(StoreError::invalid(format!("{shown}: not found (404)")));
            }
            401 | 403 => {
                return Err(StoreError::invalid(format!(
                    "{shown}: access denied (HTTP {status})"
                )));
            }
            s if (400..500).contains(&s) => {
                return Err(StoreError::invalid(format!("{shown}: HTTP {s}")));
            }
            s => {
                failures += 1;
                if failures > RETRIES {
                    return Err(StoreError::failed(format!("{shown}: HTTP {s}")));
                }
                std::thread::sleep(Duration::from_millis(250 * failures as u64));
                continue;
            }
        }
        let length: Option<u64> = header(&resp, "content-length").and_then(|v| v.parse().ok());
        meta.total = seen.linked_size.or(length.map(|l| l + have)).unwrap_or(0);
        meta.etag = seen.etag.clone().or(meta.etag.take());
        if digest.is_none() {
            digest = seen
                .linked_sha
                .clone()
                .or_else(|| seen.etag.as_deref().and_then(sha_of_etag));
        }
        meta.expected.clone_from(&digest);
        let _ = std::fs::write(&meta_path, serde_json::to_string(&meta).unwrap_or_default());
        p.total = meta.total;
        p.done = have;
        p.digest.clone_from(&digest);
        if !progress(&p) {
            return Err(StoreError::failed("cancelled"));
        }
        let mut reader = resp.body_mut().as_reader();
        let mut buf = vec![0u8; 256 << 10];
        let mut cut = false;
        let at_start = have;
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    file.write_all(&buf[..n])
                        .map_err(|e| write_error(&part, &e))?;
                    have += n as u64;
                    p.done = have;
                    if !progress(&p) {
                        return Err(StoreError::failed("cancelled"));
                    }
                }
                Err(_) => {
                    cut = true;
                    break;
                }
            }
        }
        if !cut && (meta.total == 0 || have >= meta.total) {
            break;
        }
        // The connection dropped before the end: resume from what arrived. Only transfers that
        // got somewhere (a MiB) reset the count, so a server that always stops early fails.
        if have - at_start >= 1 << 20 {
            failures = 0;
        }
        failures += 1;
        if failures > RETRIES {
            return Err(StoreError::failed(format!(
                "{shown}: the transfer kept stopping early ({have} of {} bytes)",
                meta.total
            )));
        }
        std::thread::sleep(Duration::from_millis(100 * failures as u64));
    }
    file.flush().map_err(|e| write_error(&part, &e))?;
    file.sync_all().map_err(|e| write_error(&part, &e))?;
    drop(file);
    if meta.total > 0 && have != meta.total {
        return Err(StoreError::failed(format!(
            "{shown}: received {have} bytes, expected {}",
            meta.total
        )));
    }
    p.phase = "verifying";
    p.done = 0;
    p.total = have;
    let got = file_sha256(&part, &mut |d| {
        p.done = d;
        progress(&p)
    })?;
    if let Some(want) = &digest {
        if &got != want {
            return Err(StoreError::failed(format!(
                "sha256 mismatch for {shown}: expected {want}, got {got}"
            )));
        }
    }
    check_gguf(&part, &format!("the download from {shown}"))?;
    finish(&part, &dest)?;
    guard.paths = None;
    let _ = std::fs::remove_file(&meta_path);
    let name = store.register(&name, &dest)?;
    Ok(Pulled {
        name,
        path: dest,
        bytes: have,
        sha256: got,
        verified: digest.is_some(),
        resumed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_and_locations() {
        let h = "a".repeat(64);
        assert_eq!(sha_of_etag(&format!("\"{h}\"")), Some(h.clone()));
        assert_eq!(sha_of_etag(&format!("W/\"{}\"", h.to_uppercase())), Some(h));
        assert_eq!(sha_of_etag("\"abc-12\""), None);
        assert_eq!(join_location("http://h:1/a/b/c", "/x/y"), "http://h:1/x/y");
        assert_eq!(join_location("http://h:1/a/b/c", "d"), "http://h:1/a/b/d");
        assert_eq!(join_location("http://h/a", "https://o/z"), "https://o/z");
    }
}
