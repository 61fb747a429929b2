//! The family-dispatching vision encoder (`VisionEncoder`) on Gemma 3: from a decoded image to
//! prompt pieces laid out as llama.cpp's mtmd lays them (tests/data/vision/gemma3/index.json:
//! the text chunk before ends with `<start_of_image>`, the image chunk's rows, the text after
//! starts with `<end_of_image>`), with the rows mtmd's projector gave for the same image.

mod vision_files;

use std::path::PathBuf;
use std::sync::Arc;

use vision_files::{read_f32, read_png};
use weft_core::backend::cpu::CpuBackend;
use weft_core::engine::PromptPiece;
use weft_core::gguf::ModelFile;
use weft_core::model::vision::encoder::VisionEncoder;
use weft_core::model::vision::Mmproj;
use weft_core::test_support;
use weft_core::tokenizer::Tokenizer;
use weft_core::vision::RgbImage;

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/vision/gemma3")
        .join(rel)
}

#[test]
fn gemma3_image_becomes_mtmd_layout_and_rows() {
    let Some(model) = test_support::model_path("gemma3") else {
        return;
    };
    let text = ModelFile::open(&model).unwrap();
    let tok = Tokenizer::from_gguf(&text.gguf).unwrap();
    let mm = Mmproj::read(Arc::new(
        ModelFile::open(data("mmproj-gemma3-tiny-f16.gguf")).unwrap(),
    ))
    .unwrap();
    let mut backend = CpuBackend::new(2);
    // A projector for another width is refused at load.
    assert!(VisionEncoder::load(&mm, &mut backend, &tok, 576).is_err());
    let enc = VisionEncoder::load(&mm, &mut backend, &tok, 640).unwrap();
    assert_eq!(enc.projector_type(), "gemma3");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data("index.json")).unwrap()).unwrap();
    let image = &index["images"][2];
    let stem = image["image"].as_str().unwrap().rsplit_once('.').unwrap().0;
    let chunks = image["prompt_chunks"].as_array().unwrap();
    let before = test_support::ids(&chunks[0]["tokens"]);
    let after = test_support::ids(&chunks[2]["tokens"]);
    let n = chunks[1]["n_tokens"].as_u64().unwrap() as usize;
    let (w, h, pixels) = read_png(&data(&format!("{stem}.decoded.png")));
    let img = RgbImage {
        width: w as u32,
        height: h as u32,
        data: pixels,
    };
    assert_eq!(enc.n_tokens(img.width, img.height), n + 2);
    let out = enc.encode(&mut backend, &img).unwrap();
    assert_eq!(out.n_tokens, n + 2);
    assert_eq!(out.pieces.len(), 3);
    assert_eq!(
        out.pieces[0],
        PromptPiece::Tokens(vec![*before.last().unwrap()])
    );
    assert_eq!(out.pieces[2], PromptPiece::Tokens(vec![after[0]]));
    let PromptPiece::Embeddings {
        data: rows,
        n: got_n,
        bidirectional,
    } = &out.pieces[1]
    else {
        panic!("the middle piece is not the image's rows");
    };
    assert_eq!((*got_n, *bidirectional), (n, true));
    let want = read_f32(&data(&format!("{stem}.embd.f32")));
    assert_eq!(rows.len(), want.len());
    let max = rows
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    // The encoder's own test holds it to mtmd within 1.5e-3 on every image.
    assert!(max <= 2e-3, "max-abs {max} from mtmd's rows");
}
