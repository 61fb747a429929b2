//! `weft` subcommands. Each lives in its own file; this one parses arguments and dispatches.

mod backend_args;
mod bench;
mod bounds_args;
mod convert_video;
mod devices;
mod embed;
mod exec;
mod info;
mod keys;
mod models;
mod parity;
mod progress;
mod remote;
mod run;
mod run_image;
mod serve;
mod synth;
mod tokenize;
mod transfer;
mod video;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "weft",
    version,
    about = "Weft: a portable LLM inference engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a model's architecture, hyper-parameters, tokenizer and tensors (a GGUF file or a
    /// Hugging Face folder).
    Info(info::InfoArgs),
    /// Print one embedding vector per text (an embedding model or any chat model).
    Embed(embed::EmbedArgs),
    /// List the CUDA devices and the GPU adapters the wgpu backend can use (for --gpu-device N).
    Devices(devices::DevicesArgs),
    /// Print the token ids of a text (no BOS unless --bos).
    Tokenize(tokenize::TokenizeArgs),
    /// Generate text from a prompt, or chat interactively when no prompt is given.
    Run(run::RunArgs),
    /// Measure prompt-processing and generation speed (like llama-bench).
    Bench(bench::BenchArgs),
    /// Check a backend's matrix products against the CPU's for every weight type.
    Parity(parity::ParityArgs),
    /// Write a model with random weights at a real model's shapes (SmolLM2, Qwen2.5 0.5B/7B).
    Synth(synth::SynthArgs),
    /// Serve a model over HTTP (OpenAI /v1, Ollama /api, chat UI, ops routes).
    Serve(Box<serve::ServeArgs>),
    /// List the models in the store.
    #[command(alias = "ls")]
    List(models::ListArgs),
    /// Download a model into the store (resumed, sha256-verified).
    Pull(transfer::PullArgs),
    /// Remove models from the store.
    Rm(models::RmArgs),
    /// Copy a model to a new name (the file is shared).
    Cp(models::CpArgs),
    /// Show a model's facts or Modelfile.
    Show(models::ShowArgs),
    /// List the models a running server has loaded.
    Ps(models::PsArgs),
    /// Bring a local .gguf file into the store.
    Import(transfer::ImportArgs),
    /// Quantize a GGUF model to another type (as llama-quantize does).
    Quantize(transfer::QuantizeArgs),
    /// Convert a Hugging Face folder (llama, qwen2, gemma3; safetensors) to GGUF.
    Convert(transfer::ConvertArgs),
    /// Create, list and revoke API keys (in the database `weft serve` uses).
    Keys(keys::KeysArgs),
    /// Generate a video (MP4) from a prompt, and a first frame for image-to-video models.
    Video(video::VideoArgs),
    /// Run a Python or JavaScript file in the wasmtime sandbox, the current directory as its workspace.
    Exec(exec::ExecArgs),
}

/// Runs the CLI; errors print as one line on stderr and exit non-zero.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info(a) => info::run(a),
        Command::Embed(a) => embed::run(a),
        Command::Devices(a) => devices::run(a),
        Command::Tokenize(a) => tokenize::run(a),
        Command::Run(a) => run::run(a),
        Command::Serve(a) => serve::run(*a),
        Command::Bench(a) => bench::run(a),
        Command::Parity(a) => parity::run(a),
        Command::Synth(a) => synth::run(a),
        Command::List(a) => models::list(a),
        Command::Pull(a) => transfer::pull(a),
        Command::Rm(a) => models::rm(a),
        Command::Cp(a) => models::cp(a),
        Command::Show(a) => models::show(a),
        Command::Ps(a) => models::ps(a),
        Command::Import(a) => transfer::import(a),
        Command::Quantize(a) => transfer::quantize(a),
        Command::Convert(a) => transfer::convert(a),
        Command::Exec(a) => exec::run(a),
        Command::Keys(a) => keys::run(a),
        Command::Video(a) => video::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
