//! `weft` subcommands. Each lives in its own file; this one parses arguments and dispatches.

mod backend_args;
mod bench;
mod devices;
mod exec;
mod info;
mod run;
mod serve;
mod tokenize;

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
    /// Show a GGUF model's architecture, hyper-parameters, tokenizer and tensors.
    Info(info::InfoArgs),
    /// List the GPU adapters the wgpu backend can use (for --backend wgpu --gpu-device N).
    Devices(devices::DevicesArgs),
    /// Print the token ids of a text (no BOS unless --bos).
    Tokenize(tokenize::TokenizeArgs),
    /// Generate text from a prompt, or chat interactively when no prompt is given.
    Run(run::RunArgs),
    /// Measure prompt-processing and generation speed (like llama-bench).
    Bench(bench::BenchArgs),
    /// Serve a model over HTTP (OpenAI /v1, Ollama /api, chat UI, ops routes).
    Serve(serve::ServeArgs),
    /// Run a Python or JavaScript file in the wasmtime sandbox, the current directory as its workspace.
    Exec(exec::ExecArgs),
}

/// Runs the CLI; errors print as one line on stderr and exit non-zero.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info(a) => info::run(a),
        Command::Devices(a) => devices::run(a),
        Command::Tokenize(a) => tokenize::run(a),
        Command::Run(a) => run::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Exec(a) => exec::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
