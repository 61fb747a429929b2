//! Unit tests on small synthetic vocabularies, written as real GGUF bytes and parsed back.

use super::*;
use crate::gguf::parse_header;

enum Kv<'a> {
    Str(&'a str),
    Strs(Vec<String>),
    I32s(Vec<i32>),
    F32s(Vec<f32>),
    U32(u32),
    Bool(bool),
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// A GGUF v3 file with the given metadata and no tensors.
fn gguf(kvs: &[(&str, Kv)]) -> Gguf {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend((kvs.len() as u64).to_le_bytes());
    for (k, v) in kvs {
        put_str(&mut b, k);
        match v {
            Kv::Str(s) => {
                b.extend(8u32.to_le_bytes());
                put_str(&mut b, s);
            }
            Kv::Strs(a) => {
                b.extend(9u32.to_le_bytes());
                b.extend(8u32.to_le_bytes());
                b.extend((a.len() as u64).to_le_bytes());
                for s in a {
                    put_str(&mut b, s);
                }
            }
            Kv::I32s(a) => {
                b.extend(9u32.to_le_bytes());
                b.extend(5u32.to_le_bytes());
                b.extend((a.len() as u64).to_le_bytes());
                a.iter().for_each(|x| b.extend(x.to_le_bytes()));
            }
            Kv::F32s(a) => {
                b.extend(9u32.to_le_bytes());
                b.extend(6u32.to_le_bytes());
                b.extend((a.len() as u64).to_le_bytes());
                a.iter().for_each(|x| b.extend(x.to_le_bytes()));
            }
            Kv::U32(x) => {
                b.extend(4u32.to_le_bytes());
                b.extend(x.to_le_bytes());
            }
            Kv::Bool(x) => {
                b.extend(7u32.to_le_bytes());
                b.push(*x as u8);
            }
        }
    }
    let len = b.len() as u64;
    parse_header(&b, len).expect("synthetic gguf parses")
}

fn strs(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A BERT-style vocabulary as llama.cpp's converter writes it: word-initial pieces carry
/// U+2581, continuation pieces carry nothing.
fn bert() -> Tokenizer {
    let tokens = [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁hello", "▁world", "▁un", "aff", "able", "▁,",
        "▁!", "▁cafe", "▁東", "▁the", "▁[MASK]",
    ];
    let types = vec![3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3];
    Tokenizer::from_gguf(&gguf(&[
        ("tokenizer.ggml.model", Kv::Str("bert")),
        ("tokenizer.ggml.tokens", Kv::Strs(strs(&tokens))),
        ("tokenizer.ggml.token_type", Kv::I32s(types)),
        ("tokenizer.ggml.bos_token_id", Kv::U32(2)),
        ("tokenizer.ggml.seperator_token_id", Kv::U32(3)),
        ("tokenizer.ggml.unknown_token_id", Kv::U32(1)),
        ("tokenizer.ggml.padding_token_id", Kv::U32(0)),
    ]))
    .expect("bert vocab")
}

#[test]
fn wordpiece_greedy_longest_match() {
    let t = bert();
    assert_eq!(t.kind(), "bert");
    // CLS ... SEP around; "unaffable" splits into ▁un + aff + able; "Café" loses its accent
    // and case; an unknown word becomes [UNK].
    assert_eq!(
        t.encode("Hello, unaffable Café xyz 東!", true, false),
        vec![2, 4, 9, 6, 7, 8, 11, 1, 12, 10, 3]
    );
    assert_eq!(t.encode("hello world", false, false), vec![4, 5]);
    assert_eq!(t.encode("", false, false), Vec::<u32>::new());
    assert_eq!(t.decode(&[4, 5], false), " hello world");
}

/// A tiny SentencePiece vocabulary with byte fallback.
fn spm(add_space_prefix: bool) -> Tokenizer {
    let mut tokens = strs(&["<unk>", "<s>", "</s>", "▁", "▁a", "b", "▁ab", "<ctl>", "\n"]);
    let mut types = vec![2, 3, 3, 1, 1, 1, 1, 3, 4];
    let mut scores = vec![0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -1.5, 0.0, 0.0];
    for b in 0..=255u32 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    Tokenizer::from_gguf(&gguf(&[
        ("tokenizer.ggml.model", Kv::Str("llama")),
        ("tokenizer.ggml.tokens", Kv::Strs(tokens)),
        ("tokenizer.ggml.token_type", Kv::I32s(types)),
        ("tokenizer.ggml.scores", Kv::F32s(scores)),
        ("tokenizer.ggml.add_space_prefix", Kv::Bool(add_space_prefix)),
    ]))
    .expect("spm vocab")
}

#[test]
fn sentencepiece_merges_scores_and_byte_fallback() {
    let t = spm(true);
    assert!(t.add_bos_default());
    assert_eq!(t.bos(), Some(1));
    assert_eq!(t.eos(), Some(2));
    // " ab" → ▁ab (score -1.5 beats ▁a's -2), "é" → two byte tokens (0xC3 0xA9).
    let byte = |b: u32| 9 + b;
    assert_eq!(
        t.encode("ab é", true, false),
        vec![1, 6, 3, byte(0xC3), byte(0xA9)]
    );
    assert_eq!(t.decode(&t.encode("ab é", false, false), false), "ab é");
    // The user-defined "\n" always splits; a space prefix follows special tokens only.
    assert_eq!(t.encode("a\nb", false, false), vec![4, 8, 3, 5]);
    assert_eq!(t.encode("<ctl>a", false, true), vec![7, 4]);
    let bytes: Vec<u32> = "<ctl>a".bytes().map(|b| byte(b as u32)).collect();
    assert_eq!(t.encode("<ctl>a", false, false), [vec![3], bytes].concat());
    let t = spm(false);
    assert_eq!(t.encode("ab", false, false), vec![byte(b'a' as u32), 5]);
}

/// A tiny byte-level BPE vocabulary.
fn gpt2(pre: &str) -> Tokenizer {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| bpe::byte_to_char(b).to_string()).collect();
    for t in ["Ġt", "he", "Ġthe", "Ġ1", "<|end|>", "<|endoftext|>"] {
        tokens.push(t.to_string());
    }
    let mut types = vec![1; tokens.len()];
    let n = types.len();
    types[n - 2] = 3;
    types[n - 1] = 3;
    Tokenizer::from_gguf(&gguf(&[
        ("tokenizer.ggml.model", Kv::Str("gpt2")),
        ("tokenizer.ggml.pre", Kv::Str(pre)),
        ("tokenizer.ggml.tokens", Kv::Strs(tokens)),
        ("tokenizer.ggml.token_type", Kv::I32s(types)),
        ("tokenizer.ggml.merges", Kv::Strs(strs(&["Ġ t", "h e", "Ġt he", "Ġ 1"]))),
        ("tokenizer.ggml.eos_token_id", Kv::U32(261)),
    ]))
    .expect("bpe vocab")
}

#[test]
fn byte_level_bpe_and_pre_tokenizers() {
    let t = gpt2("gpt-2");
    assert!(!t.add_bos_default());
    let the = 258;
    assert_eq!(t.encode(" the", false, false), vec![the]);
    assert_eq!(t.encode("x the", false, false), vec![b'x' as u32, the]);
    // gpt-2 keeps " 1" together (one word); smollm splits digits off first.
    assert_eq!(t.encode(" 1", false, false), vec![259]);
    let s = gpt2("smollm");
    assert_eq!(s.encode(" 1", false, false), vec![bpe_id(b' '), bpe_id(b'1')]);
    // The Llama 3 pre-tokenizer turns BOS on (llama.cpp's default BPE BOS id is 11).
    let l3 = gpt2("llama-bpe");
    assert!(l3.add_bos_default());
    assert_eq!(l3.encode("x", true, false), vec![11, b'x' as u32]);
    assert_eq!(t.eog_ids(), &[260, 261]);
    assert_eq!(t.decode(&t.encode("héllo\n 🚀", false, false), false), "héllo\n 🚀");
}

fn bpe_id(b: u8) -> u32 {
    b as u32 // the synthetic vocabulary lists the 256 byte characters first, in byte order
}

#[test]
fn bad_metadata_is_an_error() {
    let e = Tokenizer::from_gguf(&gguf(&[("tokenizer.ggml.model", Kv::Str("llama"))]));
    assert!(matches!(e, Err(TokenizerError::Missing("tokenizer.ggml.tokens"))));
    let e = Tokenizer::from_gguf(&gguf(&[
        ("tokenizer.ggml.model", Kv::Str("rwkv")),
        ("tokenizer.ggml.tokens", Kv::Strs(strs(&["a"]))),
    ]));
    assert!(matches!(e, Err(TokenizerError::Unsupported(_))));
    let e = Tokenizer::from_gguf(&gguf(&[]));
    assert!(e.unwrap_err().to_string().contains("tokenizer.ggml.model"));
}

/// A small byte-level BPE tokenizer.json: the 256 byte symbols, a few merges, a special BOS
/// added by the post-processor, a special `<|end|>` and a non-special `<tool>`.
#[cfg(not(target_arch = "wasm32"))]
fn tokenizer_json() -> Tokenizer {
    let mut vocab = serde_json::Map::new();
    for b in 0..=255u8 {
        vocab.insert(bpe::byte_to_char(b).to_string(), b.into());
    }
    for (i, t) in ["hi", "Ġt", "he", "Ġthe", "re", "Ġthere"].iter().enumerate() {
        vocab.insert(t.to_string(), (256 + i).into());
    }
    let added = |id: u32, content: &str, special: bool| {
        serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": special})
    };
    let byte_level = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false,
        "trim_offsets": true, "use_regex": true});
    let json = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [added(262, "<s>", true), added(263, "<|end|>", true),
            added(264, "<tool>", false)],
        "normalizer": null,
        "pre_tokenizer": byte_level,
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [262], "tokens": ["<s>"]}}},
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
            "byte_fallback": false, "ignore_merges": false, "vocab": vocab,
            "merges": ["h i", "Ġ t", "h e", "Ġt he", "r e", "Ġthe re"]}
    });
    Tokenizer::from_tokenizer_json(json.to_string().as_bytes()).expect("tokenizer.json")
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn tokenizer_json_path() {
    let t = tokenizer_json();
    assert_eq!(t.kind(), "tokenizer.json");
    assert_eq!(t.vocab_size(), 265);
    assert!(t.add_bos_default());
    assert_eq!(t.bos(), Some(262));
    assert_eq!(t.encode("hi there", true, true), vec![262, 256, 261]);
    assert_eq!(t.encode("hi<|end|>", false, true), vec![256, 263]);
    let literal: Vec<u32> = "<|end|>".bytes().map(u32::from).collect();
    assert_eq!(t.encode("hi<|end|>", false, false), [vec![256], literal].concat());
    assert_eq!(t.encode("a<tool>", false, false), vec![b'a' as u32, 264]);
    assert_eq!(t.decode(&[256, 261, 263], false), "hi there");
    assert_eq!(t.decode(&[256, 261, 263], true), "hi there<|end|>");
    assert!(t.is_eog(263));
    assert_eq!(t.token_id("Ġthere"), Some(261));
    assert_eq!(t.token_text(261).as_deref(), Some("Ġthere"));
    // Streaming a character split over byte tokens.
    let ids = t.encode("é!", false, false);
    assert_eq!(ids, vec![0xC3, 0xA9, b'!' as u32]);
    let mut d = StreamDecoder::new(false);
    assert_eq!(d.push(&t, ids[0]), "");
    assert_eq!(d.push(&t, ids[1]), "é");
    assert!(Tokenizer::from_tokenizer_json(b"{not json").is_err());
}
