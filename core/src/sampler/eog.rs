//! End-of-generation tokens from GGUF metadata.

use crate::gguf::Gguf;

/// Control-token texts that end a turn in the families Weft knows. Only tokens the vocabulary
/// marks as control tokens count: Gemma's vocabulary also has a plain user-defined `</s>`.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "</s>",
    "<EOT>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
];

/// GGUF token type of control tokens.
const TOKEN_TYPE_CONTROL: i64 = 3;

/// The token ids that end generation: the metadata's EOS / EOT / EOM ids, plus control tokens
/// whose text is a known end-of-turn marker. Sorted, without duplicates.
/// Gemma 3 gives `[1, 106]` (`<eos>`, `<end_of_turn>`).
pub fn eog_tokens(gguf: &Gguf) -> Vec<u32> {
    let mut ids: Vec<u32> = ["eos", "eot", "eom"]
        .iter()
        .filter_map(|k| gguf.get_u64(&format!("tokenizer.ggml.{k}_token_id")))
        .filter_map(|id| u32::try_from(id).ok())
        .collect();
    let tokens = gguf.get_array("tokenizer.ggml.tokens").unwrap_or(&[]);
    let types = gguf.get_array("tokenizer.ggml.token_type").unwrap_or(&[]);
    for (i, t) in tokens.iter().enumerate() {
        let Some(text) = t.as_str() else { continue };
        let control = types.get(i).and_then(|v| v.as_i64()) == Some(TOKEN_TYPE_CONTROL);
        if control && EOG_TEXTS.contains(&text) {
            ids.push(i as u32);
        }
    }
    ids.retain(|&id| (id as usize) < tokens.len() || tokens.is_empty());
    ids.sort_unstable();
    ids.dedup();
    ids
}
