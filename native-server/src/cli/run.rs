//! `weft run`: generate text from a prompt (or chat interactively) on the local machine.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use super::backend_args::BackendArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;
use weft_core::backend::KvDtype;
use weft_core::chat::{ChatTemplate, Message};
use weft_core::engine::{self, Chooser, Engine, EngineConfig, GenerateOptions, Generation};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::sampler::{eog_tokens, Sampler, SamplerConfig};
use weft_core::tokenizer::{StreamDecoder, Tokenizer};

#[derive(Args)]
pub struct RunArgs {
    /// Path to a .gguf model.
    #[arg(long)]
    model: PathBuf,
    /// The prompt (a user message, or raw text with --raw).
    #[arg(long, conflicts_with = "prompt_file")]
    prompt: Option<String>,
    /// Read the prompt from a file.
    #[arg(long)]
    prompt_file: Option<PathBuf>,
    /// A system message for the chat template.
    #[arg(long)]
    system: Option<String>,
    /// Feed the prompt as it is, without the chat template.
    #[arg(long)]
    raw: bool,
    /// Turn special-token text in the prompt (`<|im_start|>`) into special tokens, and show
    /// special tokens in the output.
    #[arg(long)]
    special: bool,
    /// Most tokens to generate per answer.
    #[arg(long, default_value_t = 512)]
    max_tokens: usize,
    /// Sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 0.8)]
    temperature: f32,
    /// Keep only the K most likely tokens (0 = off).
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    /// Keep the most likely tokens up to this probability mass (1 = off).
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    /// Random seed (default: a fresh one).
    #[arg(long)]
    seed: Option<u64>,
    /// Keep generating past end-of-generation tokens.
    #[arg(long)]
    ignore_eos: bool,
    #[command(flatten)]
    backend: BackendArgs,
    /// Context length in tokens (prompt and answer).
    #[arg(long, default_value_t = 4096)]
    ctx: usize,
    /// Key/value cache element type: f16 or f32.
    #[arg(long, default_value = "f16")]
    kv_type: String,
    /// Print one JSON object (ids, text, timings) instead of streaming text.
    #[arg(long)]
    json: bool,
    /// With --json: the K best raw logits of every step.
    #[arg(long, default_value_t = 0)]
    logits: usize,
}

/// The sampler as the generation loop's token chooser; it keeps the history the penalties need.
struct SamplerChooser {
    sampler: Sampler,
    history: Vec<u32>,
    scratch: Vec<f32>,
}

impl Chooser for SamplerChooser {
    fn choose(&mut self, logits: &[f32]) -> u32 {
        self.scratch.clear();
        self.scratch.extend_from_slice(logits);
        let id = self.sampler.sample(&mut self.scratch, &self.history);
        self.history.push(id);
        id
    }
}

pub fn run(a: RunArgs) -> Result<()> {
    // Checked before the model loads, so a typo fails at once.
    a.backend.kind()?;
    let kv_dtype = match a.kv_type.as_str() {
        "f16" => KvDtype::F16,
        "f32" => KvDtype::F32,
        other => bail!("--kv-type {other:?}: expected f16 or f32"),
    };
    let prompt = match (&a.prompt, &a.prompt_file) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(f)) => {
            Some(std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?)
        }
        (None, None) => None,
    };
    if prompt.is_none() && a.raw {
        bail!("--raw needs --prompt or --prompt-file");
    }
    let file = Arc::new(ModelFile::open(&a.model).with_context(|| a.model.display().to_string())?);
    let tokenizer = Tokenizer::from_gguf(&file.gguf).context("reading the tokenizer")?;
    let template = if a.raw {
        None
    } else {
        Some(ChatTemplate::from_gguf(&file.gguf).context("reading the chat template")?)
    };
    let mut stop_ids = eog_tokens(&file.gguf);
    stop_ids.extend(tokenizer.eog_ids());
    let cfg = EngineConfig {
        kv: KvCacheConfig {
            n_ctx: a.ctx,
            n_seq: 1,
            dtype: kv_dtype,
        },
        max_batch: 512,
    };
    let backend = a.backend.create()?;
    let mut bar = Progress::new(!a.json && std::io::stderr().is_terminal());
    let mut engine = Engine::load(file.clone(), backend, cfg, &mut |d, t| bar.update(d, t))
        .context("loading the model")?;
    bar.finish();
    let sampler = Sampler::new(SamplerConfig {
        temperature: a.temperature,
        top_k: a.top_k,
        top_p: a.top_p,
        seed: a.seed,
        ..SamplerConfig::default()
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut chooser = SamplerChooser {
        sampler,
        history: Vec::new(),
        scratch: Vec::new(),
    };
    let opts = GenerateOptions {
        max_tokens: a.max_tokens,
        stop_ids,
        ignore_eos: a.ignore_eos,
        top_logits: if a.json { a.logits } else { 0 },
    };
    let seq = engine.new_sequence()?;
    let mut session = Session {
        a: &a,
        engine: &mut engine,
        tokenizer: &tokenizer,
        chooser: &mut chooser,
        opts: &opts,
        seq,
        cached: Vec::new(),
    };

    let Some(prompt) = prompt else {
        return session.interactive(template.as_ref());
    };
    let text = match &template {
        None => prompt,
        Some(t) => {
            let mut msgs = Vec::new();
            if let Some(s) = &a.system {
                msgs.push(Message::system(s.clone()));
            }
            msgs.push(Message::user(prompt));
            t.render(&msgs, None, true, None)?
        }
    };
    // The chat template's own special tokens are always parsed; a raw prompt's only with
    // --special.
    let ids = encode(&tokenizer, &text, a.special || template.is_some());
    let (gen, streamed) = session.answer(&ids)?;
    if a.json {
        let steps: Vec<_> = gen
            .steps
            .iter()
            .map(|s| json!({"token": s.token, "top": s.top.iter().map(|(i, l)| json!([i, l])).collect::<Vec<_>>()}))
            .collect();
        let mut obj = json!({
            "prompt_ids": ids,
            "tokens": gen.tokens,
            "text": tokenizer.decode(&gen.tokens, a.special),
            "finish_reason": gen.finish_reason.as_str(),
            "timings": {
                "prompt_tokens_per_s": gen.prompt_tokens_per_s(),
                "gen_tokens_per_s": gen.gen_tokens_per_s(),
            },
        });
        if a.logits > 0 {
            obj["steps"] = json!(steps);
        }
        println!("{obj}");
    } else {
        if !streamed.ends_with('\n') {
            println!();
        }
        report_timings(&gen);
    }
    Ok(())
}

/// Text to ids with the tokenizer's own BOS rule; a BOS the template already wrote is not
/// doubled.
fn encode(tok: &Tokenizer, text: &str, parse_special: bool) -> Vec<u32> {
    let mut ids = tok.encode(text, true, parse_special);
    if let Some(bos) = tok.bos() {
        if ids.len() >= 2 && ids[0] == bos && ids[1] == bos {
            ids.remove(0);
        }
    }
    ids
}

fn report_timings(gen: &Generation) {
    eprintln!(
        "[{} prompt tokens at {:.1} tok/s, {} generated at {:.1} tok/s, finish: {}]",
        gen.prompt_tokens,
        gen.prompt_tokens_per_s(),
        gen.tokens.len(),
        gen.gen_tokens_per_s(),
        gen.finish_reason.as_str()
    );
}

/// One sequence being generated on, with the ids its cache holds.
struct Session<'a> {
    a: &'a RunArgs,
    engine: &'a mut Engine,
    tokenizer: &'a Tokenizer,
    chooser: &'a mut SamplerChooser,
    opts: &'a GenerateOptions,
    seq: u32,
    /// Token ids whose keys/values the cache holds, in order.
    cached: Vec<u32>,
}

impl Session<'_> {
    /// Generates after `ids` (reusing the cached prefix they share), streaming text to stdout
    /// unless --json. Returns the generation and the text streamed.
    fn answer(&mut self, ids: &[u32]) -> Result<(Generation, String)> {
        let n_ctx = self.engine.seqs().n_ctx();
        if ids.len() >= n_ctx {
            bail!(
                "the prompt has {} tokens but the context holds {n_ctx}; use a larger --ctx",
                ids.len()
            );
        }
        let mut keep = self
            .cached
            .iter()
            .zip(ids)
            .take_while(|(a, b)| a == b)
            .count();
        if keep == ids.len() {
            keep -= 1; // at least one token must be evaluated to get logits
        }
        self.engine.truncate(self.seq, keep)?;
        self.chooser.history = ids.to_vec();
        let stream = !self.a.json;
        let mut dec = StreamDecoder::new(self.a.special);
        let mut out = std::io::stdout().lock();
        let mut streamed = String::new();
        let tok = self.tokenizer;
        let gen = engine::generate(
            self.engine,
            self.seq,
            &ids[keep..],
            self.opts,
            self.chooser,
            &mut |id| {
                if stream {
                    let piece = dec.push(tok, id);
                    streamed.push_str(&piece);
                    let _ = out.write_all(piece.as_bytes());
                    let _ = out.flush();
                }
                true
            },
        )?;
        let held = self.engine.seqs().len(self.seq)?;
        self.cached = ids.iter().chain(&gen.tokens).copied().take(held).collect();
        Ok((gen, streamed))
    }

    /// A chat on stdin/stdout until end of input.
    fn interactive(&mut self, template: Option<&ChatTemplate>) -> Result<()> {
        let template = template.context("interactive chat needs a chat template")?;
        let mut msgs = Vec::new();
        if let Some(s) = &self.a.system {
            msgs.push(Message::system(s.clone()));
        }
        let stdin = std::io::stdin();
        let mut lines = stdin.lock().lines();
        loop {
            eprint!("> ");
            let Some(line) = lines.next() else { break };
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            msgs.push(Message::user(line));
            let text = template.render(&msgs, None, true, None)?;
            let ids = encode(self.tokenizer, &text, true);
            let (gen, streamed) = self.answer(&ids)?;
            println!();
            report_timings(&gen);
            msgs.push(Message::assistant(streamed));
        }
        Ok(())
    }
}

/// A loading bar on stderr (only on a terminal).
struct Progress {
    on: bool,
    last: usize,
}

impl Progress {
    fn new(on: bool) -> Self {
        Progress {
            on,
            last: usize::MAX,
        }
    }

    fn update(&mut self, done: usize, total: usize) {
        if !self.on || total == 0 {
            return;
        }
        let pct = done * 100 / total;
        if pct == self.last {
            return;
        }
        self.last = pct;
        let filled = pct * 30 / 100;
        eprint!(
            "\rloading [{}{}] {pct:3}%",
            "#".repeat(filled),
            " ".repeat(30 - filled)
        );
    }

    fn finish(&mut self) {
        if self.on {
            eprint!("\r{}\r", " ".repeat(50));
        }
    }
}
