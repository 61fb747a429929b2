//! The store commands that move or make model bytes: `weft pull`, `weft import` and
//! `weft quantize` and `weft convert`, with a progress bar on a terminal (plain lines otherwise);
//! through a running server's jobs when one runs (`remote.rs`).

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;

use serde_json::{json, Value};

use super::models::StoreArgs;
use super::progress::Reporter;
use super::remote;
use crate::store::{
    self, ConvertRequest, ImportRequest, PullRequest, QuantizeRequest, DEFAULT_HF_ENDPOINT,
};

#[derive(Args, Debug)]
pub struct PullArgs {
    /// An http(s) URL of a .gguf file, or hf.co/OWNER/REPO:FILE_OR_QUANT.
    reference: String,
    /// The expected sha256 of the file (default: the one the server publishes, if any).
    #[arg(long)]
    sha256: Option<String>,
    /// The name to store it under (default: the file name without .gguf).
    #[arg(long)]
    name: Option<String>,
    /// Base URL hf.co/... references resolve against.
    #[arg(long, env = "WEFT_HF_ENDPOINT", default_value = DEFAULT_HF_ENDPOINT)]
    hf_endpoint: String,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A .gguf file to bring into the store (hard-linked when on the same file system), or a
    /// Hugging Face folder (converted to F16; `weft convert` chooses the type).
    path: PathBuf,
    /// The name to store it under (default: the file name without .gguf).
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct QuantizeArgs {
    /// The source: a model name in the store or a .gguf path.
    input: String,
    /// The result: a model name in the store or a .gguf path.
    output: String,
    /// F32, F16, BF16, Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q5_1, Q5_0, Q4_K_M, Q4_K_S, Q4_1, Q4_0
    /// (case-insensitive; Q4_K and Q5_K mean the _M mixes, as in llama-quantize).
    r#type: String,
    /// Convert tensors that are already quantized (loses accuracy twice).
    #[arg(long)]
    allow_requantize: bool,
    /// Give every quantizable tensor the named type, without the mixes' upgrades.
    #[arg(long)]
    pure: bool,
    /// Worker threads (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// A Hugging Face folder of a llama (SmolLM), qwen2 or gemma3 model: config.json,
    /// *.safetensors (or shards with model.safetensors.index.json), tokenizer files. A
    /// vision-language folder (Idefics3 / SmolVLM, Qwen2.5-VL, Gemma 3) also gives its
    /// projector, mmproj-<output stem>.gguf beside the model (F16; F32 or BF16 with those
    /// types), as llama.cpp's convert_hf_to_gguf.py --mmproj writes it. A diffusers Wan
    /// pipeline folder (model_index.json: WanPipeline, WanImageToVideoPipeline) gives its DiT
    /// (city96 GGUF layout; two files for a two-expert model), UMT5 encoder (GGUF) and VAE
    /// (safetensors, Wan's names) in the folder -o names; tensors keep their stored type
    /// unless --type says otherwise.
    dir: PathBuf,
    /// The result: a .gguf path, or a model name in the store (default: the folder name, in
    /// the store).
    #[arg(short, long)]
    output: Option<String>,
    /// F16 (default, as llama.cpp's converter), F32, BF16, or any quantize type (Q8_0, Q4_K_M
    /// ...), made in one go.
    #[arg(long = "type", short = 't')]
    r#type: Option<String>,
    /// Worker threads for quantized types (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    store: StoreArgs,
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn looks_like_path(s: &str) -> bool {
    s.contains('/') || s.ends_with(".gguf")
}

pub fn pull(a: PullArgs) -> Result<()> {
    if let Some(r) = a.store.remote()? {
        let body = json!({"model": a.reference, "name": a.name, "sha256": a.sha256});
        let got = r.job("/api/v1/models/pull", &body)?;
        let check = if got["verified"] == true {
            "verified"
        } else {
            "not verified: no sha256 known"
        };
        println!(
            "pulled '{}' ({}, sha256 {} {check})",
            got["name"].as_str().unwrap_or(""),
            indicatif::HumanBytes(u(&got["bytes"])),
            got["sha256"].as_str().unwrap_or("")
        );
        return Ok(());
    }
    // The user at the terminal chose the URL: no one else's pull to fence in.
    let store = a
        .store
        .open()?
        .with_hf_endpoint(&a.hf_endpoint)
        .with_pull_policy(crate::store::PullPolicy::trusting());
    let req = PullRequest {
        reference: a.reference.clone(),
        name: a.name.clone(),
        sha256: a.sha256.clone(),
    };
    let mut rep = Reporter::new(true);
    let r = store::pull(&store, &req, &mut |p| {
        rep.update(p.phase, p.done, p.total);
        true
    });
    rep.finish();
    let got = r.map_err(|e| anyhow!(e.message))?;
    let check = if got.verified {
        "verified"
    } else {
        "not verified: no sha256 known"
    };
    println!(
        "pulled '{}' ({}, sha256 {} {check})",
        got.name,
        indicatif::HumanBytes(got.bytes),
        got.sha256
    );
    Ok(())
}

pub fn import(a: ImportArgs) -> Result<()> {
    if let Some(r) = a.store.remote()? {
        let body = json!({"path": remote::absolute(&a.path)?, "name": a.name});
        let got = r.job("/api/v1/models/import", &body)?;
        println!(
            "imported '{}' ({}, {})",
            got["name"].as_str().unwrap_or(""),
            got["path"].as_str().unwrap_or(""),
            got["how"].as_str().unwrap_or("")
        );
        return Ok(());
    }
    let store = a.store.open()?;
    let req = ImportRequest {
        path: a.path.clone(),
        name: a.name.clone(),
    };
    let mut rep = Reporter::new(true);
    let r = store::import(&store, &req, None, &mut |phase, d, t| {
        rep.update(phase, d, t);
        true
    });
    rep.finish();
    let got = r.map_err(|e| anyhow!(e.message))?;
    println!(
        "imported '{}' ({}, {})",
        got.name,
        got.path.display(),
        got.how
    );
    Ok(())
}

pub fn quantize(a: QuantizeArgs) -> Result<()> {
    // Files named by path are this user's: only names of the store go through a server.
    let names_only = !looks_like_path(&a.input) && !looks_like_path(&a.output);
    if let Some(r) = names_only.then(|| a.store.remote()).transpose()?.flatten() {
        let body = json!({"model": a.input, "name": a.output, "type": a.r#type,
                          "allow_requantize": a.allow_requantize, "pure": a.pure,
                          "threads": a.threads});
        let got = r.job("/api/v1/models/quantize", &body)?;
        println!(
            "quantized to {} '{}' ({} -> {}, {:.2} s)",
            got["type"].as_str().unwrap_or(""),
            got["name"].as_str().unwrap_or(""),
            indicatif::HumanBytes(u(&got["bytes_in"])),
            indicatif::HumanBytes(u(&got["bytes_out"])),
            got["seconds"].as_f64().unwrap_or(0.0)
        );
        return Ok(());
    }
    let store = a.store.open()?;
    let req = QuantizeRequest {
        source: a.input.clone(),
        target: Some(a.output.clone()),
        r#type: a.r#type.clone(),
        allow_requantize: a.allow_requantize,
        pure: a.pure,
        threads: a.threads,
    };
    let mut rep = Reporter::new(true);
    let r = store::quantize_in_store(&store, &req, true, &mut |p| {
        rep.update("quantizing", p.bytes_done, p.bytes_total);
        true
    });
    rep.finish();
    let got = r.map_err(|e| anyhow!(e.message))?;
    let mb = got.bytes_in as f64 / 1e6;
    println!(
        "quantized to {} {} ({} -> {}, {:.2} s, {:.0} MB/s)",
        got.r#type,
        got.name.as_deref().map_or_else(
            || got.path.display().to_string(),
            |n| format!("'{n}' ({})", got.path.display())
        ),
        indicatif::HumanBytes(got.bytes_in),
        indicatif::HumanBytes(got.bytes_out),
        got.seconds,
        mb / got.seconds.max(1e-9)
    );
    Ok(())
}

pub fn convert(a: ConvertArgs) -> Result<()> {
    if super::convert_video::is_wan_pipeline(&a.dir) {
        return super::convert_video::convert(&a.dir, a.output.as_deref(), a.r#type.as_deref());
    }
    let to_store = !a.output.as_deref().is_some_and(looks_like_path);
    if let Some(r) = to_store.then(|| a.store.remote()).transpose()?.flatten() {
        let body = json!({"path": remote::absolute(&a.dir)?, "name": a.output,
                          "type": a.r#type, "threads": a.threads});
        let got = r.job("/api/v1/models/convert", &body)?;
        println!(
            "converted {} to {} '{}' ({}, {:.2} s)",
            a.dir.display(),
            got["type"].as_str().unwrap_or(""),
            got["name"].as_str().unwrap_or(""),
            indicatif::HumanBytes(u(&got["bytes"])),
            got["seconds"].as_f64().unwrap_or(0.0)
        );
        return Ok(());
    }
    let store = a.store.open()?;
    let req = ConvertRequest {
        path: a.dir.clone(),
        target: a.output.clone(),
        r#type: a.r#type.clone(),
        threads: a.threads,
    };
    let mut rep = Reporter::new(true);
    let r = store::convert_in_store(&store, &req, true, &mut |p| {
        rep.update(p.phase, p.done, p.total);
        true
    });
    rep.finish();
    let got = r.map_err(|e| anyhow!(e.message))?;
    println!(
        "converted {} to {} {} ({}, {:.2} s)",
        a.dir.display(),
        got.r#type,
        got.name.as_deref().map_or_else(
            || got.path.display().to_string(),
            |n| format!("'{n}' ({})", got.path.display())
        ),
        indicatif::HumanBytes(got.bytes),
        got.seconds
    );
    if let Some(m) = &got.mmproj {
        println!("vision projector: {}", m.display());
    }
    Ok(())
}
