//! Images in the browser: a vision projector (mmproj GGUF) loaded beside the chat model, and
//! prompts whose images stand in the text as markers, split there and filled with the
//! encoder's pieces (its marker tokens and embedding rows) — the server's way
//! (native-server's common/images.rs), with the same decoder and encoder as natively.
//!
//! The encoder runs on its own backend: on WebGPU (a second device) when the engine is on
//! WebGPU and the family's encoder awaits its readback (Gemma 3 so far), else on the CPU
//! (wasm SIMD, one thread) — the other families read back synchronously, which WebGPU cannot
//! do in a browser. The language model takes the image rows (attending to each other both
//! ways) on the engine's backend either way.

use std::sync::Arc;

use wasm_bindgen::prelude::*;
use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::Backend;
use weft_core::engine::{Prompt, PromptPiece};
use weft_core::gguf::ModelFile;
use weft_core::model::vision::encoder::VisionEncoder;
use weft_core::model::vision::{Mmproj, Projector};
use weft_core::vision::{decode_image, probe_image, DecodeLimits};

use crate::js::error;
use crate::Loaded;

/// At most this many images in one request.
pub const MAX_IMAGES: usize = 16;
/// At most this many encoded bytes of all a request's images together.
pub const MAX_IMAGE_BYTES: usize = 64 * 1024 * 1024;
/// The marker standing for an image in a `complete()` prompt (llama.cpp mtmd's default).
pub const MEDIA_MARKER: &str = "<__media__>";

/// A loaded projector.
pub struct Vision {
    encoder: VisionEncoder,
    backend: Box<dyn Backend>,
    pub name: String,
    pub file_size: usize,
}

impl Vision {
    /// Reads an mmproj file.
    pub fn read(bytes: Vec<u8>) -> Result<Mmproj, JsValue> {
        let file = Arc::new(
            ModelFile::from_vec(bytes)
                .map_err(|e| error(format!("not a usable GGUF projector: {e}")))?,
        );
        Mmproj::read(file).map_err(|e| error(format!("cannot load the projector: {e}")))
    }

    /// Whether this projector's encoder can run on a browser's WebGPU.
    pub fn gpu_capable(mm: &Mmproj) -> bool {
        matches!(mm.projector, Projector::Gemma3)
    }

    /// Loads the encoder of `mm` for the model `l`, on `gpu` when given, else on the CPU.
    pub fn load(
        mm: &Mmproj,
        gpu: Option<Box<dyn Backend>>,
        name: String,
        l: &Loaded,
    ) -> Result<Vision, JsValue> {
        let file_size = mm.file.bytes().len();
        let mut backend: Box<dyn Backend> = gpu.unwrap_or_else(|| Box::new(CpuBackend::new(1)));
        let n_embd = l.model.engine.model_info().n_embd;
        let encoder = VisionEncoder::load(mm, backend.as_mut(), &l.model.tokenizer, n_embd)
            .map_err(|e| error(format!("cannot load the projector: {e}")))?;
        Ok(Vision {
            encoder,
            backend,
            name,
            file_size,
        })
    }

    /// The backend the encoder runs on: `webgpu` or `cpu`.
    pub fn backend(&self) -> &'static str {
        match self.backend.name() {
            "wgpu" => "webgpu",
            _ => "cpu",
        }
    }

    /// `clip.projector_type` of the loaded projector.
    pub fn projector_type(&self) -> &'static str {
        self.encoder.projector_type()
    }

    /// The token id the penalties' history sees at image rows.
    pub fn placeholder(&self) -> u32 {
        self.encoder.placeholder()
    }
}

/// Encoded image bytes (PNG, JPEG, WebP, GIF) from a JS array of `Uint8Array`s.
pub fn image_bytes(images: &JsValue) -> Result<Vec<Vec<u8>>, JsValue> {
    if images.is_undefined() || images.is_null() {
        return Ok(Vec::new());
    }
    if !js_sys::Array::is_array(images) {
        return Err(error("images must be an array"));
    }
    let list = js_sys::Array::from(images);
    if list.length() as usize > MAX_IMAGES {
        return Err(error(format!(
            "too many images: at most {MAX_IMAGES} per request"
        )));
    }
    let mut total = 0usize;
    let mut out = Vec::new();
    for (i, v) in list.iter().enumerate() {
        if !v.is_instance_of::<js_sys::Uint8Array>() {
            return Err(error(format!(
                "image {i}: expected the encoded bytes of a PNG, JPEG, WebP or GIF image"
            )));
        }
        let a = js_sys::Uint8Array::from(v);
        total += a.length() as usize;
        if total > MAX_IMAGE_BYTES {
            return Err(error(format!(
                "the request's images are larger than {} MiB together",
                MAX_IMAGE_BYTES / (1024 * 1024)
            )));
        }
        out.push(a.to_vec());
    }
    Ok(out)
}

/// The prompt of `text` with `images` in place of each `marker` in it. The first text piece
/// is tokenized with the model's BOS rule; `special` parses control-token text. Every
/// position (images counted from their headers alone) is checked against the context before
/// any image is decoded.
pub async fn build(
    l: &mut Loaded,
    text: &str,
    marker: &str,
    images: &[Vec<u8>],
    special: bool,
) -> Result<(Prompt, u32, usize), JsValue> {
    let Loaded {
        model,
        vision,
        n_ctx,
        ..
    } = l;
    let v = vision.as_mut().ok_or_else(|| {
        error(
            "this model has no vision projector loaded: call loadProjector() with its \
             mmproj GGUF before passing images",
        )
    })?;
    let segments: Vec<&str> = text.split(marker).collect();
    if segments.len() != images.len() + 1 {
        return Err(error(format!(
            "the prompt places {} image(s) but {} were given",
            segments.len() - 1,
            images.len()
        )));
    }
    let tok = &model.tokenizer;
    let texts: Vec<Vec<u32>> = segments
        .iter()
        .enumerate()
        .map(|(i, s)| match i {
            0 => tok.encode_prompt(s, special),
            _ => tok.encode(s, false, special),
        })
        .collect();
    let limits = DecodeLimits::default();
    let mut n: usize = texts.iter().map(Vec::len).sum();
    let mut image_tokens = 0;
    for (i, b) in images.iter().enumerate() {
        let (w, h) = probe_image(b, &limits).map_err(|e| error(format!("image {i}: {e}")))?;
        image_tokens += v.encoder.n_tokens(w, h);
    }
    n += image_tokens;
    if n >= *n_ctx {
        return Err(error(format!(
            "the prompt with its {} image(s) takes {n} tokens but the context holds {}",
            images.len(),
            n_ctx
        )));
    }
    let mut texts = texts.into_iter();
    let mut pieces = Vec::new();
    push_tokens(&mut pieces, texts.next());
    for (i, b) in images.iter().enumerate() {
        let img = decode_image(b, &limits).map_err(|e| error(format!("image {i}: {e}")))?;
        let enc = v
            .encoder
            .encode_async(v.backend.as_mut(), &img)
            .await
            .map_err(|e| error(format!("encoding image {i}: {e}")))?;
        pieces.extend(enc.pieces);
        push_tokens(&mut pieces, texts.next());
    }
    Ok((Prompt { pieces }, v.placeholder(), image_tokens))
}

/// The projector's output for one image: its embedding rows (row-major), how many, their
/// width, and the positions the image takes in a prompt (markers included).
pub async fn embed_image(
    l: &mut Loaded,
    bytes: &[u8],
) -> Result<(Vec<f32>, usize, usize, usize), JsValue> {
    let v = l
        .vision
        .as_mut()
        .ok_or_else(|| error("no vision projector loaded: call loadProjector() first"))?;
    let img = decode_image(bytes, &DecodeLimits::default())
        .map_err(|e| error(format!("image 0: {e}")))?;
    let enc = v
        .encoder
        .encode_async(v.backend.as_mut(), &img)
        .await
        .map_err(|e| error(format!("encoding image 0: {e}")))?;
    let (mut data, mut rows) = (Vec::new(), 0);
    for p in &enc.pieces {
        if let PromptPiece::Embeddings { data: d, n, .. } = p {
            data.extend_from_slice(d);
            rows += n;
        }
    }
    let dim = data.len().checked_div(rows).unwrap_or(0);
    Ok((data, rows, dim, enc.n_tokens))
}

fn push_tokens(pieces: &mut Vec<PromptPiece>, t: Option<Vec<u32>>) {
    if let Some(t) = t.filter(|t| !t.is_empty()) {
        pieces.push(PromptPiece::Tokens(t));
    }
}
