//! Dequantization of every tensor of the three reference models must be bit-identical to the
//! `gguf` Python package (`gguf.quants.dequantize`), compared through fingerprints of the f32
//! bits computed by scripts/py/quant_reference.py.

mod common;

use std::collections::BTreeMap;

use weft_core::gguf::ModelFile;
use weft_core::quant;
use weft_core::test_support::model_path;

fn check_model(key: &str) {
    let Some(path) = model_path(key) else { return };
    if !common::python_ready() {
        return;
    }
    let path_str = path.to_str().unwrap();
    let cache = common::run_script("quant_reference.py", &[path_str]);
    let text = std::fs::read_to_string(&cache).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    let model = ModelFile::open(&path).unwrap();

    let mut by_type: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for t in &model.gguf.tensors {
        let want = &expected[&t.name];
        assert!(
            want.is_object(),
            "{key}: {} missing from the reference",
            t.name
        );
        let values = quant::dequantize_to_vec(t.ty, model.tensor_data(t), t.n_elements as usize)
            .unwrap_or_else(|e| panic!("{key}: {}: {e}", t.name));
        assert_eq!(want["n"].as_u64(), Some(t.n_elements), "{}", t.name);
        if common::fingerprint(&values) != want["fp"].as_str().unwrap() {
            failures.push((t.name.clone(), t.ty, values));
        }
        *by_type.entry(t.ty.to_string()).or_default() += 1;
    }
    eprintln!("{key}: checked {by_type:?}");
    if let Some((name, ty, ours)) = failures.first() {
        let dump = std::env::temp_dir().join(format!("weft-quant-dump-{}.f32", std::process::id()));
        common::run_script(
            "quant_reference.py",
            &[path_str, "--dump", name, dump.to_str().unwrap()],
        );
        let theirs = common::read_f32_file(&dump);
        let _ = std::fs::remove_file(&dump);
        let diff = common::first_difference(ours, &theirs);
        panic!(
            "{key}: {} tensors differ from gguf.quants.dequantize; first {name} ({ty}): \
             first differing element (index, ours, theirs) = {diff:?}",
            failures.len()
        );
    }
}

#[test]
fn smollm2_tensors_match_gguf_package() {
    check_model("smollm2");
}

#[test]
fn gemma3_tensors_match_gguf_package() {
    check_model("gemma3");
}

#[test]
fn qwen2_tensors_match_gguf_package() {
    check_model("qwen2");
}
