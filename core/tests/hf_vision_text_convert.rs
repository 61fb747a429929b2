//! The text half of `weft convert` on a vision-language folder: Idefics3's llama under
//! `model.text_model.` and Qwen2.5-VL's `qwen2vl` (M-RoPE sections) come out with llama.cpp's
//! tensor names and architecture keys, read from `text_config` (the configs of
//! tests/data/vision/convert: those folders hold the vision weights only, so the tensor bytes of
//! the text half are not compared here; see docs/vision.md).

use std::path::{Path, PathBuf};

use weft_core::hf::decoder::{gguf_name, DecoderConfig, Family, Transform};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/vision/convert")
}

#[test]
fn vision_folders_read_their_text_config() {
    let c = DecoderConfig::read(&data().join("idefics3/config.json")).unwrap();
    assert_eq!(c.family(), Family::Llama);
    assert_eq!(
        (c.hidden_size, c.num_hidden_layers, c.n_kv_heads()),
        (32, 2, 1)
    );
    assert_eq!(c.vocab_size, Some(49280));
    let c = DecoderConfig::read(&data().join("qwen25vl/config.json")).unwrap();
    assert_eq!(c.family(), Family::Qwen2VL);
    assert_eq!(c.mrope_section, vec![2, 3, 3]);
    let m = c.metadata("q");
    let sections = m
        .iter()
        .find(|kv| kv.0 == "qwen2vl.rope.dimension_sections")
        .map(|kv| kv.1.clone());
    use weft_core::gguf::Value::I32;
    assert_eq!(
        sections,
        Some(weft_core::gguf::Value::Array(vec![
            I32(2),
            I32(3),
            I32(3),
            I32(0)
        ]))
    );
    let c = DecoderConfig::read(&data().join("gemma3/config.json")).unwrap();
    assert_eq!(c.family(), Family::Gemma3);
    assert_eq!((c.hidden_size, c.head_dim()), (640, 256));
}

#[test]
fn idefics3_text_names_are_llamas() {
    assert_eq!(
        gguf_name(
            Family::Llama,
            "model.text_model.layers.1.self_attn.q_proj.weight",
            2,
            1
        ),
        Some(("blk.1.attn_q.weight".into(), Transform::PermuteRope(2)))
    );
    assert_eq!(
        gguf_name(Family::Llama, "model.text_model.embed_tokens.weight", 2, 1),
        Some(("token_embd.weight".into(), Transform::None))
    );
    // The vision tower is the projector's, not the text model's.
    assert_eq!(
        gguf_name(
            Family::Llama,
            "model.vision_model.encoder.layers.0.mlp.fc1.weight",
            2,
            1
        ),
        None
    );
    assert_eq!(
        gguf_name(Family::Qwen2VL, "visual.blocks.0.attn.qkv.weight", 2, 1),
        None
    );
}
