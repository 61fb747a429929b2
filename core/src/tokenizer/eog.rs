//! Which tokens end generation: the one set every part of Weft uses (the CLI, the server's
//! scheduler, the browser build, constrained decoding), built the same way for GGUF
//! vocabularies and `tokenizer.json` files. The rules are llama.cpp's
//! (`llama_vocab::impl::load`), so a model stops where llama.cpp stops it:
//!
//! - the ids the metadata names: EOS, end of turn, end of message, and the FIM pad / repo /
//!   file-separator tokens (when the metadata names none, they are found by their text);
//! - every token whose text is a known end-of-turn marker ([`EOG_TEXTS`]);
//! - `</s>` and `<eos>` only when they are control tokens (Gemma's vocabulary also has a
//!   plain user-defined `</s>` that must not stop anything);
//! - with both `<|return|>` and `<|call|>` (or `<|calls|>` and `<|flush|>`), `<|end|>` is not
//!   an end (gpt-oss and Solar Open use it between messages).
//!
//! For the reference models: Gemma 3 `[1, 106]` (`<eos>`, `<end_of_turn>`); SmolLM2
//! `[0, 2, 4]` (`<|endoftext|>`, `<|im_end|>`, its FIM repo token `<reponame>`); Qwen2.5
//! `[151643, 151645, 151662, 151663, 151664]` (`<|endoftext|>`, `<|im_end|>`, `<|fim_pad|>`,
//! `<|repo_name|>`, `<|file_sep|>`).

/// Token texts that end generation whatever their type (a GGUF vocabulary then treats them as
/// control tokens).
pub(crate) const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
];

/// Token texts that end generation only when they are control (special) tokens.
const EOG_CONTROL_TEXTS: &[&str] = &["</s>", "<eos>"];

/// End-of-turn candidates, in the order preferred when the metadata names none.
pub(crate) const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

/// End-of-message candidates.
pub(crate) const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
/// FIM padding candidates.
pub(crate) const FIM_PAD_TEXTS: &[&str] =
    &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
/// FIM repository-name candidates.
pub(crate) const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
/// FIM file-separator candidates.
pub(crate) const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];

/// The special ids a vocabulary names (from metadata, or found by text in the lists above).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Named {
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub fim_pad: Option<u32>,
    pub fim_rep: Option<u32>,
    pub fim_sep: Option<u32>,
}

/// The end-of-generation set of a vocabulary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct EndOfGeneration {
    /// Sorted, without duplicates.
    pub ids: Vec<u32>,
    /// The ids found by their text in [`EOG_TEXTS`] (a GGUF vocabulary marks them control).
    pub by_text: Vec<u32>,
    /// `<|end|>`, when the rule for gpt-oss style vocabularies took it out of the set (it is
    /// then plain text).
    pub demoted_end: Option<u32>,
}

/// The first of `list` that `find` knows.
pub(crate) fn first_of(list: &[&str], find: &dyn Fn(&str) -> Option<u32>) -> Option<u32> {
    list.iter().find_map(|t| find(t))
}

/// Builds the set. `find` maps a token text to its id (a tokenizer.json offers only its special
/// added tokens); `is_control` tells whether an id is a control (special) token.
pub(crate) fn end_of_generation(
    named: &Named,
    find: &dyn Fn(&str) -> Option<u32>,
    is_control: &dyn Fn(u32) -> bool,
) -> EndOfGeneration {
    let by_text: Vec<u32> = EOG_TEXTS.iter().filter_map(|t| find(t)).collect();
    let mut ids: Vec<u32> = [
        named.eos,
        named.eot,
        named.eom,
        named.fim_pad,
        named.fim_rep,
        named.fim_sep,
    ]
    .into_iter()
    .flatten()
    .chain(by_text.iter().copied())
    .chain(
        EOG_CONTROL_TEXTS
            .iter()
            .filter_map(|t| find(t))
            .filter(|&id| is_control(id)),
    )
    .collect();
    ids.sort_unstable();
    ids.dedup();
    let has = |t: &str| find(t).is_some_and(|id| ids.binary_search(&id).is_ok());
    let mut demoted_end = None;
    if (has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>")) {
        if let Some(end) = find("<|end|>") {
            ids.retain(|&id| id != end);
            demoted_end = Some(end);
        }
    }
    EndOfGeneration {
        ids,
        by_text,
        demoted_end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(texts: &'static [(&'static str, bool)]) -> impl Fn(&str) -> Option<u32> {
        move |t| texts.iter().position(|(x, _)| *x == t).map(|i| i as u32)
    }

    #[test]
    fn control_only_texts_and_the_gpt_oss_rule() {
        // A user-defined `</s>` (Gemma) does not end generation; a control one does.
        const GEMMA: &[(&str, bool)] = &[("<pad>", true), ("<eos>", true), ("</s>", false)];
        let find = vocab(GEMMA);
        let named = Named {
            eos: Some(1),
            ..Default::default()
        };
        let e = end_of_generation(&named, &find, &|id| GEMMA[id as usize].1);
        assert_eq!(e.ids, vec![1]);
        const LLAMA2: &[(&str, bool)] = &[("<unk>", true), ("<s>", true), ("</s>", true)];
        let e = end_of_generation(&Named::default(), &vocab(LLAMA2), &|_| true);
        assert_eq!(e.ids, vec![2]);
        const OSS: &[(&str, bool)] = &[("<|return|>", true), ("<|call|>", true), ("<|end|>", true)];
        let e = end_of_generation(&Named::default(), &vocab(OSS), &|_| true);
        assert_eq!((e.ids, e.demoted_end), (vec![0, 1], Some(2)));
    }
}
