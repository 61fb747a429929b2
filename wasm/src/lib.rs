//! weft-wasm: Weft in the browser. The same engine, models, tokenizers, chat templates and
//! sampler as natively, on WebGPU (the wgpu backend, with readback awaited rather than blocked
//! on) or on the CPU backend (single-threaded, built with `simd128`).
//!
//! [`WeftEngine`] is the raw wasm-bindgen class; `web/js/weft.js` wraps it (in a Web Worker)
//! into the documented JS API (`Weft.create`, `load`, `for await (... of chat(...))`).
//! The model bytes are streamed in with [`WeftEngine::begin_load`] / [`WeftEngine::push_chunk`]
//! / [`WeftEngine::finish_load`] so the host never holds a second full copy of the file.

mod embed;
mod generate;
mod js;
mod options;
mod vision;

use std::sync::Arc;

use wasm_bindgen::prelude::*;
use weft_core::backend::wgpu::{AdapterSummary, WgpuBackend, WgpuOptions};
use weft_core::backend::{cpu::CpuBackend, Backend};
use weft_core::engine::EngineConfig;
use weft_core::generation::Session;
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::KvCacheConfig;
use weft_core::loaded::{LoadError, LoadedModel};

use crate::js::error;
use crate::options::CreateOptions;

/// Default context length (tokens).
const DEFAULT_CTX: usize = 2048;

/// A loaded model and its single chat sequence (whose cached prefix the next request reuses).
struct Loaded {
    model: LoadedModel,
    session: Session,
    name: String,
    file_size: usize,
    n_ctx: usize,
    /// An embedder for this model, made from its file on first `embed`.
    embedder: Option<weft_core::embed::Embedder>,
    /// Its vision projector, once `finish_projector` loaded one.
    vision: Option<vision::Vision>,
}

/// The engine as exported to JavaScript.
#[wasm_bindgen]
pub struct WeftEngine {
    /// `webgpu` or `cpu`.
    backend: String,
    /// A backend made by `create` and not yet used by a load.
    fresh: Option<Box<dyn Backend>>,
    adapter: Option<AdapterSummary>,
    /// WebGPU features in use: (subgroups, shader-f16).
    features: (bool, bool, bool),
    /// The WebGPU options `create` was given (reused when a load reopens the device).
    gpu_opts: WgpuOptions,
    ctx: usize,
    incoming: Option<Vec<u8>>,
    loaded: Option<Loaded>,
    /// A loaded embedding model (instead of a chat model).
    encoder: Option<embed::Encoder>,
    /// What stands for an image in `chat` messages' text: random per engine, so no text a
    /// page passes on can pose as an image.
    marker: String,
}

/// Whether `navigator.gpu` exists in this global scope.
fn has_webgpu() -> bool {
    let g = js_sys::global();
    js_sys::Reflect::get(&g, &"navigator".into())
        .ok()
        .filter(|n| !n.is_undefined())
        .and_then(|n| js_sys::Reflect::get(&n, &"gpu".into()).ok())
        .is_some_and(|gpu| !gpu.is_undefined() && !gpu.is_null())
}

async fn open_webgpu(opts: &WgpuOptions) -> Result<WgpuBackend, JsValue> {
    if !has_webgpu() {
        return Err(error(weft_core::backend::wgpu::NO_WEBGPU));
    }
    WgpuBackend::new_async(opts).await.map_err(error)
}

/// The facts `info` reports of an open WebGPU backend: its adapter and the features in use.
fn gpu_facts(b: &WgpuBackend) -> (Option<AdapterSummary>, (bool, bool, bool)) {
    (
        Some(b.adapter().clone()),
        (b.uses_subgroups(), b.uses_f16(), b.uses_packed_builtins()),
    )
}

#[wasm_bindgen]
impl WeftEngine {
    /// Makes an engine. `options`: `{backend: "webgpu" | "cpu" | "auto", contextSize,
    /// subgroups, shaderF16}` (the last two: `false` turns the WebGPU feature off).
    /// `webgpu` fails with a clear error when the browser has no WebGPU; `auto` then falls back
    /// to the CPU.
    pub async fn create(options: JsValue) -> Result<WeftEngine, JsValue> {
        let o: CreateOptions = js::from_js(&options, "Weft.create options")?;
        let want = o.backend.as_deref().unwrap_or("auto").to_ascii_lowercase();
        let gpu_opts = o.wgpu();
        let cpu = || {
            (
                "cpu".to_string(),
                Box::new(CpuBackend::new(1)) as Box<dyn Backend>,
            )
        };
        let ((backend, fresh), (adapter, features)) = match want.as_str() {
            "webgpu" | "gpu" | "wgpu" => {
                let b = open_webgpu(&gpu_opts).await?;
                let facts = gpu_facts(&b);
                (("webgpu".into(), Box::new(b) as Box<dyn Backend>), facts)
            }
            "cpu" => (cpu(), (None, (false, false, false))),
            "auto" => match open_webgpu(&gpu_opts).await {
                Ok(b) => {
                    let facts = gpu_facts(&b);
                    (("webgpu".into(), Box::new(b) as Box<dyn Backend>), facts)
                }
                Err(_) => (cpu(), (None, (false, false, false))),
            },
            other => {
                return Err(error(format!(
                    "unknown backend {other:?} (expected \"webgpu\", \"cpu\" or \"auto\")"
                )))
            }
        };
        Ok(WeftEngine {
            backend,
            fresh: Some(fresh),
            adapter,
            features,
            gpu_opts,
            ctx: o.context_size.unwrap_or(DEFAULT_CTX).max(16),
            incoming: None,
            loaded: None,
            encoder: None,
            marker: format!(
                "<__weft_image_{:x}{:x}__>",
                (js_sys::Math::random() * 4294967296.0) as u64,
                (js_sys::Math::random() * 4294967296.0) as u64
            ),
        })
    }

    /// The backend in use: `webgpu` or `cpu`.
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        self.backend.clone()
    }

    /// Starts receiving a model file of `size` bytes (reserved up front, so a file that cannot
    /// fit in the 4 GiB wasm memory fails here, clearly).
    pub fn begin_load(&mut self, size: f64) -> Result<(), JsValue> {
        self.loaded = None;
        self.encoder = None;
        self.incoming = None;
        self.begin_bytes(size, "model")
    }

    /// Appends the next piece of the model file.
    pub fn push_chunk(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        let v = self
            .incoming
            .as_mut()
            .ok_or_else(|| error("push_chunk before begin_load"))?;
        v.try_reserve(chunk.len())
            .map_err(|_| error("out of memory while receiving the model"))?;
        v.extend_from_slice(chunk);
        Ok(())
    }

    /// Parses the received file and loads it onto the backend. `on_progress(done, total)` is
    /// called per tensor uploaded; then one warm-up step compiles the kernels. Returns `info()`.
    pub async fn finish_load(
        &mut self,
        name: String,
        on_progress: Option<js_sys::Function>,
    ) -> Result<JsValue, JsValue> {
        let bytes = self
            .incoming
            .take()
            .ok_or_else(|| error("finish_load before begin_load"))?;
        let file_size = bytes.len();
        let file = Arc::new(
            ModelFile::from_vec(bytes)
                .map_err(|e| error(format!("not a usable GGUF model: {e}")))?,
        );
        let encoder = file
            .gguf
            .architecture()
            .is_some_and(|a| weft_core::model::ENCODER_ARCHITECTURES.contains(&a));
        let backend: Box<dyn Backend> = match self.fresh.take() {
            Some(b) => b,
            None if self.backend == "webgpu" => {
                let b = open_webgpu(&self.gpu_opts).await?;
                (self.adapter, self.features) = gpu_facts(&b);
                Box::new(b)
            }
            None => Box::new(CpuBackend::new(1)),
        };
        if encoder {
            self.load_encoder(file, backend, name, file_size).await?;
            return self.info();
        }
        let n_ctx_train = file
            .gguf
            .arch_key("context_length")
            .and_then(|v| v.as_u64());
        let n_ctx = match n_ctx_train {
            Some(t) if t > 0 => self.ctx.min(t as usize),
            _ => self.ctx,
        };
        let cfg = EngineConfig {
            kv: KvCacheConfig {
                n_ctx,
                n_seq: 1,
                ..Default::default()
            },
            max_batch: 256,
        };
        let progress = |phase: &str, done: usize, total: usize| {
            if let Some(f) = &on_progress {
                let _ = f.call3(
                    &JsValue::NULL,
                    &phase.into(),
                    &(done as f64).into(),
                    &(total as f64).into(),
                );
            }
        };
        let mut model =
            LoadedModel::from_file(file, backend, cfg, &mut |d, t| progress("upload", d, t))
                .map_err(|e| match e {
                    LoadError::Tokenizer(e) => error(format!("unsupported model tokenizer: {e}")),
                    e => error(format!("cannot load the model: {e}")),
                })?;
        model.template = model.template.map(|t| t.with_now(js::unix_secs()));
        // One step on a throw-away position compiles every kernel a step needs, so the first
        // answer is not slowed (or its timing skewed) by shader compilation.
        progress("compile", 0, 1);
        js::yield_now().await;
        let mut session = model.session().map_err(error)?;
        let warm = model.tokenizer.bos().unwrap_or(0);
        model
            .engine
            .prefill_async(session.seq(), &[warm, warm])
            .await
            .map_err(|e| error(format!("the first step failed: {e}")))?;
        session.reset(&mut model.engine).map_err(error)?;
        progress("compile", 1, 1);
        self.loaded = Some(Loaded {
            model,
            session,
            name,
            file_size,
            n_ctx,
            embedder: None,
            vision: None,
        });
        self.info()
    }

    /// Model, backend, adapter and limits, as a plain object.
    pub fn info(&self) -> Result<JsValue, JsValue> {
        let adapter = self.adapter.as_ref().map(|a| {
            serde_json::json!({
                "name": a.name,
                "backend": a.backend,
                "deviceType": a.device_type,
                "driver": a.driver,
                "maxStorageBufferBindingSize": a.max_storage_buffer_binding_size,
                "maxBufferSize": a.max_buffer_size,
                "maxStorageBuffersPerShaderStage": a.max_storage_buffers_per_shader_stage,
                "maxComputeInvocationsPerWorkgroup": a.max_compute_invocations_per_workgroup,
                "shaderF16": a.f16,
                "subgroups": a.subgroups.map(|(lo, hi)| serde_json::json!({"min": lo, "max": hi})),
            })
        });
        let model = self.encoder_info().or_else(|| {
            self.loaded.as_ref().map(|l| {
                let i = l.model.engine.model_info();
                serde_json::json!({
                    "name": l.name,
                    "architecture": i.architecture,
                    "fileSize": l.file_size,
                    "vocab": i.n_vocab,
                    "layers": i.n_layer,
                    "embedding": i.n_embd,
                    "contextSize": l.n_ctx,
                    "trainedContext": i.n_ctx_train,
                    "kind": "chat",
                    "chatTemplate": l.model.chat_template().is_some(),
                    "projector": l.vision.as_ref().map(|v| serde_json::json!({
                        "name": v.name,
                        "type": v.projector_type(),
                        "backend": v.backend(),
                        "fileSize": v.file_size,
                    })),
                })
            })
        });
        js::to_js(&serde_json::json!({
            "backend": self.backend,
            "adapter": adapter,
            // WebGPU features the kernels use (those of `adapter` not turned off).
            "features": {
                "subgroups": self.features.0,
                "shaderF16": self.features.1,
                "packedDot": self.features.2,
            },
            "model": model,
            "threads": 1,
            "simd128": cfg!(target_feature = "simd128"),
        }))
    }

    /// Token ids of `text` as the model's tokenizer splits it (with its BOS rule).
    pub fn tokenize(&self, text: &str, special: Option<bool>) -> Result<Vec<u32>, JsValue> {
        let l = self.model()?;
        Ok(l.model.encode_prompt(text, special.unwrap_or(false)))
    }

    /// The text of token ids.
    pub fn detokenize(&self, ids: &[u32]) -> Result<String, JsValue> {
        Ok(self.model()?.model.tokenizer.decode(ids, false))
    }

    /// Generates a reply to `messages` (OpenAI-style `[{role, content}]`) with the model's chat
    /// template. `on_text(delta)` receives the streamed text; `signal` (an `AbortSignal`) stops
    /// early. Resolves to `{text, tokens, finishReason, usage, timings}`.
    pub async fn chat(
        &mut self,
        messages: JsValue,
        options: JsValue,
        on_text: js_sys::Function,
        signal: JsValue,
        images: JsValue,
    ) -> Result<JsValue, JsValue> {
        let msgs: Vec<weft_core::chat::Message> = js::from_js(&messages, "messages")?;
        let opts: options::GenOptions = js::from_js(&options, "chat options")?;
        let images = vision::image_bytes(&images)?;
        let marker = self.marker.clone();
        let l = self.model_mut()?;
        let t = l.model.chat_template().ok_or_else(|| {
            error("this model has no chat template; use complete() with a raw prompt")
        })?;
        if msgs.is_empty() {
            return Err(error("messages must not be empty"));
        }
        let text = t
            .render(&msgs, None, true, opts.template_vars.clone())
            .map_err(|e| error(format!("chat template: {e}")))?;
        let input = if images.is_empty() {
            generate::Input::Ids(l.model.encode_prompt(&text, true))
        } else {
            image_input(l, &text, &marker, &images, true).await?
        };
        generate::run(l, input, &opts, &on_text, &signal).await
    }

    /// Continues the raw text `prompt` (no chat template); streams and resolves as `chat`.
    /// `images` (encoded bytes) go where the prompt says `<__media__>`, in order, or before
    /// the text when it says it nowhere.
    pub async fn complete(
        &mut self,
        prompt: String,
        options: JsValue,
        on_text: js_sys::Function,
        signal: JsValue,
        images: JsValue,
    ) -> Result<JsValue, JsValue> {
        let opts: options::GenOptions = js::from_js(&options, "complete options")?;
        let images = vision::image_bytes(&images)?;
        let l = self.model_mut()?;
        let input = if images.is_empty() {
            generate::Input::Ids(l.model.encode_prompt(&prompt, opts.special))
        } else {
            let m = vision::MEDIA_MARKER;
            let prompt = match prompt.contains(m) {
                true => prompt,
                false => m.repeat(images.len()) + &prompt,
            };
            image_input(l, &prompt, m, &images, opts.special).await?
        };
        generate::run(l, input, &opts, &on_text, &signal).await
    }

    /// The projector's output for one encoded image: `{embeddings: Float32Array (rows x dim,
    /// row-major), rows, dim, positions}` (`positions`: what the image takes in a prompt).
    pub async fn embed_image(&mut self, image: Vec<u8>) -> Result<JsValue, JsValue> {
        let l = self.model_mut()?;
        let (data, rows, dim, positions) = vision::embed_image(l, &image).await?;
        let out = js_sys::Object::new();
        let set = |k: &str, v: JsValue| js_sys::Reflect::set(&out, &k.into(), &v).map(|_| ());
        set(
            "embeddings",
            js_sys::Float32Array::from(data.as_slice()).into(),
        )?;
        set("rows", (rows as f64).into())?;
        set("dim", (dim as f64).into())?;
        set("positions", (positions as f64).into())?;
        Ok(out.into())
    }

    /// The text that stands for an image in `chat` messages (random per engine): the JS
    /// package puts one per image in a message's text.
    #[wasm_bindgen(getter)]
    pub fn image_marker(&self) -> String {
        self.marker.clone()
    }

    /// Starts receiving a vision projector (mmproj GGUF) of `size` bytes for the loaded chat
    /// model; its bytes come with `push_chunk`, then `finish_projector`.
    pub fn begin_projector(&mut self, size: f64) -> Result<(), JsValue> {
        self.incoming = None;
        self.model()?;
        self.begin_bytes(size, "projector")
    }

    /// Loads the received projector for the loaded model (replacing one loaded before).
    /// Returns `info()`.
    pub async fn finish_projector(&mut self, name: String) -> Result<JsValue, JsValue> {
        let bytes = self
            .incoming
            .take()
            .ok_or_else(|| error("finish_projector before begin_projector"))?;
        self.model_mut()?.vision = None;
        let mm = vision::Vision::read(bytes)?;
        let gpu: Option<Box<dyn Backend>> =
            if self.backend == "webgpu" && vision::Vision::gpu_capable(&mm) {
                Some(Box::new(open_webgpu(&self.gpu_opts).await?))
            } else {
                None
            };
        let l = self.model_mut()?;
        let v = vision::Vision::load(&mm, gpu, name, l)?;
        l.vision = Some(v);
        // The cached conversation's images were encoded by another projector.
        l.session.reset(&mut l.model.engine).map_err(error)?;
        self.info()
    }

    /// Forgets the cached conversation (the next request prefills from scratch).
    pub fn reset(&mut self) -> Result<(), JsValue> {
        let l = self.model_mut()?;
        l.session.reset(&mut l.model.engine).map_err(error)
    }
}

/// The prompt of rendered `text` with `images` in place of its `marker`s.
async fn image_input(
    l: &mut Loaded,
    text: &str,
    marker: &str,
    images: &[Vec<u8>],
    special: bool,
) -> Result<generate::Input, JsValue> {
    let (prompt, placeholder, image_tokens) =
        vision::build(l, text, marker, images, special).await?;
    Ok(generate::Input::Prompt {
        prompt,
        placeholder,
        image_tokens,
    })
}

impl WeftEngine {
    /// Reserves room for a file of `size` bytes (so one that cannot fit in the 4 GiB wasm
    /// memory fails here, clearly) and starts receiving it.
    fn begin_bytes(&mut self, size: f64, what: &str) -> Result<(), JsValue> {
        if !(size.is_finite() && size >= 0.0) {
            return Err(error(format!(
                "{what} size must be a non-negative number of bytes"
            )));
        }
        let size = size as usize;
        let mut v = Vec::new();
        v.try_reserve_exact(size).map_err(|_| {
            error(format!(
                "out of memory: cannot hold a {:.0} MiB {what} in the browser's wasm memory \
                 (4 GiB at most, often less)",
                size as f64 / 1048576.0
            ))
        })?;
        self.incoming = Some(v);
        Ok(())
    }

    fn no_model(&self) -> JsValue {
        if self.encoder.is_some() {
            error("this is an embedding model: it does not generate text (use embed())")
        } else {
            error("no model loaded: call load() first")
        }
    }

    fn model(&self) -> Result<&Loaded, JsValue> {
        self.loaded.as_ref().ok_or_else(|| self.no_model())
    }

    fn model_mut(&mut self) -> Result<&mut Loaded, JsValue> {
        if self.loaded.is_none() {
            return Err(self.no_model());
        }
        Ok(self.loaded.as_mut().expect("checked"))
    }
}
