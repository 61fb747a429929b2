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
    vision_files::data(&format!("gemma3/{rel}"))
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

/// A prompt piece as mtmd's chunks show it: a token id, or `n` image rows.
#[derive(Debug, PartialEq)]
enum Item {
    Token(u32),
    Rows(usize),
}

/// mtmd's chunks of one image's prompt, flattened.
fn mtmd_items(chunks: &[serde_json::Value]) -> Vec<Item> {
    let mut out = Vec::new();
    for c in chunks {
        match c["type"].as_str().unwrap() {
            "text" => out.extend(test_support::ids(&c["tokens"]).into_iter().map(Item::Token)),
            _ => out.push(Item::Rows(c["n_tokens"].as_u64().unwrap() as usize)),
        }
    }
    out
}

/// Weft's pieces, flattened (a grid piece takes no position and is left out), and the
/// embedding rows in order.
fn weft_items(pieces: &[PromptPiece]) -> (Vec<Item>, Vec<f32>) {
    let (mut items, mut rows) = (Vec::new(), Vec::new());
    for p in pieces {
        match p {
            PromptPiece::Tokens(t) => items.extend(t.iter().map(|&t| Item::Token(t))),
            PromptPiece::Embeddings { data, n, .. } => {
                items.push(Item::Rows(*n));
                rows.extend_from_slice(data);
            }
            PromptPiece::ImageGrid { .. } => {}
        }
    }
    (items, rows)
}

/// Loads `family`'s tiny text model's tokenizer and its projector, encodes the wide test
/// image, and checks the pieces lie inside mtmd's prompt exactly where its image chunks are,
/// with rows within `bound` of mtmd's; returns the encoded pieces.
fn check_family(family: &str, text_model: &str, n_embd: usize, bound: f32) -> Vec<PromptPiece> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/vision")
        .join(family);
    let text = ModelFile::open(dir.join(text_model)).unwrap();
    let tok = Tokenizer::from_gguf(&text.gguf).unwrap();
    let mmproj = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("mmproj-")
        })
        .unwrap();
    let mm = Mmproj::read(Arc::new(ModelFile::open(&mmproj).unwrap())).unwrap();
    let mut backend = CpuBackend::new(2);
    let enc = VisionEncoder::load(&mm, &mut backend, &tok, n_embd).unwrap();
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    let image = &index["images"][2];
    let stem = image["image"].as_str().unwrap().rsplit_once('.').unwrap().0;
    let (w, h, pixels) = read_png(&dir.join(format!("{stem}.decoded.png")));
    let img = RgbImage {
        width: w as u32,
        height: h as u32,
        data: pixels,
    };
    let out = enc.encode(&mut backend, &img).unwrap();
    // The count given before encoding is the count the pieces take.
    assert_eq!(enc.n_tokens(img.width, img.height), out.n_tokens);
    let (items, rows) = weft_items(&out.pieces);
    assert_eq!(
        items.iter().filter(|i| matches!(i, Item::Token(_))).count() + rows.len() / n_embd,
        out.n_tokens
    );
    // mtmd's prompt = text before the marker + the image's pieces + text after: find ours in it.
    let want = mtmd_items(image["prompt_chunks"].as_array().unwrap());
    let at = (0..=want.len() - items.len())
        .find(|&k| want[k..k + items.len()] == items[..])
        .unwrap_or_else(|| {
            panic!("{family}: the pieces {items:?} are not in mtmd's prompt {want:?}")
        });
    assert!(want[..at].iter().all(|i| matches!(i, Item::Token(_))));
    assert!(want[at + items.len()..]
        .iter()
        .all(|i| matches!(i, Item::Token(_))));
    let mtmd = read_f32(&dir.join(format!("{stem}.embd.f32")));
    assert_eq!(rows.len(), mtmd.len());
    let max = rows
        .iter()
        .zip(&mtmd)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(max <= bound, "{family}: max-abs {max} from mtmd's rows");
    out.pieces
}

#[test]
fn idefics3_image_becomes_mtmd_layout_and_rows() {
    let pieces = check_family("idefics3", "idefics3-tiny-q8_0.gguf", 32, 2.5e-3);
    // Tiles and the overview are causal rows.
    assert!(pieces.iter().all(|p| !matches!(
        p,
        PromptPiece::Embeddings {
            bidirectional: true,
            ..
        }
    )));
}

#[test]
fn qwen25vl_image_becomes_mtmd_layout_grid_and_rows() {
    let pieces = check_family("qwen25vl", "qwen25vl-tiny-q8_0.gguf", 32, 2.5e-3);
    // The grid piece comes right before the rows and covers them.
    let k = pieces
        .iter()
        .position(|p| matches!(p, PromptPiece::ImageGrid { .. }))
        .expect("no grid piece");
    let (PromptPiece::ImageGrid { rows, cols }, PromptPiece::Embeddings { n, .. }) =
        (&pieces[k], &pieces[k + 1])
    else {
        panic!("the grid is not followed by the image's rows");
    };
    assert_eq!(rows * cols, *n);
}
