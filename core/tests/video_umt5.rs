//! Wan's UMT5 text encoder against transformers / diffusers on the tiny Wan model: the
//! encodings `WanPipeline` computed for the prompt and the negative prompt (run `t2v-unipc`,
//! tests/data/video/README.md), from the token ids and masks its manifest records; and the
//! tiny tokenizer's ids for the same texts.

mod video_files;

use video_files::{max_abs_diff, relative_error, Run};
use weft_core::diffusion::{zero_padding_rows, Umt5Encoder};
use weft_core::tokenizer::Tokenizer;

fn ints<T: TryFrom<u64>>(v: &serde_json::Value) -> Vec<T>
where
    T::Error: std::fmt::Debug,
{
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| T::try_from(x.as_u64().unwrap()).unwrap())
        .collect()
}

fn encoder() -> Umt5Encoder {
    Umt5Encoder::load(&video_files::data("tiny-wan/t2v/text_encoder")).unwrap()
}

/// The largest relative error a row may have: `|ours - theirs| / |theirs|` per token.
fn worst_row_error(ours: &[f32], theirs: &[f32], d: usize) -> f64 {
    ours.chunks(d)
        .zip(theirs.chunks(d))
        .filter(|(_, t)| t.iter().any(|&v| v != 0.0))
        .map(|(o, t)| relative_error(o, t))
        .fold(0.0, f64::max)
}

#[test]
fn encodings_match_the_pipeline() {
    let run = Run::open("t2v-unipc");
    let enc = encoder();
    let d = enc.config.d_model;
    for (key, file) in [
        ("prompt", "prompt_embeds"),
        ("negative_prompt", "negative_prompt_embeds"),
    ] {
        let tokens = &run.manifest["tokens"][key];
        let ids: Vec<u32> = ints(&tokens["ids"]);
        let mask: Vec<u8> = ints(&tokens["mask"]);
        let want = run.tensor(file);
        assert_eq!(want.shape, vec![1, ids.len(), d], "{file}");

        let mut ours = enc.encode(&ids, &mask).unwrap();
        zero_padding_rows(&mut ours, &mask, d);

        let real = mask.iter().filter(|&&m| m != 0).count();
        let rel = relative_error(&ours, &want.data);
        let row = worst_row_error(&ours, &want.data, d);
        let abs = max_abs_diff(&ours, &want.data);
        eprintln!(
            "{key}: {real} tokens of {}; relative error {rel:.3e}, worst row {row:.3e}, \
             max |diff| {abs:.3e}",
            ids.len()
        );
        assert!(rel <= 1e-4 && row <= 1e-4, "{key}: {rel:e} / {row:e}");
        // The padding rows are exactly zero on both sides.
        assert!(ours[real * d..].iter().all(|&v| v == 0.0));
        assert!(want.data[real * d..].iter().all(|&v| v == 0.0));
        // ... and the real rows are not (a zero output would pass nothing above).
        assert!(ours[..real * d].iter().any(|&v| v != 0.0));
    }
}

#[test]
fn padding_keys_are_masked() {
    // With the mask, the real rows do not depend on what sits in the padding positions.
    let run = Run::open("t2v-unipc");
    let tokens = &run.manifest["tokens"]["prompt"];
    let ids: Vec<u32> = ints(&tokens["ids"]);
    let mask: Vec<u8> = ints(&tokens["mask"]);
    let enc = encoder();
    let d = enc.config.d_model;
    let real = mask.iter().filter(|&&m| m != 0).count();
    let a = enc.encode(&ids, &mask).unwrap();
    let mut other = ids.clone();
    for id in other.iter_mut().skip(real) {
        *id = 7;
    }
    let b = enc.encode(&other, &mask).unwrap();
    assert_eq!(a[..real * d], b[..real * d]);
    // Without the mask they do.
    let all = vec![1u8; ids.len()];
    let c = enc.encode(&other, &all).unwrap();
    assert!(max_abs_diff(&a[..real * d], &c[..real * d]) > 1e-3);
}

#[test]
fn bad_input_is_an_error() {
    let enc = encoder();
    assert!(enc.encode(&[], &[]).is_err());
    assert!(enc.encode(&[1, 2], &[1]).is_err());
    let vocab = enc.config.vocab_size as u32;
    assert!(enc.encode(&[vocab], &[1]).is_err());
    assert!(Umt5Encoder::load(&video_files::data("tiny-wan/t2v/vae")).is_err());
}

#[test]
fn tokenizer_gives_the_pipeline_ids() {
    let run = Run::open("t2v-unipc");
    let path = video_files::data("tiny-wan/t2v/tokenizer/tokenizer.json");
    let tok = Tokenizer::from_tokenizer_json(&std::fs::read(path).unwrap()).unwrap();
    for key in ["prompt", "negative_prompt"] {
        let tokens = &run.manifest["tokens"][key];
        let ids: Vec<u32> = ints(&tokens["ids"]);
        let mask: Vec<u8> = ints(&tokens["mask"]);
        let real = mask.iter().filter(|&&m| m != 0).count();
        // The pipeline tokenizes its cleaned text (runs of spaces collapsed).
        let text = tokens["cleaned"].as_str().unwrap();
        let ours = tok.encode(text, true, false);
        assert_eq!(ours, ids[..real], "{key}: {text:?}");
        assert!(
            ids[real..].iter().all(|&id| id == 0),
            "{key}: padding is <pad>"
        );
    }
}
