use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::{json, Value as J};
use weft_core::gguf::{Gguf, ModelFile, Value};

#[derive(Args)]
pub struct InfoArgs {
    /// Path to a .gguf file or a Hugging Face model folder.
    model: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Hyper-parameter keys shown first (suffixes of `<arch>.`).
const HPARAMS: &[&str] = &[
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "attention.sliding_window",
    "rope.freq_base",
    "rope.dimension_count",
    "vocab_size",
];

pub fn run(a: InfoArgs) -> Result<()> {
    if a.model.is_dir() {
        return run_folder(&a);
    }
    let file = ModelFile::open(&a.model).with_context(|| format!("{}", a.model.display()))?;
    let g = &file.gguf;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&to_json(g))?);
    } else {
        print_text(g);
    }
    Ok(())
}

/// A Hugging Face folder: its tensors and configs as the GGUF header it loads under
/// (llama.cpp's names and keys), plus how it embeds.
fn run_folder(a: &InfoArgs) -> Result<()> {
    if !weft_core::hf::is_model_folder(&a.model) {
        anyhow::bail!("{}: a model folder needs a config.json", a.model.display());
    }
    let hf = weft_core::hf::HfModel::open(&a.model)?;
    let g = &hf.file.gguf;
    let embedding = json!({
        "pooling": match hf.sentence.pooling {
            weft_core::backend::PoolMode::Mean => "mean",
            weft_core::backend::PoolMode::First => "cls",
            weft_core::backend::PoolMode::Last => "last",
        },
        "normalize": hf.sentence.normalize,
        "max_tokens": hf.max_tokens(),
        "dim": hf.config.hidden_size,
    });
    if a.json {
        let mut j = to_json(g);
        j["format"] = json!("huggingface");
        j["embedding"] = embedding;
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        println!("format:        Hugging Face folder {}", hf.dir.display());
        println!("embedding:     {embedding}");
        print_text(g);
    }
    Ok(())
}

fn hparams(g: &Gguf) -> serde_json::Map<String, J> {
    HPARAMS
        .iter()
        .filter_map(|k| Some((k.to_string(), g.arch_key(k)?.to_json())))
        .collect()
}

fn tokenizer_summary(g: &Gguf) -> J {
    json!({
        "model": g.get_str("tokenizer.ggml.model"),
        "pre": g.get_str("tokenizer.ggml.pre"),
        "vocab_size": g.get_array("tokenizer.ggml.tokens").map(|a| a.len()),
        "merges": g.get_array("tokenizer.ggml.merges").map(|a| a.len()),
        "bos_token_id": g.get_u64("tokenizer.ggml.bos_token_id"),
        "eos_token_id": g.get_u64("tokenizer.ggml.eos_token_id"),
        "add_bos_token": g.get_bool("tokenizer.ggml.add_bos_token"),
        "chat_template": g.get_str("tokenizer.chat_template").is_some(),
    })
}

/// Metadata with large arrays summarised, so the output stays readable.
fn metadata_json(g: &Gguf) -> serde_json::Map<String, J> {
    g.metadata
        .iter()
        .map(|(k, v)| {
            let j = match v {
                Value::Array(a) if a.len() > 16 => {
                    json!({"type": "array", "element_type": a.first().map(Value::type_name), "len": a.len()})
                }
                other => other.to_json(),
            };
            (k.clone(), j)
        })
        .collect()
}

/// The stable JSON shape documented in the README.
pub fn to_json(g: &Gguf) -> J {
    let tensors: Vec<J> = g
        .tensors
        .iter()
        .map(|t| json!({"name": t.name, "type": t.ty.name(), "dims": t.dims, "bytes": t.n_bytes, "offset": g.data_offset + t.offset}))
        .collect();
    let total: u64 = g.tensors.iter().map(|t| t.n_elements).sum();
    json!({
        "gguf_version": g.version,
        "architecture": g.architecture(),
        "name": g.get_str("general.name"),
        "file_bytes": g.file_len,
        "parameters": total,
        "hparams": hparams(g),
        "tokenizer": tokenizer_summary(g),
        "metadata": metadata_json(g),
        "tensors": tensors,
    })
}

fn print_text(g: &Gguf) {
    let total: u64 = g.tensors.iter().map(|t| t.n_elements).sum();
    println!(
        "file:          GGUF v{}, {} bytes, {} tensors, {} metadata keys",
        g.version,
        g.file_len,
        g.tensors.len(),
        g.metadata.len()
    );
    println!(
        "name:          {}",
        g.get_str("general.name").unwrap_or("?")
    );
    println!("architecture:  {}", g.architecture().unwrap_or("?"));
    println!("parameters:    {:.1} M", total as f64 / 1e6);
    for (k, v) in hparams(g) {
        println!("  {k:<34} {v}");
    }
    let t = tokenizer_summary(g);
    println!("tokenizer:     {}", t);
    println!("metadata:");
    for (k, v) in &g.metadata {
        if !k.starts_with("tokenizer.") || !matches!(v, Value::Array(_) | Value::String(_)) {
            println!("  {k:<42} {v}");
        } else {
            let shown = match v {
                Value::String(s) => format!("<string, {} bytes>", s.len()),
                other => other.to_string(),
            };
            println!("  {k:<42} {shown}");
        }
    }
    println!("tensors:");
    println!(
        "  {:<40} {:<8} {:<24} {:>12}",
        "name", "type", "dims", "bytes"
    );
    for t in &g.tensors {
        println!(
            "  {:<40} {:<8} {:<24} {:>12}",
            t.name,
            t.ty.name(),
            format!("{:?}", t.dims),
            t.n_bytes
        );
    }
}
