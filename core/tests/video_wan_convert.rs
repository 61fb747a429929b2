//! `weft convert` of a diffusers Wan pipeline folder (core's `wan_convert`) on the tiny
//! models of tests/data/video: the DiT GGUF(s), the UMT5 GGUF and the VAE safetensors file
//! hold every tensor of the folder, equal, under the names of the maps; the DiT config read
//! back from the GGUF equals the folder's config.json; the files are also read by the
//! reference readers (gguf-py, safetensors; scripts/video/read_converted.py); bad inputs are
//! clear errors.

mod video_files;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use safetensors::SafeTensors;
use weft_core::diffusion::wan_convert::{convert_pipeline, Converted, Role};
use weft_core::diffusion::wan_dit::WanDitConfig;
use weft_core::diffusion::wan_files::companions;
use weft_core::diffusion::wan_names::{dit_gguf_name, COMFY_PREFIX};
use weft_core::diffusion::wan_vae_names::vae_wan_name;
use weft_core::diffusion::{open_dit, umt5_names::umt5_gguf_name};
use weft_core::dtype::GgmlType;
use weft_core::gguf::{write_gguf, ModelFile, TensorToWrite, Value};
use weft_core::quant::dequantize_to_vec;
use weft_core::quantize::FileType;

/// A fresh scratch folder under the build's temp dir.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("wan-convert-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every tensor of a safetensors file as (shape, f32 values).
fn safetensors_f32(path: &Path) -> HashMap<String, (Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.tensors()
        .into_iter()
        .map(|(name, t)| {
            assert_eq!(
                t.dtype(),
                safetensors::Dtype::F32,
                "{name}: the tiny models are F32"
            );
            let v = t
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (name, (t.shape().to_vec(), v))
        })
        .collect()
}

/// A GGUF tensor's PyTorch-order shape and values.
fn gguf_f32(file: &ModelFile, name: &str) -> (Vec<usize>, Vec<f32>) {
    let (t, data) = file
        .tensor(name)
        .unwrap_or_else(|| panic!("{name} is missing"));
    let shape = t.dims.iter().rev().map(|&d| d as usize).collect();
    (
        shape,
        dequantize_to_vec(t.ty, data, t.n_elements as usize).unwrap(),
    )
}

fn convert(rel: &str, out: &Path, target: Option<FileType>) -> Converted {
    let dir = video_files::data(rel);
    let mut phases = Vec::new();
    let done = convert_pipeline(&dir, out, None, target, &mut |phase, d, t| {
        assert!(d <= t, "{phase}: {d} > {t}");
        phases.push(phase);
        true
    })
    .unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert!(phases.contains(&"dit"));
    done
}

/// The DiT GGUF holds the diffusers folder's tensors, equal (exactly, or to `tol` relative
/// where `--type` narrowed them), and its inferred config is the folder's.
fn check_dit(gguf: &Path, folder: &Path, tol: f32) {
    let (file, info) = open_dit(gguf).unwrap_or_else(|e| panic!("{}: {e}", gguf.display()));
    let want = WanDitConfig::from_json(&folder.join("config.json")).unwrap();
    assert_eq!(info.config, want, "{}", gguf.display());
    assert_eq!(info.image_dim, None);
    let src = safetensors_f32(&folder.join("diffusion_pytorch_model.safetensors"));
    assert_eq!(file.gguf.tensors.len(), src.len());
    for (name, (shape, values)) in &src {
        let g = dit_gguf_name(name).unwrap();
        let (gshape, gvalues) = gguf_f32(&file, &g);
        assert_eq!(&gshape, shape, "{g}");
        let scale = values.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-30);
        for (a, b) in gvalues.iter().zip(values) {
            assert!((a - b).abs() <= tol * scale, "{g}: {a} vs {b}");
        }
    }
    let patch = file.gguf.tensor("patch_embedding.weight").unwrap();
    assert_eq!(patch.dims.len(), 5);
    assert_eq!(
        patch.ty,
        GgmlType::F32,
        "as city96's fix_5d_tensors.py adds it"
    );
    for t in &file.gguf.tensors {
        if t.name.ends_with("modulation") || t.dims.len() == 1 {
            assert_eq!(t.ty, GgmlType::F32, "{}", t.name);
        }
    }
    assert_eq!(file.gguf.get_u64("general.quantization_version"), Some(2));
}

#[test]
fn t2v_pipeline_converts_to_dit_umt5_and_vae_files() {
    let out = scratch("t2v");
    let done = convert("tiny-wan/t2v", &out, None);
    assert!(done.missing.is_empty(), "{:?}", done.missing);
    let roles: Vec<Role> = done.written.iter().map(|w| w.role).collect();
    assert_eq!(roles, [Role::Dit, Role::TextEncoder, Role::Vae]);
    for w in &done.written {
        assert_eq!(
            std::fs::metadata(&w.path).unwrap().len(),
            w.bytes,
            "{:?}",
            w.role
        );
    }
    let t2v = video_files::data("tiny-wan/t2v");
    check_dit(&out.join("t2v.gguf"), &t2v.join("transformer"), 0.0);
    let dit = ModelFile::open(out.join("t2v.gguf")).unwrap();
    assert_eq!(dit.gguf.get_u64("general.file_type"), Some(0), "all F32");

    // UMT5: llama.cpp's t5encoder layout, every tensor equal, the tokenizer embedded.
    let te = ModelFile::open(out.join("t2v-umt5.gguf")).unwrap();
    assert_eq!(te.gguf.architecture(), Some("t5encoder"));
    let src = safetensors_f32(&t2v.join("text_encoder/model.safetensors"));
    assert_eq!(te.gguf.tensors.len(), src.len());
    for (name, (shape, values)) in &src {
        let g = umt5_gguf_name(name).unwrap();
        assert_eq!(gguf_f32(&te, &g), (shape.clone(), values.clone()), "{g}");
    }
    for (key, want) in [
        ("t5encoder.embedding_length", 40),
        ("t5encoder.block_count", 2),
        ("t5encoder.attention.head_count", 4),
        ("t5encoder.attention.key_length", 8),
        ("t5encoder.feed_forward_length", 64),
        ("t5encoder.attention.relative_buckets_count", 32),
        ("tokenizer.ggml.eos_token_id", 1),
        ("tokenizer.ggml.padding_token_id", 0),
        ("tokenizer.ggml.unknown_token_id", 2),
    ] {
        assert_eq!(te.gguf.get_u64(key), Some(want), "{key}");
    }
    assert_eq!(te.gguf.get_str("tokenizer.ggml.model"), Some("t5"));
    assert_eq!(te.gguf.get_bool("tokenizer.ggml.add_eos_token"), Some(true));
    assert_eq!(
        te.gguf.get_bool("tokenizer.ggml.add_bos_token"),
        Some(false)
    );
    assert_eq!(
        te.gguf.get_bool("tokenizer.ggml.remove_extra_whitespaces"),
        Some(true)
    );
    let tok: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t2v.join("tokenizer/tokenizer.json")).unwrap())
            .unwrap();
    let vocab = tok["model"]["vocab"].as_array().unwrap();
    let tokens = te.gguf.get_array("tokenizer.ggml.tokens").unwrap();
    let scores = te.gguf.get_array("tokenizer.ggml.scores").unwrap();
    let types = te.gguf.get_array("tokenizer.ggml.token_type").unwrap();
    assert_eq!(tokens.len(), 190);
    for (i, entry) in vocab.iter().enumerate() {
        assert_eq!(tokens[i].as_str(), entry[0].as_str(), "piece {i}");
        assert_eq!(
            scores[i].as_f64(),
            Some(entry[1].as_f64().unwrap() as f32 as f64)
        );
    }
    let ty = |i: usize| types[i].as_i64().unwrap();
    assert_eq!(
        (ty(0), ty(1), ty(2), ty(3)),
        (3, 3, 2, 1),
        "pad, eos control; unk; normal"
    );

    // VAE: Wan's own names, tensors as stored.
    let vae = safetensors_f32(&out.join("t2v-vae.safetensors"));
    let src = safetensors_f32(&t2v.join("vae/diffusion_pytorch_model.safetensors"));
    assert_eq!(vae.len(), src.len());
    for (name, t) in &src {
        let w = vae_wan_name(name, 1).unwrap();
        assert_eq!(vae.get(&w), Some(t), "{w}");
    }
    assert!(vae.contains_key("decoder.middle.0.residual.0.gamma"));
    assert!(vae.contains_key("decoder.upsamples.2.resample.1.weight"));

    // Companions are found beside the DiT.
    let c = companions(&out.join("t2v.gguf"));
    assert_eq!(c.text_encoder, Some(out.join("t2v-umt5.gguf")));
    assert_eq!(c.vae, Some(out.join("t2v-vae.safetensors")));
    assert_eq!(c.other_expert, None);

    reference_readers_agree(&out, &t2v);
}

#[test]
fn expert_pairs_become_two_named_dit_files() {
    let out = scratch("i2v");
    let done = convert("tiny-wan/i2v", &out, None);
    let roles: Vec<Role> = done.written.iter().map(|w| w.role).collect();
    assert_eq!(roles, [Role::DitHighNoise, Role::DitLowNoise]);
    // The tiny i2v folder shares t2v's encoder, tokenizer and VAE (tests/data/video/README.md).
    assert_eq!(done.missing, ["text_encoder", "vae"]);
    let i2v = video_files::data("tiny-wan/i2v");
    check_dit(
        &out.join("i2v-high-noise.gguf"),
        &i2v.join("transformer"),
        0.0,
    );
    check_dit(
        &out.join("i2v-low-noise.gguf"),
        &i2v.join("transformer_2"),
        0.0,
    );
    let c = companions(&out.join("i2v-high-noise.gguf"));
    assert_eq!(c.stem, "i2v");
    assert_eq!(c.other_expert, Some(out.join("i2v-low-noise.gguf")));
    let c = companions(&out.join("i2v-low-noise.gguf"));
    assert_eq!(c.other_expert, Some(out.join("i2v-high-noise.gguf")));
    assert_eq!((c.text_encoder, c.vae), (None, None));
}

#[test]
fn type_narrows_the_matrices_only() {
    let out = scratch("f16");
    convert("tiny-wan/t2v", &out, Some(FileType::F16));
    let t2v = video_files::data("tiny-wan/t2v");
    // f16 keeps 11 bits: relative error within 2^-11 of each tensor's largest value.
    check_dit(
        &out.join("t2v.gguf"),
        &t2v.join("transformer"),
        1.0 / 2048.0,
    );
    let dit = ModelFile::open(out.join("t2v.gguf")).unwrap();
    assert_eq!(dit.gguf.get_u64("general.file_type"), Some(1));
    let ty = |n: &str| dit.gguf.tensor(n).unwrap().ty;
    assert_eq!(ty("blocks.0.ffn.0.weight"), GgmlType::F16);
    // [32, 32]: 1024 elements, small enough to stay F32 (city96's rule).
    assert_eq!(ty("blocks.0.self_attn.q.weight"), GgmlType::F32);
    assert_eq!(ty("blocks.0.self_attn.q.bias"), GgmlType::F32);
    assert_eq!(ty("blocks.0.modulation"), GgmlType::F32);

    let out = scratch("q8");
    convert("tiny-wan/t2v", &out, Some(FileType::Q8_0));
    let dit = ModelFile::open(out.join("t2v.gguf")).unwrap();
    let ty = |n: &str| dit.gguf.tensor(n).unwrap().ty;
    // Rows of 32 fit Q8_0's blocks; rows of 40 (text_dim) do not and keep their type.
    assert_eq!(ty("blocks.1.ffn.0.weight"), GgmlType::Q8_0);
    assert_eq!(ty("text_embedding.0.weight"), GgmlType::F32);
    assert!(open_dit(&out.join("t2v.gguf")).is_ok());
}

/// What a rewrite makes of one tensor (name, dims): none, it, or it and copies.
type Edit<'a> = &'a dyn Fn(&str, &[u64]) -> Vec<(String, Vec<u64>)>;

/// Rewrites `src` (a GGUF) with the metadata keys `meta` keeps and each tensor through `edit`
/// (its bytes unchanged).
fn rewrite(src: &Path, dst: &Path, meta: &dyn Fn(&str) -> bool, edit: Edit) {
    let f = ModelFile::open(src).unwrap();
    let metadata: Vec<(&str, Value)> = f
        .gguf
        .metadata
        .iter()
        .filter(|(k, _)| meta(k))
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let edited: Vec<(String, Vec<u64>, GgmlType, &[u8])> = f
        .gguf
        .tensors
        .iter()
        .flat_map(|t| {
            edit(&t.name, &t.dims)
                .into_iter()
                .map(|(n, d)| (n, d, t.ty, f.tensor_data(t)))
        })
        .collect();
    let tensors: Vec<TensorToWrite> = edited
        .iter()
        .map(|(n, d, ty, data)| TensorToWrite {
            name: n,
            dims: d,
            ty: *ty,
            data,
        })
        .collect();
    std::fs::write(dst, write_gguf(&metadata, &tensors, 32)).unwrap();
}

#[test]
fn other_layouts_of_the_same_dit_read_the_same() {
    let out = scratch("layouts");
    convert("tiny-wan/t2v", &out, None);
    let good = out.join("t2v.gguf");
    let (_, want) = open_dit(&good).unwrap();
    let all = |_: &str| true;
    // ComfyUI's prefix, and the 5-D weight folded to ggml's 4 dims ([pw, ph, pt, in * dim]).
    let alt = out.join("alt.gguf");
    rewrite(&good, &alt, &all, &|n, d| {
        let d = if n == "patch_embedding.weight" {
            vec![d[0], d[1], d[2], d[3] * d[4]]
        } else {
            d.to_vec()
        };
        vec![(format!("{COMFY_PREFIX}{n}"), d)]
    });
    let (file, info) = open_dit(&alt).unwrap();
    assert_eq!(info, want);
    assert!(file.tensor("blocks.1.ffn.2.weight").is_some());
}

#[test]
fn bad_files_are_clear_errors() {
    let out = scratch("bad");
    convert("tiny-wan/t2v", &out, None);
    let good = out.join("t2v.gguf");
    let all = |_: &str| true;
    let same = |n: &str, d: &[u64]| vec![(n.to_string(), d.to_vec())];
    let drop = |gone: &'static str| {
        move |n: &str, d: &[u64]| {
            if n == gone {
                vec![]
            } else {
                vec![(n.to_string(), d.to_vec())]
            }
        }
    };
    let err = |path: &Path| match open_dit(path) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    };
    let case = |name: &str, meta: &dyn Fn(&str) -> bool, edit: Edit| {
        let p = out.join(format!("{name}.gguf"));
        rewrite(&good, &p, meta, edit);
        err(&p)
    };

    // A text model's GGUF given as the DiT.
    let text = out.join("text.gguf");
    let data = [0u8; 64];
    std::fs::write(
        &text,
        write_gguf(
            &[("general.architecture", Value::String("llama".into()))],
            &[TensorToWrite {
                name: "token_embd.weight",
                dims: &[4, 4],
                ty: GgmlType::F32,
                data: &data,
            }],
            32,
        ),
    )
    .unwrap();
    let e = err(&text);
    assert!(
        e.contains("\"llama\"") && e.contains("not a Wan DiT"),
        "{e}"
    );

    // The UMT5 file given as the DiT.
    let e = err(&out.join("t2v-umt5.gguf"));
    assert!(e.contains("t5encoder"), "{e}");

    let e = case("missing", &all, &drop("blocks.1.cross_attn.v.weight"));
    assert!(e.contains("blocks.1.cross_attn.v.weight is missing"), "{e}");

    let e = case("shape", &all, &|n, d| {
        let d = if n == "blocks.0.ffn.2.weight" {
            vec![d[0] / 2, d[1] * 2]
        } else {
            d.to_vec()
        };
        vec![(n.to_string(), d)]
    });
    assert!(e.contains("blocks.0.ffn.2.weight has shape"), "{e}");

    // A VACE model's extra blocks.
    let e = case("extra", &all, &|n, d| {
        let mut v = vec![(n.to_string(), d.to_vec())];
        if n == "blocks.0.ffn.2.bias" {
            v.push(("vace_blocks.0.ffn.2.bias".into(), d.to_vec()));
        }
        v
    });
    assert!(e.contains("vace_blocks.0.ffn.2.bias"), "{e}");

    let e = case(
        "noarch",
        &|k| k != "general.architecture",
        &drop("head.modulation"),
    );
    assert!(e.contains("not a Wan DiT"), "{e}");

    let e = case("heads", &|k| k != "wan.attention.head_count", &same);
    assert!(e.contains("wan.attention.head_count"), "{e}");

    let e = err(&out.join("nothing.gguf"));
    assert!(e.contains("nothing.gguf"), "{e}");

    // Not a Wan pipeline folder.
    let mut noop = |_: &'static str, _: u64, _: u64| true;
    let not_wan = video_files::data("tiny-wan/t2v/transformer");
    let e = convert_pipeline(&not_wan, &out, None, None, &mut noop)
        .unwrap_err()
        .to_string();
    assert!(e.contains("model_index.json"), "{e}");
    let index_only = out.join("sd-pipeline");
    std::fs::create_dir_all(&index_only).unwrap();
    std::fs::write(
        index_only.join("model_index.json"),
        r#"{"_class_name": "StableDiffusionPipeline"}"#,
    )
    .unwrap();
    let e = convert_pipeline(&index_only, &out, None, None, &mut noop)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("StableDiffusionPipeline") && e.contains("WanPipeline"),
        "{e}"
    );
}

/// Whether python3 has the reference readers; outside CI a missing one skips loudly.
fn readers_ready() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy, gguf, safetensors"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("python3 with numpy, gguf and safetensors is required under CI (pip install -r scripts/requirements-test.txt)");
        }
        eprintln!("\n*** SKIPPING the gguf-py check: python3 lacks numpy, gguf or safetensors (scripts/requirements-test.txt) ***\n");
    }
    ok
}

fn read_with_python(path: &Path) -> serde_json::Value {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/video/read_converted.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(path)
        .output()
        .expect("running python3");
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A map from a source tensor name to the written file's.
type NameMap<'a> = &'a dyn Fn(&str) -> Option<String>;

/// gguf-py and the safetensors package read the written files to the diffusers values.
fn reference_readers_agree(out: &Path, t2v: &Path) {
    if !readers_ready() {
        return;
    }
    let cases: [(&str, &str, NameMap); 3] = [
        (
            "t2v.gguf",
            "transformer/diffusion_pytorch_model.safetensors",
            &dit_gguf_name,
        ),
        (
            "t2v-umt5.gguf",
            "text_encoder/model.safetensors",
            &umt5_gguf_name,
        ),
        (
            "t2v-vae.safetensors",
            "vae/diffusion_pytorch_model.safetensors",
            &|n| vae_wan_name(n, 1),
        ),
    ];
    for (file, source, map) in cases {
        let got = read_with_python(&out.join(file));
        let src = safetensors_f32(&t2v.join(source));
        let tensors = got["tensors"].as_object().unwrap();
        assert_eq!(tensors.len(), src.len(), "{file}");
        for (name, (shape, values)) in &src {
            let g = map(name).unwrap();
            let t = &tensors[&g];
            let gshape: Vec<usize> = serde_json::from_value(t["shape"].clone()).unwrap();
            let gvalues: Vec<f32> = serde_json::from_value(t["values"].clone()).unwrap();
            assert_eq!(&gshape, shape, "{file}: {g}");
            assert_eq!(&gvalues, values, "{file}: {g}");
        }
        if file.ends_with(".gguf") {
            let meta = &got["metadata"];
            let arch = if file == "t2v.gguf" {
                "wan"
            } else {
                "t5encoder"
            };
            assert_eq!(meta["general.architecture"], arch, "{file}");
        }
    }
    let te = read_with_python(&out.join("t2v-umt5.gguf"));
    assert_eq!(te["metadata"]["tokens"].as_array().unwrap().len(), 190);
    assert_eq!(te["metadata"]["tokenizer.ggml.model"], "t5");
}

#[test]
fn wan21_image_cross_attention_is_read_from_its_tensors() {
    // No tiny Wan 2.1 I2V ships; its extra tensors are added to the t2v DiT (copies of
    // same-shaped ones, image_dim = dim), as a Wan 2.1 I2V file names them.
    let out = scratch("wan21-i2v");
    convert("tiny-wan/t2v", &out, None);
    let i2v = out.join("i2v21.gguf");
    let all = |_: &str| true;
    rewrite(&out.join("t2v.gguf"), &i2v, &all, &|n, d| {
        let mut v = vec![(n.to_string(), d.to_vec())];
        let add = |v: &mut Vec<(String, Vec<u64>)>, name: String| v.push((name, d.to_vec()));
        if let Some(block) = n.strip_suffix(".cross_attn.k.weight") {
            add(&mut v, format!("{block}.cross_attn.k_img.weight"));
            add(&mut v, format!("{block}.cross_attn.v_img.weight"));
        }
        if let Some(block) = n.strip_suffix(".cross_attn.k.bias") {
            add(&mut v, format!("{block}.cross_attn.k_img.bias"));
            add(&mut v, format!("{block}.cross_attn.v_img.bias"));
        }
        if let Some(block) = n.strip_suffix(".cross_attn.norm_k.weight") {
            add(&mut v, format!("{block}.cross_attn.norm_k_img.weight"));
        }
        if n == "blocks.0.self_attn.q.weight" {
            add(&mut v, "img_emb.proj.1.weight".into());
            add(&mut v, "img_emb.proj.3.weight".into());
        }
        if n == "blocks.0.self_attn.q.bias" {
            for p in [
                "0.weight", "0.bias", "1.bias", "3.bias", "4.weight", "4.bias",
            ] {
                add(&mut v, format!("img_emb.proj.{p}"));
            }
        }
        v
    });
    let (_, info) = open_dit(&i2v).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(info.image_dim, Some(32));
    assert_eq!(info.image_pos_len, None);
    // Without one block's image keys the file is inconsistent, and says which.
    let broken = out.join("broken.gguf");
    rewrite(&i2v, &broken, &all, &|n, d| {
        if n == "blocks.1.cross_attn.v_img.weight" {
            vec![]
        } else {
            vec![(n.to_string(), d.to_vec())]
        }
    });
    let e = open_dit(&broken).err().expect("opened").to_string();
    assert!(
        e.contains("blocks.1.cross_attn.v_img.weight is missing"),
        "{e}"
    );
}

/// Every tensor of `a` is in `b` under the same name with the same dims, type and bytes.
fn same_tensors(a: &ModelFile, b: &ModelFile, what: &str) {
    assert_eq!(a.gguf.tensors.len(), b.gguf.tensors.len(), "{what}");
    for t in &a.gguf.tensors {
        let (u, data) = b
            .tensor(&t.name)
            .unwrap_or_else(|| panic!("{what}: {} missing", t.name));
        assert_eq!((&u.dims, u.ty), (&t.dims, t.ty), "{what}: {}", t.name);
        assert_eq!(data, a.tensor_data(t), "{what}: {}", t.name);
    }
}

#[test]
fn folder_views_equal_the_converted_files() {
    use weft_core::diffusion::umt5_names::open_diffusers_umt5;
    use weft_core::diffusion::wan_gguf::open_dit_any;
    use weft_core::diffusion::wan_vae_names::open_vae;

    let out = scratch("views");
    convert("tiny-wan/t2v", &out, None);
    let t2v = video_files::data("tiny-wan/t2v");

    let (dir_view, dir_info) = open_dit_any(&t2v.join("transformer")).unwrap();
    let (gguf, gguf_info) = open_dit_any(&out.join("t2v.gguf")).unwrap();
    assert_eq!(dir_info, gguf_info);
    same_tensors(&dir_view, &gguf, "DiT");

    let te_view = open_diffusers_umt5(&t2v.join("text_encoder")).unwrap();
    let te = ModelFile::open(out.join("t2v-umt5.gguf")).unwrap();
    same_tensors(&te_view, &te, "UMT5");
    for key in ["t5encoder.block_count", "t5encoder.attention.key_length"] {
        assert_eq!(te_view.gguf.get_u64(key), te.gguf.get_u64(key), "{key}");
    }

    let vae_dir = open_vae(&t2v.join("vae")).unwrap();
    let vae_file = open_vae(&out.join("t2v-vae.safetensors")).unwrap();
    same_tensors(&vae_dir, &vae_file, "VAE");

    // The wrong component where a VAE is expected, in either form.
    let e = open_vae(&t2v.join("transformer"))
        .err()
        .expect("opened")
        .to_string();
    assert!(e.contains("AutoencoderKLWan"), "{e}");
    let dit_file = t2v.join("transformer/diffusion_pytorch_model.safetensors");
    let e = open_vae(&dit_file).err().expect("opened").to_string();
    assert!(e.contains("not a Wan 2.1 VAE"), "{e}");
    let e = open_diffusers_umt5(&t2v.join("vae"))
        .err()
        .expect("opened")
        .to_string();
    assert!(e.contains("umt5"), "{e}");
}
