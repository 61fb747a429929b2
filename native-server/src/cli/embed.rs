//! `weft embed`: one vector per input text, from an embedding model (a BERT-family GGUF or a
//! Hugging Face folder) or any chat model GGUF.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;
use weft_core::backend::Backend;
use weft_core::embed::{EmbedInput, EmbedOptions, Embedder, Layout};
use weft_core::gguf::ModelFile;
use weft_core::hf::{is_model_folder, HfModel};

use super::backend_args::BackendArgs;

#[derive(Args)]
pub struct EmbedArgs {
    /// A .gguf file or a Hugging Face model folder (config.json, model.safetensors,
    /// tokenizer.json).
    #[arg(long)]
    model: PathBuf,
    /// Print `{"model", "dim", "embeddings": [[...]]}` instead of one line per vector.
    #[arg(long)]
    json: bool,
    /// Do not L2-normalise (the model's config decides by default).
    #[arg(long)]
    no_normalize: bool,
    /// Keep the first N components (then normalise again).
    #[arg(long)]
    dimensions: Option<usize>,
    /// Fail on inputs longer than the model takes instead of cutting them.
    #[arg(long)]
    no_truncate: bool,
    /// Also embed each line of this file (one text per line).
    #[arg(long)]
    input_file: Option<PathBuf>,
    /// Measure instead of printing vectors: one warm-up, then N timed runs of all the inputs
    /// as one batch; prints `{"batch", "reps", "embeddings_per_s": {"median", "min", "max"}}`.
    #[arg(long)]
    bench: Option<usize>,
    /// How a batch's sequences share a step: `packed` back to back (the default) or `padded`
    /// to the longest (for comparison; docs/benchmarks.md).
    #[arg(long, default_value = "packed")]
    layout: String,
    #[command(flatten)]
    backend: BackendArgs,
    /// The texts to embed (one vector each).
    texts: Vec<String>,
}

/// Opens an embedder for a .gguf file or a model folder on `backend`.
pub fn open_embedder(path: &Path, backend: Box<dyn Backend>) -> Result<Embedder> {
    let shown = path.display();
    if path.is_dir() {
        if !is_model_folder(path) {
            bail!("{shown}: a model folder needs a config.json");
        }
        let hf = HfModel::open(path)?;
        return Embedder::from_hf(hf, backend).with_context(|| format!("{shown}"));
    }
    let file = ModelFile::open(path).with_context(|| format!("{shown}"))?;
    Embedder::from_gguf(Arc::new(file), backend).with_context(|| format!("{shown}"))
}

pub fn run(mut a: EmbedArgs) -> Result<()> {
    if let Some(f) = &a.input_file {
        let text = std::fs::read_to_string(f).with_context(|| format!("{}", f.display()))?;
        a.texts.extend(text.lines().map(str::to_string));
    }
    if a.texts.is_empty() {
        bail!("no input: give at least one text to embed");
    }
    let layout = match a.layout.as_str() {
        "packed" => Layout::Packed,
        "padded" => Layout::Padded,
        other => bail!("unknown --layout {other:?} (packed or padded)"),
    };
    let mut e = open_embedder(&a.model, a.backend.create()?)?;
    e.set_layout(layout, None);
    let opts = EmbedOptions {
        normalize: a.no_normalize.then_some(false),
        dimensions: a.dimensions,
        truncate: !a.no_truncate,
    };
    let inputs: Vec<EmbedInput> = a.texts.into_iter().map(EmbedInput::Text).collect();
    if let Some(reps) = a.bench {
        return bench(&mut e, &inputs, &opts, reps.max(1));
    }
    let out = e.embed(&inputs, &opts)?;
    if a.json {
        let name = a
            .model
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dim = out.vectors.first().map_or(0, Vec::len);
        println!(
            "{}",
            json!({"model": name, "dim": dim, "embeddings": out.vectors})
        );
    } else {
        for v in &out.vectors {
            let line: Vec<String> = v.iter().map(|x| format!("{x}")).collect();
            println!("{}", line.join(" "));
        }
    }
    Ok(())
}

/// Embeddings per second over `reps` timed runs (after one warm-up).
fn bench(e: &mut Embedder, inputs: &[EmbedInput], opts: &EmbedOptions, reps: usize) -> Result<()> {
    e.embed(inputs, opts)?;
    let mut rates = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = std::time::Instant::now();
        e.embed(inputs, opts)?;
        rates.push(inputs.len() as f64 / t.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "{}",
        json!({"batch": inputs.len(), "reps": reps, "embeddings_per_s":
            {"median": median, "min": rates[0], "max": rates[rates.len() - 1]}})
    );
    Ok(())
}
