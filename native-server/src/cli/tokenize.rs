//! `weft tokenize`: text to token ids with a model's tokenizer, as llama.cpp would produce.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::json;
use weft_core::gguf::ModelFile;
use weft_core::tokenizer::Tokenizer;

#[derive(Args)]
pub struct TokenizeArgs {
    /// A .gguf model, or a Hugging Face tokenizer.json.
    #[arg(long)]
    model: PathBuf,
    /// Parse special tokens written in the text (`<|im_start|>`, `<end_of_turn>` ...).
    #[arg(long)]
    special: bool,
    /// Add the tokens the model puts around a sequence (BOS when it asks for one).
    #[arg(long)]
    bos: bool,
    /// Print `{"ids":[...],"pieces":[...]}` instead of space-separated ids.
    #[arg(long)]
    json: bool,
    /// The text to tokenize; `-` reads standard input.
    text: String,
}

/// Loads the tokenizer of a .gguf file or a tokenizer.json.
pub fn load_tokenizer(path: &std::path::Path) -> Result<Tokenizer> {
    let shown = path.display();
    if path.extension().is_some_and(|e| e == "json") {
        let bytes = std::fs::read(path).with_context(|| format!("{shown}"))?;
        return Tokenizer::from_tokenizer_json(&bytes).with_context(|| format!("{shown}"));
    }
    let file = ModelFile::open(path).with_context(|| format!("{shown}"))?;
    Tokenizer::from_gguf(&file.gguf).with_context(|| format!("{shown}"))
}

pub fn run(a: TokenizeArgs) -> Result<()> {
    let tok = load_tokenizer(&a.model)?;
    let text = if a.text == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading standard input")?;
        s
    } else {
        a.text
    };
    let ids = tok.encode(&text, a.bos, a.special);
    if a.json {
        let pieces: Vec<String> = ids
            .iter()
            .map(|&id| String::from_utf8_lossy(&tok.token_bytes(id, true)).into_owned())
            .collect();
        println!("{}", json!({ "ids": ids, "pieces": pieces }));
    } else {
        let line: Vec<String> = ids.iter().map(u32::to_string).collect();
        println!("{}", line.join(" "));
    }
    Ok(())
}
