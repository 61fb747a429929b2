//! Image input of the chat surfaces, in one place: OpenAI `image_url` content parts (data
//! URIs only), Ollama's base64 `images`, the chat UI's uploaded images. Each image is taken
//! out of its message and a marker left in the text; the conversation is rendered with the
//! chat template as usual, then split at the markers, and the model's vision encoder puts
//! each image's pieces (its marker tokens and embedding rows) in its place.
//!
//! Bounds, all checked before any pixel is decoded: at most `max_images` images and
//! `max_bytes` encoded bytes in a request; each image's width x height from its header at
//! most `max_pixels` (a decompression bomb is refused there); the prompt, image tokens
//! counted, within the context. Every refusal is a 400.
//!
//! OpenAI `video_url` parts are decoded into frames beforehand (`video.rs`, handed over with
//! [`Images::with_videos`]); each frame joins the images here as pixels, after a text label
//! with its time.

use std::collections::VecDeque;
use std::sync::Arc;

use base64::Engine as _;
use weft_core::chat::{Content, ContentPart, Message};
use weft_core::engine::{Prompt, PromptPiece};
use weft_core::scheduler::MediaPrompt;
use weft_core::tokenizer::Tokenizer;
use weft_core::vision::{decode_image, probe_image, DecodeLimits, ImageError, RgbImage};

use super::ids;
use crate::registry::Vision;
use crate::server::error::ApiError;
use crate::server::generate::ChatPrompt;
use crate::server::leased::Leased;

/// Per-request bounds on images (`--max-images`, `--max-image-bytes`, `--max-image-pixels`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageLimits {
    pub max_images: usize,
    /// Encoded bytes of all the request's images together.
    pub max_bytes: usize,
    /// Largest width x height of one image.
    pub max_pixels: u64,
}

impl Default for ImageLimits {
    fn default() -> Self {
        ImageLimits {
            max_images: 8,
            max_bytes: 16 * 1024 * 1024,
            max_pixels: DecodeLimits::default().max_pixels,
        }
    }
}

/// One image of a request: encoded bytes (decoded when the prompt is built), or a video
/// frame already decoded.
#[derive(Debug, PartialEq)]
enum Blob {
    Encoded(Vec<u8>),
    Frame(RgbImage),
}

/// The images of one request, in prompt order, and the marker standing for each in the text.
pub struct Images {
    /// Random per request, so no text a client writes can pose as an image.
    marker: String,
    blobs: Vec<Blob>,
    bytes: usize,
    limits: ImageLimits,
    /// The decoded frames of the request's `video_url` parts, in the order they come.
    videos: VecDeque<Vec<super::video::Frame>>,
}

/// The model's vision encoder, or the 400 `vision_not_supported` of a text-only model.
pub fn vision_of(m: &Leased) -> Result<Arc<Vision>, ApiError> {
    m.vision.clone().ok_or_else(|| {
        ApiError::invalid_code(
            "vision_not_supported",
            format!(
                "model {:?} does not accept images: it has no vision projector (start the \
                 server with --mmproj, or put its mmproj-*.gguf beside it)",
                m.name
            ),
        )
    })
}

/// A 400 for input the loaded model cannot take.
fn audio() -> ApiError {
    ApiError::invalid("audio input is not supported by the loaded model")
}

/// The 400 of an image the decoder refused.
fn bad_image(i: usize, e: ImageError) -> ApiError {
    ApiError::invalid(format!("image {i}: {e}"))
}

impl Images {
    pub fn new(limits: &ImageLimits) -> Images {
        Images {
            marker: format!("<__image_{}__>", ids::unique()),
            blobs: Vec::new(),
            bytes: 0,
            limits: limits.clone(),
            videos: VecDeque::new(),
        }
    }

    /// Hands over the decoded frames of the request's `video_url` parts
    /// ([`video::decode_parts`](super::video::decode_parts)), taken in order by
    /// [`take_openai`](Self::take_openai).
    pub fn with_videos(mut self, videos: VecDeque<Vec<super::video::Frame>>) -> Self {
        self.videos = videos;
        self
    }

    /// Adds a decoded video frame (a video counts once in `max_images`, when it is decoded)
    /// and returns its marker.
    fn add_frame(&mut self, img: RgbImage) -> &str {
        self.blobs.push(Blob::Frame(img));
        &self.marker
    }

    /// The text standing for one video: each frame's time label, then its marker.
    fn add_video(&mut self) -> Result<String, ApiError> {
        let frames = self.videos.pop_front().ok_or_else(|| {
            ApiError::invalid(
                "video_url parts are only accepted by /v1/chat/completions, without the \
                 built-in tools",
            )
        })?;
        let mut text = Vec::new();
        for (t, img) in frames {
            text.push(super::video::frame_label(t));
            text.push(self.add_frame(img).to_string());
        }
        Ok(text.join("\n"))
    }

    pub fn is_empty(&self) -> bool {
        self.blobs.is_empty()
    }

    /// The images of OpenAI chat `messages` ([`take_openai`](Self::take_openai)), refused
    /// when the built-in tools' `agent` loop would run the conversation (it takes text only).
    pub fn from_openai(
        limits: &ImageLimits,
        messages: &mut [Message],
        agent: bool,
    ) -> Result<Images, ApiError> {
        Images::new(limits).take_all(messages, agent)
    }

    /// [`from_openai`](Self::from_openai) on these images (with their videos' frames).
    pub fn take_all(mut self, messages: &mut [Message], agent: bool) -> Result<Images, ApiError> {
        self.take_openai(messages)?;
        self.check_agent(agent)?;
        Ok(self)
    }

    /// Refuses images in a conversation the built-in tools' loop runs.
    pub fn check_agent(&self, agent: bool) -> Result<(), ApiError> {
        if agent && !self.is_empty() {
            return Err(ApiError::invalid(
                "images cannot be combined with the built-in tools (skills, code execution) yet",
            ));
        }
        Ok(())
    }

    /// Adds an image given as base64 (a `data:` URI prefix is accepted) and returns the
    /// marker to put in the text where it goes.
    pub fn add_base64(&mut self, data: &str) -> Result<&str, ApiError> {
        let data = match data.strip_prefix("data:") {
            Some(uri) => match uri.split_once(',') {
                Some((kind, body)) if kind.ends_with(";base64") => body,
                _ => {
                    return Err(ApiError::invalid(
                        "an image data URI must be base64 (data:image/...;base64,...)",
                    ))
                }
            },
            None => data,
        };
        let i = self.blobs.len();
        let images = self
            .blobs
            .iter()
            .filter(|b| matches!(b, Blob::Encoded(_)))
            .count();
        if images >= self.limits.max_images {
            return Err(ApiError::invalid(format!(
                "too many images: at most {} per request",
                self.limits.max_images
            )));
        }
        // Checked on the encoded length, before decoding allocates anything.
        let estimate = data.len() / 4 * 3;
        if self.bytes + estimate > self.limits.max_bytes {
            return Err(ApiError::invalid(format!(
                "the request's images are larger than {} bytes together",
                self.limits.max_bytes
            )));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| ApiError::invalid(format!("image {i} is not valid base64: {e}")))?;
        self.bytes += bytes.len();
        self.blobs.push(Blob::Encoded(bytes));
        Ok(&self.marker)
    }

    /// Adds an OpenAI `image_url` (only `data:` URIs: remote URLs are not fetched).
    pub fn add_url(&mut self, url: &str) -> Result<&str, ApiError> {
        if url.starts_with("http://") || url.starts_with("https://") {
            return Err(ApiError::invalid(
                "remote image URLs are not fetched: send the image as a data URI \
                 (data:image/png;base64,...)",
            ));
        }
        if !url.starts_with("data:") {
            return Err(ApiError::invalid(
                "image_url.url must be a data URI (data:image/png;base64,...)",
            ));
        }
        self.add_base64(url)
    }

    /// Adds Ollama's `images` (base64 strings) and returns the markers to put before the
    /// message's text.
    pub fn add_list(&mut self, list: Option<&[serde_json::Value]>) -> Result<String, ApiError> {
        let mut marks = String::new();
        for v in list.unwrap_or_default() {
            let s = v
                .as_str()
                .ok_or_else(|| ApiError::invalid("images must be base64 strings"))?;
            marks.push_str(self.add_base64(s)?);
        }
        Ok(marks)
    }

    /// Takes OpenAI `image_url` parts out of `messages` (each becomes a text part holding the
    /// marker), and `video_url` parts (each becomes its frames' labels and markers, from the
    /// frames given to [`with_videos`](Self::with_videos)); audio parts are refused.
    pub fn take_openai(&mut self, messages: &mut [Message]) -> Result<(), ApiError> {
        for m in messages {
            let Some(Content::Parts(parts)) = &mut m.content else {
                continue;
            };
            for p in parts.iter_mut() {
                match p.kind.as_str() {
                    "image_url" => {
                        let url = match p.extra.get("image_url") {
                            Some(serde_json::Value::String(s)) => s.as_str(),
                            Some(v) => v.get("url").and_then(|u| u.as_str()).unwrap_or(""),
                            None => "",
                        };
                        if url.is_empty() {
                            return Err(ApiError::invalid("an image_url part has no url"));
                        }
                        let marker = self.add_url(url)?.to_string();
                        *p = text_part(marker);
                    }
                    "video_url" => *p = text_part(self.add_video()?),
                    "input_audio" | "audio_url" | "audio" => return Err(audio()),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The chat prompt with the images in place of their markers (unchanged without images).
    pub async fn attach(
        self,
        m: &Leased,
        n_ctx: usize,
        mut prompt: ChatPrompt,
    ) -> Result<ChatPrompt, ApiError> {
        if self.is_empty() {
            return Ok(prompt);
        }
        let (ids, media) = self.build(m, n_ctx, &prompt.text).await?;
        prompt.ids = ids;
        prompt.media = Some(media);
        Ok(prompt)
    }

    /// [`build`](Self::build) for a prompt given as its rendered `text` and `ids`: the ids
    /// and no media prompt when there is no image.
    pub async fn attach_text(
        self,
        m: &Leased,
        n_ctx: usize,
        text: &str,
        ids: Vec<u32>,
    ) -> Result<(Vec<u32>, Option<Arc<MediaPrompt>>), ApiError> {
        if self.is_empty() {
            return Ok((ids, None));
        }
        let (ids, media) = self.build(m, n_ctx, text).await?;
        Ok((ids, Some(media)))
    }

    /// The prompt of rendered `text` (markers in it) with the images encoded: the cache keys
    /// a request carries as its ids, and the prompt itself.
    pub async fn build(
        self,
        m: &Leased,
        n_ctx: usize,
        text: &str,
    ) -> Result<(Vec<u32>, Arc<MediaPrompt>), ApiError> {
        let vision = vision_of(m)?;
        let segments: Vec<String> = text.split(&self.marker).map(str::to_string).collect();
        if segments.len() != self.blobs.len() + 1 {
            return Err(ApiError::invalid(
                "the model's chat template did not place every image (an image in a message \
                 it leaves out?)",
            ));
        }
        let tok = m.tokenizer.clone();
        let job = move || self.encode(&vision, &tok, &segments, n_ctx);
        tokio::task::spawn_blocking(job)
            .await
            .map_err(|e| ApiError::internal(format!("image encoding stopped: {e}")))?
    }

    /// Tokenizes the text between images, counts every position (images from their headers
    /// only), then decodes and encodes the images one at a time.
    fn encode(
        &self,
        vision: &Vision,
        tok: &Tokenizer,
        segments: &[String],
        n_ctx: usize,
    ) -> Result<(Vec<u32>, Arc<MediaPrompt>), ApiError> {
        let limits = DecodeLimits {
            max_pixels: self.limits.max_pixels,
            ..DecodeLimits::default()
        };
        let texts: Vec<Vec<u32>> = segments
            .iter()
            .enumerate()
            .map(|(i, s)| match i {
                0 => tok.encode_prompt(s, true),
                _ => tok.encode(s, false, true),
            })
            .collect();
        let mut n: usize = texts.iter().map(Vec::len).sum();
        for (i, b) in self.blobs.iter().enumerate() {
            let (w, h) = match b {
                Blob::Encoded(b) => probe_image(b, &limits).map_err(|e| bad_image(i, e))?,
                Blob::Frame(f) => (f.width, f.height),
            };
            n += vision.n_tokens(w, h);
        }
        if n >= n_ctx {
            return Err(ApiError::invalid_code(
                "context_length_exceeded",
                format!(
                    "the prompt with its {} image(s) takes {n} tokens but the context holds \
                     {n_ctx}",
                    self.blobs.len()
                ),
            ));
        }
        let mut texts = texts.into_iter();
        let mut pieces = Vec::new();
        push_tokens(&mut pieces, texts.next());
        for (i, b) in self.blobs.iter().enumerate() {
            let decoded;
            let img = match b {
                Blob::Encoded(b) => {
                    decoded = decode_image(b, &limits).map_err(|e| bad_image(i, e))?;
                    &decoded
                }
                Blob::Frame(f) => f,
            };
            let enc = vision
                .encode(img)
                .map_err(|e| ApiError::internal(format!("encoding image {i}: {e}")))?;
            pieces.extend(enc.pieces);
            push_tokens(&mut pieces, texts.next());
        }
        let media = MediaPrompt {
            prompt: Prompt { pieces },
            placeholder: vision.placeholder(),
        };
        Ok((media.keys(), Arc::new(media)))
    }
}

fn text_part(text: String) -> ContentPart {
    ContentPart {
        kind: "text".into(),
        text: Some(text),
        extra: Default::default(),
    }
}

fn push_tokens(pieces: &mut Vec<PromptPiece>, t: Option<Vec<u32>>) {
    if let Some(t) = t.filter(|t| !t.is_empty()) {
        pieces.push(PromptPiece::Tokens(t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ImageLimits {
        ImageLimits {
            max_images: 2,
            max_bytes: 100,
            max_pixels: 1 << 20,
        }
    }

    #[test]
    fn data_uris_and_bounds() {
        let mut im = Images::new(&limits());
        let marker = im
            .add_url("data:image/png;base64,AAAA")
            .unwrap()
            .to_string();
        assert!(marker.starts_with("<__image_") && marker.len() > 40);
        assert_eq!(im.blobs, vec![Blob::Encoded(vec![0, 0, 0])]);
        let e = im.add_url("https://example.invalid/cat.png").unwrap_err();
        assert!(
            e.public_message().contains("data URI"),
            "{}",
            e.public_message()
        );
        let e = im.add_url("data:image/png,notbase64").unwrap_err();
        assert!(e.public_message().contains("base64"));
        let e = im.add_base64("%%%%").unwrap_err();
        assert!(e.public_message().contains("not valid base64"));
        im.add_base64("AAAA").unwrap();
        let e = im.add_base64("AAAA").unwrap_err();
        assert!(e.public_message().contains("too many images"));
        let mut im = Images::new(&limits());
        let e = im.add_base64(&"A".repeat(200)).unwrap_err();
        assert!(e.public_message().contains("larger than 100 bytes"));
    }

    #[test]
    fn openai_parts_become_markers_and_audio_is_refused() {
        let mut msgs: Vec<Message> = serde_json::from_value(serde_json::json!([
            {"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}
            ]}
        ]))
        .unwrap();
        let mut im = Images::new(&limits());
        im.take_openai(&mut msgs).unwrap();
        let text = msgs[0].text().unwrap().unwrap();
        assert_eq!(text, format!("what is this?\n{}", im.marker));
        let mut msgs: Vec<Message> = serde_json::from_value(serde_json::json!([
            {"role": "user", "content": [
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
            ]}
        ]))
        .unwrap();
        let e = Images::new(&limits()).take_openai(&mut msgs).unwrap_err();
        assert!(e.public_message().contains("audio input is not supported"));
    }
}
