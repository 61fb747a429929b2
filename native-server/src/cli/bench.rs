//! `weft bench`: prompt-processing and generation speed, measured like `llama-bench`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::backend_args::BackendArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;
use weft_core::engine::{Engine, EngineConfig, Row};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::loaded::LoadedModel;

#[derive(Args)]
pub struct BenchArgs {
    /// Path to a .gguf file.
    #[arg(long)]
    model: PathBuf,
    #[command(flatten)]
    backend: BackendArgs,
    /// Prompt tokens processed in one batch (0 skips the prompt test).
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    n_prompt: usize,
    /// Tokens generated one at a time (0 skips the generation test).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    n_gen: usize,
    /// Sequences generating together: each generation step is one batch of this many rows, one
    /// per sequence (each sequence has its own prompt of `-p` tokens), so `tg` is the
    /// aggregate rate of a server decoding this many streams at once.
    #[arg(short = 'b', long = "batch", default_value_t = 1)]
    batch: usize,
    /// Repetitions (median, min and max are reported).
    #[arg(short = 'r', long = "reps", default_value_t = 5)]
    reps: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Median, min and max of a list of rates.
fn summary(xs: &[f64]) -> serde_json::Value {
    if xs.is_empty() {
        return serde_json::Value::Null;
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let median = if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    };
    json!({"median": median, "min": s[0], "max": s[s.len() - 1]})
}

/// Peak resident set size of this process, from /proc (None where there is no /proc).
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

pub fn run(a: BenchArgs) -> Result<()> {
    if a.reps == 0 {
        bail!("-r must be at least 1");
    }
    if a.n_prompt == 0 && a.n_gen == 0 {
        bail!("nothing to measure: -p and -n are both 0");
    }
    if a.batch == 0 {
        bail!("-b must be at least 1");
    }
    a.backend.check()?;
    let threads = a.backend.threads();
    let file = Arc::new(ModelFile::open(&a.model).with_context(|| a.model.display().to_string())?);
    let backend = a.backend.create()?;
    let cfg = EngineConfig {
        kv: KvCacheConfig {
            n_ctx: a.n_prompt + a.n_gen + 1,
            n_seq: a.batch,
            ..Default::default()
        },
        max_batch: a.n_prompt.max(a.batch),
    };
    let mut model =
        LoadedModel::from_file(file, backend, cfg, &mut |_, _| {}).context("loading the model")?;
    let engine = &mut model.engine;
    let vocab = engine.model_info().n_vocab as u64;
    // Token ids spread over the vocabulary, as llama-bench's random prompt; fixed for repeatability.
    let token = |i: usize| ((i as u64 * 7919 + 13) % vocab) as u32;
    let prompt: Vec<u32> = (0..a.n_prompt).map(token).collect();

    let once = |engine: &mut Engine| -> Result<(Option<f64>, Option<f64>)> {
        let seqs = (0..a.batch)
            .map(|_| engine.new_sequence())
            .collect::<Result<Vec<_>, _>>()?;
        let mut pp = None;
        let t = Instant::now();
        for &seq in &seqs {
            if a.n_prompt > 0 {
                engine.prefill(seq, &prompt)?;
            } else {
                engine.prefill(seq, &[token(0)])?;
            }
        }
        if a.n_prompt > 0 {
            pp = Some((a.n_prompt * a.batch) as f64 / t.elapsed().as_secs_f64());
        }
        let mut tg = None;
        if a.n_gen > 0 {
            let t = Instant::now();
            for i in 0..a.n_gen {
                let rows: Vec<Row> = seqs
                    .iter()
                    .map(|&seq| Row {
                        seq,
                        token: token(a.n_prompt + i + 1 + seq as usize),
                        logits: true,
                    })
                    .collect();
                engine.step(&rows)?;
            }
            tg = Some((a.n_gen * a.batch) as f64 / t.elapsed().as_secs_f64());
        }
        for seq in seqs {
            engine.free_sequence(seq)?;
        }
        Ok((pp, tg))
    };
    once(engine)?; // warm-up: page in the weights, as llama-bench does
    let (mut pps, mut tgs) = (Vec::new(), Vec::new());
    for _ in 0..a.reps {
        let (pp, tg) = once(engine)?;
        pps.extend(pp);
        tgs.extend(tg);
    }
    let out = json!({
        "engine": "weft",
        "version": env!("CARGO_PKG_VERSION"),
        "model": a.model.display().to_string(),
        "backend": a.backend.backend,
        "threads": threads,
        "n_prompt": a.n_prompt,
        "n_gen": a.n_gen,
        "batch": a.batch,
        "reps": a.reps,
        "prompt_tokens_per_s": summary(&pps),
        "gen_tokens_per_s": summary(&tgs),
        "peak_rss_bytes": peak_rss_bytes(),
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "model: {}  backend: {}  threads: {threads}  batch: {}",
            a.model.display(),
            a.backend.backend,
            a.batch
        );
        for (name, key, n) in [
            ("pp", "prompt_tokens_per_s", a.n_prompt),
            ("tg", "gen_tokens_per_s", a.n_gen),
        ] {
            let s = &out[key];
            if !s.is_null() {
                println!(
                    "{name}{n:<6} {:>10.2} t/s  (min {:.2}, max {:.2}, {} reps)",
                    s["median"].as_f64().unwrap_or(0.0),
                    s["min"].as_f64().unwrap_or(0.0),
                    s["max"].as_f64().unwrap_or(0.0),
                    a.reps
                );
            }
        }
        if let Some(rss) = peak_rss_bytes() {
            println!("peak RSS: {:.1} MB", rss as f64 / 1e6);
        }
    }
    Ok(())
}
