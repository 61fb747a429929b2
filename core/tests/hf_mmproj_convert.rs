//! `weft convert`'s mmproj path against llama.cpp's `convert_hf_to_gguf.py --mmproj --outtype
//! f16`: the small Hugging Face folders of tests/data/vision/convert/<family> (the tiny vision
//! models without their text weights, scripts/vision/convert_fixtures.py) must convert to the
//! very bytes of the shipped reference mmproj tests/data/vision/<family>/mmproj-*-f16.gguf —
//! every metadata key and value, tensor name, type, shape, order and byte. On a difference the
//! test names the first key or tensor that differs.

use std::path::{Path, PathBuf};

use weft_core::dtype::GgmlType;
use weft_core::gguf::{ModelBytes, ModelFile};
use weft_core::hf::mmproj::{convert_mmproj, vision_family, VisionFamily};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/vision")
}

fn parse(bytes: Vec<u8>) -> ModelFile {
    ModelFile::from_bytes(ModelBytes::Owned(bytes)).expect("a GGUF file")
}

/// The first difference between two GGUF files, in words.
fn first_difference(got: &ModelFile, want: &ModelFile) -> String {
    let (g, w) = (&got.gguf, &want.gguf);
    for (i, (a, b)) in g.metadata.iter().zip(&w.metadata).enumerate() {
        if a != b {
            return format!("metadata #{i}: got {a:?}, want {b:?}");
        }
    }
    if g.metadata.len() != w.metadata.len() {
        return format!(
            "metadata: got {} keys, want {} (got {:?}, want {:?})",
            g.metadata.len(),
            w.metadata.len(),
            g.metadata.iter().map(|kv| &kv.0).collect::<Vec<_>>(),
            w.metadata.iter().map(|kv| &kv.0).collect::<Vec<_>>()
        );
    }
    for (i, (a, b)) in g.tensors.iter().zip(&w.tensors).enumerate() {
        if (&a.name, a.ty, &a.dims) != (&b.name, b.ty, &b.dims) {
            return format!(
                "tensor #{i}: got {} {:?} {:?}, want {} {:?} {:?}",
                a.name, a.ty, a.dims, b.name, b.ty, b.dims
            );
        }
        if got.tensor_data(a) != want.tensor_data(b) {
            return format!("tensor {}: the bytes differ", a.name);
        }
    }
    if g.tensors.len() != w.tensors.len() {
        return format!("got {} tensors, want {}", g.tensors.len(), w.tensors.len());
    }
    "the headers are equal; the padding or layout differs".into()
}

fn check(family: &str, want: VisionFamily, reference: &str) {
    let dir = data().join("convert").join(family);
    assert_eq!(vision_family(&dir), Some(want), "{}", dir.display());
    let mut out = Vec::new();
    let summary = convert_mmproj(&dir, None, &mut out, GgmlType::F16)
        .unwrap_or_else(|e| panic!("{family}: {e}"));
    let reference = std::fs::read(data().join(family).join(reference)).expect("reference mmproj");
    assert_eq!(summary.bytes, out.len() as u64);
    if out != reference {
        let why = first_difference(&parse(out.clone()), &parse(reference.clone()));
        panic!(
            "{family}: Weft's mmproj ({} bytes) is not llama.cpp's ({} bytes): {why}",
            out.len(),
            reference.len()
        );
    }
    // The same file parses as the projector Weft runs.
    let parsed = parse(out);
    assert_eq!(parsed.gguf.tensors.len(), summary.tensors);
}

#[test]
fn idefics3_mmproj_equals_llama_cpp() {
    check(
        "idefics3",
        VisionFamily::Idefics3,
        "mmproj-idefics3-tiny-f16.gguf",
    );
}

#[test]
fn qwen25vl_mmproj_equals_llama_cpp() {
    check(
        "qwen25vl",
        VisionFamily::Qwen25VL,
        "mmproj-qwen25vl-tiny-f16.gguf",
    );
}

#[test]
fn gemma3_mmproj_equals_llama_cpp() {
    check(
        "gemma3",
        VisionFamily::Gemma3,
        "mmproj-gemma3-tiny-f16.gguf",
    );
}

#[test]
fn f32_output_keeps_the_forced_types() {
    // llama.cpp's rules at --outtype f32: everything F32 except Gemma 3's input projection,
    // which its converter always writes F16.
    let dir = data().join("convert/gemma3");
    let mut out = Vec::new();
    convert_mmproj(&dir, Some("t"), &mut out, GgmlType::F32).unwrap();
    let f = parse(out);
    for t in &f.gguf.tensors {
        let want = if t.name == "mm.input_projection.weight" {
            GgmlType::F16
        } else {
            GgmlType::F32
        };
        assert_eq!(t.ty, want, "{}", t.name);
    }
    let ftype = f
        .gguf
        .metadata
        .iter()
        .find(|kv| kv.0 == "general.file_type");
    assert_eq!(
        ftype.map(|kv| kv.1.clone()),
        Some(weft_core::gguf::Value::U32(0))
    );
}

#[test]
fn a_text_only_folder_is_refused_with_a_message() {
    let dir = std::env::temp_dir().join(format!("weft-mmproj-text-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.json"),
        r#"{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":8}"#,
    )
    .unwrap();
    assert_eq!(vision_family(&dir), None);
    let err = convert_mmproj(&dir, None, &mut Vec::new(), GgmlType::F16).unwrap_err();
    assert!(err.to_string().contains("not a vision model"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
