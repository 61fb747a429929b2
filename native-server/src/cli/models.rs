//! The model-store commands that need no transfer: `weft list`, `rm`, `cp`, `show`, `ps`.
//! They work on the store's files and names file directly, or through a running server
//! (`remote.rs` says when).

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use clap::Args;

use super::remote::{self, Remote};
use crate::registry::{names, Overrides};
use crate::store::Store;

/// Where the store is, and whether to go through a running server.
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// The models folder, worked on directly (default: $WEFT_HOME/models, WEFT_HOME
    /// defaulting to ~/.weft).
    #[arg(long, conflicts_with = "host")]
    pub models_dir: Option<PathBuf>,
    /// A running server to work through (default: $WEFT_HOST; else http://127.0.0.1:8080
    /// when a server answers there). $WEFT_API_KEY is its key.
    #[arg(long)]
    pub host: Option<String>,
    /// Work on the store's files even when a server runs.
    #[arg(long, conflicts_with = "host")]
    pub local: bool,
}

impl StoreArgs {
    pub fn open(&self) -> Result<Store> {
        Store::open(self.models_dir.as_deref()).map_err(|e| anyhow!(e.to_string()))
    }

    /// The server to work through, or None for the store's files (see `remote.rs`).
    pub fn remote(&self) -> Result<Option<Remote>> {
        remote::find(
            self.host.as_deref(),
            self.local || self.models_dir.is_some(),
        )
    }
}

#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct RmArgs {
    /// The model names to remove.
    #[arg(required = true)]
    names: Vec<String>,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct CpArgs {
    source: String,
    destination: String,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    name: String,
    /// Print the Modelfile only.
    #[arg(long)]
    modelfile: bool,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct PsArgs {
    /// The server to ask (default: $WEFT_HOST or http://127.0.0.1:8080).
    #[arg(long)]
    host: Option<String>,
}

/// `2026-12-01 10:00` (UTC).
fn date(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    weft_core::chat::strftime("%Y-%m-%d %H:%M", secs).unwrap_or_default()
}

fn size(n: u64) -> String {
    indicatif::HumanBytes(n).to_string()
}

pub fn list(a: ListArgs) -> Result<()> {
    if let Some(r) = a.store.remote()? {
        return remote::list(&r);
    }
    let store = a.store.open()?;
    let c = store.catalog().map_err(|e| anyhow!(e.to_string()))?;
    println!(
        "{:<40} {:<18} {:>10}  {:<8} MODIFIED",
        "NAME", "ID", "SIZE", "QUANT"
    );
    for n in c.names() {
        match c.resolve(&n) {
            Ok(r) => {
                let f = &r.facts;
                let when = date(f.modified);
                println!(
                    "{:<40} {:<18} {:>10}  {:<8} {}",
                    names::tagged(&n),
                    &f.digest()[..12],
                    size(f.file_size),
                    f.quantization,
                    when
                );
            }
            Err(e) => println!("{:<40} (broken: {})", names::tagged(&n), e),
        }
    }
    Ok(())
}

pub fn rm(a: RmArgs) -> Result<()> {
    if let Some(r) = a.store.remote()? {
        return remote::rm(&r, &a.names);
    }
    let store = a.store.open()?;
    let mut c = store.catalog().map_err(|e| anyhow!(e.to_string()))?;
    for n in &a.names {
        let (name, file) = c.delete(n).map_err(|e| anyhow!(e.to_string()))?;
        if let Some(p) = file {
            std::fs::remove_file(&p).map_err(|e| anyhow!("cannot delete {}: {e}", p.display()))?;
        }
        println!("deleted '{}'", names::tagged(&name));
    }
    Ok(())
}

pub fn cp(a: CpArgs) -> Result<()> {
    if let Some(r) = a.store.remote()? {
        return remote::cp(&r, &a.source, &a.destination);
    }
    let store = a.store.open()?;
    let mut c = store.catalog().map_err(|e| anyhow!(e.to_string()))?;
    let made = c
        .create(&a.destination, &a.source, Overrides::default())
        .map_err(|e| anyhow!(e.to_string()))?;
    println!("copied '{}' to '{}'", a.source, names::tagged(&made));
    Ok(())
}

pub fn show(a: ShowArgs) -> Result<()> {
    if let Some(r) = a.store.remote()? {
        return remote::show(&r, &a.name, a.modelfile);
    }
    let store = a.store.open()?;
    let c = store.catalog().map_err(|e| anyhow!(e.to_string()))?;
    let r = c.resolve(&a.name).map_err(|e| anyhow!(e.to_string()))?;
    if a.modelfile {
        println!("FROM {}", r.facts.path.display());
        if let Some(t) = &r.overrides.template {
            println!("TEMPLATE \"\"\"{t}\"\"\"");
        }
        if let Some(s) = &r.overrides.system {
            println!("SYSTEM \"\"\"{s}\"\"\"");
        }
        for (k, v) in &r.overrides.parameters {
            println!("PARAMETER {k} {v}");
        }
        return Ok(());
    }
    let f = &r.facts;
    println!("  Model");
    println!("    {:<20} {}", "architecture", f.architecture);
    println!("    {:<20} {}", "parameters", f.parameter_size());
    println!("    {:<20} {}", "context length", f.context_length);
    println!("    {:<20} {}", "embedding length", f.embedding_length);
    println!("    {:<20} {}", "quantization", f.quantization);
    println!("    {:<20} {}", "file", f.path.display());
    println!("    {:<20} {}", "size", size(f.file_size));
    if let Some(s) = &r.overrides.system {
        println!("\n  System\n    {s}");
    }
    if !r.overrides.parameters.is_empty() {
        println!("\n  Parameters");
        for (k, v) in &r.overrides.parameters {
            println!("    {k:<20} {v}");
        }
    }
    Ok(())
}

/// The server `ps` and the other commands talk to when one runs.
pub fn server_base(host: Option<&str>) -> String {
    let h = host
        .map(str::to_string)
        .or_else(|| std::env::var("WEFT_HOST").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "http://127.0.0.1:8080".into());
    let h = if h.starts_with("http://") || h.starts_with("https://") {
        h
    } else {
        format!("http://{h}")
    };
    h.trim_end_matches('/').to_string()
}

pub fn ps(a: PsArgs) -> Result<()> {
    let base = server_base(a.host.as_deref());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(std::time::Duration::from_secs(10)))
        .build()
        .into();
    let v: serde_json::Value = match agent.get(format!("{base}/api/ps")).call() {
        Ok(mut r) => serde_json::from_str(&r.body_mut().read_to_string()?)?,
        Err(ureq::Error::Io(_)) | Err(ureq::Error::ConnectionFailed) => {
            bail!("no server is running at {base} (models are loaded only by `weft serve`)")
        }
        Err(e) => bail!("{base}/api/ps: {e}"),
    };
    println!("{:<40} {:>10}  UNTIL", "NAME", "SIZE");
    for m in v["models"].as_array().into_iter().flatten() {
        println!(
            "{:<40} {:>10}  {}",
            m["name"].as_str().unwrap_or(""),
            size(m["size"].as_u64().unwrap_or(0)),
            m["expires_at"].as_str().unwrap_or("")
        );
    }
    Ok(())
}
