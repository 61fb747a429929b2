//! The store commands through a running server: when `weft serve` answers, `weft list`, `rm`,
//! `cp`, `show`, `pull`, `import`, `quantize` and `convert` ask it rather than touching the
//! store's files behind its back (its registry would not see the change, and two writers
//! would race on the names file). Long work runs as the server's jobs, and the command
//! follows the job with the same progress bar (or lines) as when it works directly.
//!
//! Which server: `--host`, else `$WEFT_HOST`; a server named either way must answer. With
//! neither, `http://127.0.0.1:8080` (what `weft serve` listens on by default) is tried for a
//! moment, and the store is used directly when nothing answers there. `--local` or
//! `--models-dir` always work on the files. `$WEFT_API_KEY` is sent as the bearer key.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};

use super::models::server_base;
use super::progress::Reporter;

/// How long a server named by nobody gets to answer the probe.
const PROBE: Duration = Duration::from_millis(500);
/// How often a job is asked how far it is.
const POLL: Duration = Duration::from_millis(200);

/// A server that answered.
pub struct Remote {
    pub base: String,
    agent: ureq::Agent,
    key: Option<String>,
}

/// The server to work through, or None to work on the store directly (see the module
/// comment). `host`: `--host`.
pub fn find(host: Option<&str>, local: bool) -> Result<Option<Remote>> {
    if local {
        return Ok(None);
    }
    let named = host.is_some() || std::env::var("WEFT_HOST").is_ok_and(|h| !h.is_empty());
    let base = server_base(host);
    let probe: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(if named { Duration::from_secs(5) } else { PROBE }))
        .http_status_as_error(false)
        .build()
        .into();
    match probe.get(format!("{base}/health")).call() {
        Ok(r) if r.status().is_success() => {}
        Ok(r) if named => bail!(
            "the server at {base} answered /health with {}; pass --local to work on the store directly",
            r.status()
        ),
        Err(e) if named => bail!(
            "no server answers at {base} ({e}); start it, fix --host / WEFT_HOST, or pass --local to work on the store directly"
        ),
        _ => return Ok(None),
    }
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    let key = std::env::var("WEFT_API_KEY").ok().filter(|k| !k.is_empty());
    Ok(Some(Remote { base, agent, key }))
}

impl Remote {
    /// Sends a request; the JSON answer of a 2xx, else the server's message as the error.
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        let auth = self.key.as_ref().map(|k| format!("Bearer {k}"));
        let mut resp = match (method, body) {
            ("GET", _) => {
                let mut r = self.agent.get(&url);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.call()
            }
            ("DELETE", Some(b)) => {
                let mut r = self.agent.delete(&url).force_send_body();
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.content_type("application/json").send(b.to_string())
            }
            (_, b) => {
                let mut r = self.agent.post(&url);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.content_type("application/json")
                    .send(b.map_or_else(String::new, Value::to_string))
            }
        }
        .map_err(|e| anyhow!("{url}: {e}"))?;
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if !(200..300).contains(&status) {
            let msg = v["error"]
                .as_str()
                .or_else(|| v["error"]["message"].as_str())
                .map_or_else(|| text.trim().to_string(), str::to_string);
            let hint = match status {
                401 | 403 => " (set WEFT_API_KEY to an admin key, or pass --local)",
                _ => "",
            };
            bail!("{msg}{hint}");
        }
        Ok(v)
    }

    pub fn get(&self, path: &str) -> Result<Value> {
        self.call("GET", path, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<Value> {
        self.call("POST", path, Some(body))
    }

    pub fn delete(&self, path: &str, body: &Value) -> Result<Value> {
        self.call("DELETE", path, Some(body))
    }

    /// Starts a job with `POST path` and follows it to its end with a progress bar: the
    /// job's result, or its error.
    pub fn job(&self, path: &str, body: &Value) -> Result<Value> {
        let started = self.post(path, body)?;
        let id = started["job_id"]
            .as_str()
            .ok_or_else(|| anyhow!("{path}: the server's answer has no job_id: {started}"))?
            .to_string();
        eprintln!("through the server at {}: job {id}", self.base);
        let mut rep = Reporter::new(true);
        let job = loop {
            let j = self.get(&format!("/api/v1/models/jobs/{id}"))?;
            let p = &j["progress"];
            rep.update(
                j["phase"].as_str().unwrap_or(""),
                p["done"].as_u64().unwrap_or(0),
                p["total"].as_u64().unwrap_or(0),
            );
            if matches!(
                j["status"].as_str(),
                Some("succeeded" | "failed" | "cancelled")
            ) {
                break j;
            }
            std::thread::sleep(POLL);
        };
        rep.finish();
        match job["status"].as_str() {
            Some("succeeded") => Ok(job["result"].clone()),
            _ => bail!(
                "{}",
                job["error"]
                    .as_str()
                    .unwrap_or("the job failed without a message")
            ),
        }
    }
}

fn size(n: u64) -> String {
    indicatif::HumanBytes(n).to_string()
}

/// `weft list` through the server (its `/api/tags`).
pub fn list(r: &Remote) -> Result<()> {
    let tags = r.get("/api/tags")?;
    println!(
        "{:<40} {:<18} {:>10}  {:<8} MODIFIED",
        "NAME", "ID", "SIZE", "QUANT"
    );
    for m in tags["models"].as_array().into_iter().flatten() {
        let digest = m["digest"].as_str().unwrap_or("");
        let modified = m["modified_at"].as_str().unwrap_or("");
        println!(
            "{:<40} {:<18} {:>10}  {:<8} {}",
            m["name"].as_str().unwrap_or(""),
            digest.get(..12).unwrap_or(digest),
            size(m["size"].as_u64().unwrap_or(0)),
            m["details"]["quantization_level"].as_str().unwrap_or(""),
            modified.get(..16).unwrap_or(modified).replace('T', " ")
        );
    }
    Ok(())
}

pub fn rm(r: &Remote, names: &[String]) -> Result<()> {
    for n in names {
        r.delete("/api/delete", &json!({"model": n}))?;
        println!("deleted '{n}'");
    }
    Ok(())
}

pub fn cp(r: &Remote, source: &str, destination: &str) -> Result<()> {
    r.post(
        "/api/copy",
        &json!({"source": source, "destination": destination}),
    )?;
    println!("copied '{source}' to '{destination}'");
    Ok(())
}

pub fn show(r: &Remote, name: &str, modelfile: bool) -> Result<()> {
    let s = r.post("/api/show", &json!({"model": name}))?;
    if modelfile {
        print!("{}", s["modelfile"].as_str().unwrap_or(""));
        return Ok(());
    }
    let d = &s["details"];
    let info = &s["model_info"];
    let arch = info["general.architecture"].as_str().unwrap_or("");
    let facts = [
        ("architecture", json!(arch)),
        ("parameters", d["parameter_size"].clone()),
        (
            "context length",
            info[format!("{arch}.context_length")].clone(),
        ),
        (
            "embedding length",
            info[format!("{arch}.embedding_length")].clone(),
        ),
        ("quantization", d["quantization_level"].clone()),
    ];
    println!("  Model");
    for (k, v) in facts {
        let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
        println!("    {k:<20} {v}");
    }
    if let Some(sys) = s["system"].as_str() {
        println!("\n  System\n    {sys}");
    }
    if let Some(p) = s["parameters"].as_str().filter(|p| !p.is_empty()) {
        println!("\n  Parameters");
        for line in p.lines() {
            println!("    {line}");
        }
    }
    Ok(())
}

/// A path as the server must see it: absolute (the server's working folder is not ours).
pub fn absolute(p: &std::path::Path) -> Result<String> {
    let abs = std::path::absolute(p).map_err(|e| anyhow!("{}: {e}", p.display()))?;
    Ok(abs.display().to_string())
}
