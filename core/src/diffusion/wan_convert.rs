//! `weft convert` of a diffusers Wan pipeline folder (`model_index.json` naming `WanPipeline`
//! or `WanImageToVideoPipeline`) into the files the reference server, ComfyUI and
//! stable-diffusion.cpp load:
//!
//! - the DiT as a GGUF in city96's layout (Wan's tensor names, `general.architecture = wan`,
//!   the 5-D `patch_embedding.weight` in F32, vectors / small tensors / modulations in F32,
//!   the rest as stored or in `--type`), plus `wan.*` keys for what the shapes do not say;
//!   a two-expert folder (Wan 2.2 A14B: `transformer` for high noise, `transformer_2` for low
//!   noise) gives two files;
//! - the UMT5 encoder as a GGUF in llama.cpp's `t5encoder` layout with its tokenizer;
//! - the VAE as a safetensors file under Wan's own names (ComfyUI's `wan_2.1_vae.safetensors`
//!   layout), tensors as stored.
//!
//! Names (see [`file_names`] and docs/video-generation.md): `<stem>.gguf` (or
//! `<stem>-high-noise.gguf` and `<stem>-low-noise.gguf`), `<stem>-umt5.gguf`,
//! `<stem>-vae.safetensors`, all in the output folder, so the runtime finds the companions
//! beside the model ([`super::wan_files::companions`]).

use std::path::{Path, PathBuf};

use super::files::{read_config, ModelFileError};
use super::gguf_out::{out_type, write_component, Component, Target};
use super::umt5_names::{self, umt5_gguf_name};
use super::wan_names::{dit_gguf_name, dit_metadata};
use super::wan_vae_names::vae_wan_name;
use crate::gguf::Value;
use crate::quantize::FileType;

/// The pipeline classes this converts.
pub const PIPELINES: [&str; 2] = ["WanPipeline", "WanImageToVideoPipeline"];

/// The `_class_name` of the folder's model_index.json when it is a Wan pipeline.
pub fn wan_pipeline_class(dir: &Path) -> Option<String> {
    let v = read_config(&dir.join("model_index.json")).ok()?;
    let class = v["_class_name"].as_str()?;
    PIPELINES.contains(&class).then(|| class.to_string())
}

/// What one written file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The only DiT.
    Dit,
    /// Wan 2.2 A14B's first expert (`transformer`, for t >= boundary).
    DitHighNoise,
    /// Its second expert (`transformer_2`).
    DitLowNoise,
    TextEncoder,
    Vae,
}

impl Role {
    pub fn describe(self) -> &'static str {
        match self {
            Role::Dit => "DiT",
            Role::DitHighNoise => "DiT, high-noise expert",
            Role::DitLowNoise => "DiT, low-noise expert",
            Role::TextEncoder => "UMT5 text encoder",
            Role::Vae => "VAE",
        }
    }
}

/// The file names a conversion writes for stem `stem` (see the module docs).
pub fn file_names(stem: &str, role: Role) -> String {
    match role {
        Role::Dit => format!("{stem}.gguf"),
        Role::DitHighNoise => format!("{stem}-high-noise.gguf"),
        Role::DitLowNoise => format!("{stem}-low-noise.gguf"),
        Role::TextEncoder => format!("{stem}-umt5.gguf"),
        Role::Vae => format!("{stem}-vae.safetensors"),
    }
}

/// One file written.
#[derive(Clone, Debug)]
pub struct Written {
    pub role: Role,
    pub path: PathBuf,
    pub bytes: u64,
}

/// What a conversion did: the files written, and the components model_index.json names that
/// the folder lacks (left out, e.g. a pipeline saved without its shared text encoder).
#[derive(Clone, Debug, Default)]
pub struct Converted {
    pub written: Vec<Written>,
    pub missing: Vec<String>,
}

/// Progress: the component being written (`dit`, `text-encoder`, `vae`), bytes done and
/// total for it. Returning false cancels.
pub type ProgressFn<'a> = dyn FnMut(&'static str, u64, u64) -> bool + 'a;

/// Whether model_index.json names component `name` (`["library", "Class"]`, not nulls).
fn named(index: &serde_json::Value, name: &str) -> bool {
    index[name]
        .as_array()
        .is_some_and(|a| a.len() == 2 && a.iter().all(|x| x.is_string()))
}

/// Converts the Wan pipeline folder `dir` into `out_dir` (created if missing), files named
/// from `stem` (default: the folder's name). `target` None keeps the stored float types.
pub fn convert_pipeline(
    dir: &Path,
    out_dir: &Path,
    stem: Option<&str>,
    target: Option<FileType>,
    progress: &mut ProgressFn,
) -> Result<Converted, ModelFileError> {
    let index_path = dir.join("model_index.json");
    let index = read_config(&index_path)?;
    let class = index["_class_name"].as_str().unwrap_or("");
    if !PIPELINES.contains(&class) {
        return Err(ModelFileError::Config {
            path: index_path.display().to_string(),
            message: format!(
                "_class_name {class:?} is not a Wan pipeline ({})",
                PIPELINES.join(", ")
            ),
        });
    }
    let folder = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "wan".into());
    let stem = stem.unwrap_or(&folder).to_string();
    std::fs::create_dir_all(out_dir).map_err(|e| ModelFileError::Io {
        path: out_dir.display().to_string(),
        message: e.to_string(),
    })?;
    let mut done = Converted::default();
    let component = |name: &str, done: &mut Converted| -> Option<PathBuf> {
        let sub = dir.join(name);
        if sub.is_dir() {
            Some(sub)
        } else {
            done.missing.push(name.to_string());
            None
        }
    };
    if !named(&index, "transformer") {
        return Err(ModelFileError::Config {
            path: index_path.display().to_string(),
            message: "names no transformer".into(),
        });
    }
    let pair = named(&index, "transformer_2");
    let dits: Vec<(&str, Role)> = if pair {
        vec![
            ("transformer", Role::DitHighNoise),
            ("transformer_2", Role::DitLowNoise),
        ]
    } else {
        vec![("transformer", Role::Dit)]
    };
    for (name, role) in dits {
        let Some(sub) = component(name, &mut done) else {
            return Err(ModelFileError::Io {
                path: dir.join(name).display().to_string(),
                message: "not found (model_index.json names it)".into(),
            });
        };
        let path = out_dir.join(file_names(&stem, role));
        let bytes = convert_dit(&sub, &format!("{stem}/{name}"), target, &path, progress)?;
        done.written.push(Written { role, path, bytes });
    }
    if named(&index, "text_encoder") {
        if let Some(sub) = component("text_encoder", &mut done) {
            let tokenizer = named(&index, "tokenizer").then(|| dir.join("tokenizer"));
            let path = out_dir.join(file_names(&stem, Role::TextEncoder));
            let bytes = convert_umt5(&sub, tokenizer.as_deref(), &stem, target, &path, progress)?;
            done.written.push(Written {
                role: Role::TextEncoder,
                path,
                bytes,
            });
        }
    }
    if named(&index, "vae") {
        if let Some(sub) = component("vae", &mut done) {
            let path = out_dir.join(file_names(&stem, Role::Vae));
            let bytes = convert_vae(&sub, &path, progress)?;
            done.written.push(Written {
                role: Role::Vae,
                path,
                bytes,
            });
        }
    }
    Ok(done)
}

/// A diffusers `transformer/` folder to a city96-layout DiT GGUF at `out`; the written file
/// is read back ([`super::wan_gguf::open_dit`]) so a conversion that would not load fails
/// here.
pub fn convert_dit(
    dir: &Path,
    name: &str,
    target: Target,
    out: &Path,
    progress: &mut ProgressFn,
) -> Result<u64, ModelFileError> {
    let metadata = dit_metadata(&dir.join("config.json"), name)?;
    let src = Component::open(dir)?;
    let pick = |gguf: &str, shape: &[usize], stored| {
        if gguf == "patch_embedding.weight" {
            // city96's fix_5d_tensors.py adds it back in F32.
            crate::dtype::GgmlType::F32
        } else {
            out_type(gguf, shape, stored, target)
        }
    };
    let bytes = write_component(
        &src,
        &dit_gguf_name,
        &|_| false,
        &pick,
        target,
        metadata,
        out,
        &mut |d, t| progress("dit", d, t),
    )?;
    super::wan_gguf::open_dit(out)?;
    Ok(bytes)
}

/// A transformers `UMT5EncoderModel` folder (+ its `tokenizer/` folder's tokenizer.json) to a
/// llama.cpp `t5encoder` GGUF at `out`.
pub fn convert_umt5(
    dir: &Path,
    tokenizer: Option<&Path>,
    name: &str,
    target: Target,
    out: &Path,
    progress: &mut ProgressFn,
) -> Result<u64, ModelFileError> {
    let config_path = dir.join("config.json");
    let mut metadata = umt5_metadata(&config_path, name)?;
    if let Some(tok_dir) = tokenizer {
        let path = tok_dir.join("tokenizer.json");
        let bytes = std::fs::read(&path).map_err(|e| ModelFileError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let vocab = read_config(&config_path)?["vocab_size"]
            .as_u64()
            .unwrap_or(0) as usize;
        metadata.extend(
            super::umt5_vocab::metadata(&bytes, vocab).map_err(|message| {
                ModelFileError::Config {
                    path: path.display().to_string(),
                    message,
                }
            })?,
        );
    }
    let src = Component::open(dir)?;
    // A UMT5EncoderModel folder holds the encoder only; a full UMT5 checkpoint's decoder and
    // lm_head are not used.
    let skip = |n: &str| n.starts_with("decoder.") || n == "lm_head.weight";
    write_component(
        &src,
        &umt5_gguf_name,
        &skip,
        &|gguf, shape, stored| out_type(gguf, shape, stored, target),
        target,
        metadata,
        out,
        &mut |d, t| progress("text-encoder", d, t),
    )
}

/// The `t5encoder.*` keys (as llama.cpp's T5 converter writes them) for a UMT5 config.json.
pub(super) fn umt5_metadata(
    config_path: &Path,
    name: &str,
) -> Result<Vec<(String, Value)>, ModelFileError> {
    let c = read_config(config_path)?;
    let bad = |message: String| ModelFileError::Config {
        path: config_path.display().to_string(),
        message,
    };
    let model_type = c["model_type"].as_str().unwrap_or("");
    if !matches!(model_type, "umt5" | "t5") {
        return Err(bad(format!(
            "model_type {model_type:?} is not umt5 (Wan's text encoder)"
        )));
    }
    let int = |key: &str| {
        c[key]
            .as_u64()
            .filter(|&n| n > 0 && n <= u32::MAX as u64)
            .map(|n| n as u32)
            .ok_or_else(|| bad(format!("{key} must be a positive integer")))
    };
    let arch = umt5_names::ARCH;
    let eps = c["layer_norm_epsilon"].as_f64().unwrap_or(1e-6) as f32;
    let metadata: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(arch.into())),
        (
            "general.name".into(),
            Value::String(format!("{name} text encoder")),
        ),
        (
            format!("{arch}.context_length"),
            Value::U32(c["n_positions"].as_u64().unwrap_or(512) as u32),
        ),
        (
            format!("{arch}.embedding_length"),
            Value::U32(int("d_model")?),
        ),
        (
            format!("{arch}.feed_forward_length"),
            Value::U32(int("d_ff")?),
        ),
        (
            format!("{arch}.block_count"),
            Value::U32(int("num_layers")?),
        ),
        (
            format!("{arch}.attention.head_count"),
            Value::U32(int("num_heads")?),
        ),
        (
            format!("{arch}.attention.key_length"),
            Value::U32(int("d_kv")?),
        ),
        (
            format!("{arch}.attention.value_length"),
            Value::U32(int("d_kv")?),
        ),
        (
            format!("{arch}.attention.layer_norm_epsilon"),
            Value::F32(eps),
        ),
        (
            format!("{arch}.attention.relative_buckets_count"),
            Value::U32(int("relative_attention_num_buckets")?),
        ),
        (
            format!("{arch}.attention.layer_norm_rms_epsilon"),
            Value::F32(eps),
        ),
    ];
    if c["vocab_size"].as_u64().is_none() {
        return Err(bad("vocab_size must be a positive integer".into()));
    }
    Ok(metadata)
}

/// A diffusers `AutoencoderKLWan` folder (Wan 2.1 layout) to a safetensors file under Wan's
/// own names at `out`, tensors as stored.
pub fn convert_vae(
    dir: &Path,
    out: &Path,
    progress: &mut ProgressFn,
) -> Result<u64, ModelFileError> {
    let res = super::wan_vae_names::vae_res_blocks(&dir.join("config.json"))?;
    let src = Component::open(dir)?;
    let parsed = src.parsed()?;
    let mut tensors = Vec::new();
    for (path, st) in &parsed {
        for (name, view) in st.tensors() {
            let wan = vae_wan_name(&name, res).ok_or_else(|| ModelFileError::Weights {
                path: path.display().to_string(),
                message: format!("tensor {name} is not part of a Wan 2.1 VAE"),
            })?;
            tensors.push((wan, view));
        }
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let total: u64 = tensors.iter().map(|(_, v)| v.data().len() as u64).sum();
    let part = out.with_extension("safetensors.part");
    let result = safetensors::serialize_to_file(tensors, None, &part)
        .map_err(|e| ModelFileError::Io {
            path: part.display().to_string(),
            message: e.to_string(),
        })
        .and_then(|_| {
            // The crate creates the file owner-only; give it the source's permissions.
            if let Ok(m) = std::fs::metadata(&src.files[0]) {
                let _ = std::fs::set_permissions(&part, m.permissions());
            }
            std::fs::rename(&part, out).map_err(|e| ModelFileError::Io {
                path: out.display().to_string(),
                message: e.to_string(),
            })
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    result?;
    progress("vae", total, total);
    std::fs::metadata(out)
        .map(|m| m.len())
        .map_err(|e| ModelFileError::Io {
            path: out.display().to_string(),
            message: e.to_string(),
        })
}
