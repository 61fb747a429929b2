//! `weft run`: generate text from a prompt (or chat interactively) on the local machine.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use super::backend_args::BackendArgs;
use super::run_image;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;
use weft_core::backend::KvDtype;
use weft_core::chat::{ChatTemplate, Message};
use weft_core::engine::{EngineConfig, Prompt};
use weft_core::generation::{GenParams, Generated, Session};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::loaded::LoadedModel;
use weft_core::sampler::SamplerConfig;

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
    /// Stop when the text contains this string (repeatable); the string is not printed.
    #[arg(long)]
    stop: Vec<String>,
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
    /// An image to put in the prompt (repeatable; PNG, JPEG, WebP or GIF), read by the
    /// model's vision projector. `<__media__>` in the prompt marks where each goes; without
    /// one the images come first.
    #[arg(long)]
    image: Vec<PathBuf>,
    /// The vision projector (mmproj GGUF) for --image; default: the mmproj*.gguf beside the
    /// model.
    #[arg(long)]
    mmproj: Option<PathBuf>,
}

pub fn run(a: RunArgs) -> Result<()> {
    // Checked before the model loads, so a typo fails at once.
    a.backend.check()?;
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
    if prompt.is_none() && !a.image.is_empty() {
        bail!("--image needs --prompt or --prompt-file");
    }
    let sampling = SamplerConfig {
        temperature: a.temperature,
        top_k: a.top_k,
        top_p: a.top_p,
        seed: a.seed,
        ..SamplerConfig::default()
    };
    sampling.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    let params = GenParams {
        sampling,
        max_tokens: a.max_tokens,
        stop: a.stop.clone(),
        ignore_eos: a.ignore_eos,
        special_text: a.special,
        ..GenParams::default()
    };
    let file = Arc::new(ModelFile::open(&a.model).with_context(|| a.model.display().to_string())?);
    let cfg = EngineConfig {
        kv: KvCacheConfig {
            n_ctx: a.ctx,
            n_seq: 1,
            dtype: kv_dtype,
            pool_tokens: None,
        },
        max_batch: 512,
    };
    let backend = a.backend.create()?;
    let mut bar = Progress::new(!a.json && std::io::stderr().is_terminal());
    let mut model = LoadedModel::from_file(file, backend, cfg, &mut |d, t| bar.update(d, t))
        .context("loading the model")?;
    bar.finish();
    if !a.raw {
        if let Err(e) = &model.template {
            bail!("reading the chat template: {e}");
        }
    }
    let mut session = model.session()?;
    session.top_logits = if a.json { a.logits } else { 0 };
    let mut chat = Chat {
        a: &a,
        model: &mut model,
        session,
        params: &params,
    };

    let Some(mut prompt) = prompt else {
        return chat.interactive();
    };
    let vision = if a.image.is_empty() {
        None
    } else {
        prompt = run_image::with_markers(&prompt, a.image.len());
        let n_embd = chat.model.engine.model_info().n_embd;
        let tok = chat.model.tokenizer.clone();
        let v = run_image::load_vision(&a.model, a.mmproj.as_ref(), &a.backend, &tok, n_embd)
            .context("loading the vision projector")?;
        Some(v)
    };
    let text = if a.raw {
        prompt
    } else {
        let mut msgs = Vec::new();
        if let Some(s) = &a.system {
            msgs.push(Message::system(s.clone()));
        }
        msgs.push(Message::user(prompt));
        chat.render(&msgs)?
    };
    // The chat template's own special tokens are always parsed; a raw prompt's only with
    // --special.
    let (ids, gen, images) = match &vision {
        None => {
            let ids = chat.model.encode_prompt(&text, a.special || !a.raw);
            let gen = chat.answer(&ids)?;
            (ids, gen, None)
        }
        Some(v) => {
            let tok = chat.model.tokenizer.clone();
            let im = run_image::build(v, &tok, &text, &a.image)?;
            let ids = im.prompt.ids(im.placeholder);
            let gen = chat.answer_prompt(&im.prompt, im.placeholder)?;
            (ids, gen, Some(im))
        }
    };
    if a.json {
        let steps: Vec<_> = gen
            .steps
            .iter()
            .map(|s| json!({"token": s.token, "top": s.top.iter().map(|(i, l)| json!([i, l])).collect::<Vec<_>>()}))
            .collect();
        let mut obj = json!({
            "prompt_ids": ids,
            "tokens": gen.tokens,
            "text": gen.text,
            "finish_reason": gen.finish.as_str(),
            "timings": {
                "prompt_tokens_per_s": gen.prompt_tokens_per_s(),
                "gen_tokens_per_s": gen.gen_tokens_per_s(),
            },
        });
        if a.logits > 0 {
            obj["steps"] = json!(steps);
        }
        if let Some(im) = &images {
            // Milliseconds, as llama-mtmd-cli logs them; the first token comes right after
            // the prompt (sampled from its last logits).
            let t = &mut obj["timings"];
            t["image_decode_ms"] = json!(im.decode_secs * 1e3);
            t["image_encode_ms"] = json!(im.encode_secs * 1e3);
            t["prompt_ms"] = json!(gen.prompt_secs * 1e3);
            t["first_token_ms"] = json!((im.decode_secs + im.encode_secs + gen.prompt_secs) * 1e3);
            obj["image_tokens"] = json!(im.image_tokens);
        }
        println!("{obj}");
    } else {
        if !gen.text.ends_with('\n') {
            println!();
        }
        if let Some(im) = &images {
            eprintln!(
                "[{} image(s): {} tokens, decoded in {:.0} ms, encoded in {:.0} ms]",
                a.image.len(),
                im.image_tokens,
                im.decode_secs * 1e3,
                im.encode_secs * 1e3
            );
        }
        report_timings(&gen);
    }
    Ok(())
}

fn report_timings(gen: &Generated) {
    eprintln!(
        "[{} prompt tokens at {:.1} tok/s, {} generated at {:.1} tok/s, finish: {}]",
        gen.prompt_tokens - gen.cached_tokens,
        gen.prompt_tokens_per_s(),
        gen.tokens.len(),
        gen.gen_tokens_per_s(),
        gen.finish.as_str()
    );
}

/// The model and the one sequence `weft run` generates on (its cache is reused from turn to
/// turn).
struct Chat<'a> {
    a: &'a RunArgs,
    model: &'a mut LoadedModel,
    session: Session,
    params: &'a GenParams,
}

impl Chat<'_> {
    /// The conversation as prompt text, through the model's chat template.
    fn render(&self, msgs: &[Message]) -> Result<String> {
        let template: &ChatTemplate = self
            .model
            .chat_template()
            .context("this model has no chat template")?;
        Ok(template.render(msgs, None, true, None)?)
    }

    /// Generates after `ids`, streaming text to stdout unless --json.
    fn answer(&mut self, ids: &[u32]) -> Result<Generated> {
        let n_ctx = self.model.engine.config().kv.n_ctx;
        if ids.len() >= n_ctx {
            bail!(
                "the prompt has {} tokens but the context holds {n_ctx}; use a larger --ctx",
                ids.len()
            );
        }
        let stream = !self.a.json;
        let mut out = std::io::stdout().lock();
        let gen = self
            .session
            .generate(self.model, ids, self.params, &mut |step| {
                if stream && !step.text.is_empty() {
                    let _ = out.write_all(step.text.as_bytes());
                    let _ = out.flush();
                }
                true
            })?;
        Ok(gen)
    }

    /// [`answer`](Self::answer) after a prompt holding images' embedding rows.
    fn answer_prompt(&mut self, prompt: &Prompt, placeholder: u32) -> Result<Generated> {
        let n_ctx = self.model.engine.config().kv.n_ctx;
        if prompt.len() >= n_ctx {
            bail!(
                "the prompt with its images has {} positions but the context holds {n_ctx}; \
                 use a larger --ctx",
                prompt.len()
            );
        }
        let stream = !self.a.json;
        let mut out = std::io::stdout().lock();
        let gen = self.session.generate_prompt(
            self.model,
            prompt,
            placeholder,
            self.params,
            &mut |step| {
                if stream && !step.text.is_empty() {
                    let _ = out.write_all(step.text.as_bytes());
                    let _ = out.flush();
                }
                true
            },
        )?;
        Ok(gen)
    }

    /// A chat on stdin/stdout until end of input.
    fn interactive(&mut self) -> Result<()> {
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
            let text = self.render(&msgs)?;
            let ids = self.model.encode_prompt(&text, true);
            let gen = self.answer(&ids)?;
            println!();
            report_timings(&gen);
            msgs.push(Message::assistant(gen.text));
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
