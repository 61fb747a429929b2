//! Synthetic cases from the `gguf` Python package (scripts/py/quant_synthetic.py), covering the
//! types the reference models lack: dequantization must be bit-identical to
//! `gguf.quants.dequantize` on random valid blocks of every supported type, and quantization
//! byte-identical to `gguf.quants.quantize` for the types the package can quantize.

mod common;

use std::path::Path;

use weft_core::dtype::GgmlType;
use weft_core::quant;

fn type_by_name(name: &str) -> GgmlType {
    GgmlType::ALL
        .iter()
        .copied()
        .find(|t| format!("{t:?}") == name)
        .unwrap_or_else(|| panic!("unknown type {name}"))
}

#[test]
fn synthetic_cases_match_gguf_package() {
    if !common::python_ready() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("weft-quant-synth-{}", std::process::id()));
    common::run_script("quant_synthetic.py", &[dir.to_str().unwrap()]);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let result = std::panic::catch_unwind(|| check_cases(&dir, manifest.as_array().unwrap()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

fn check_cases(dir: &Path, cases: &[serde_json::Value]) {
    let mut dequant_checked = Vec::new();
    let mut quant_checked = Vec::new();
    let mut errors = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let ty = type_by_name(case["type"].as_str().unwrap());
        let n = case["n"].as_u64().unwrap() as usize;
        let bytes = std::fs::read(dir.join(case["bytes"].as_str().unwrap())).unwrap();
        let want = common::read_f32_file(&dir.join(case["values"].as_str().unwrap()));
        let got = quant::dequantize_to_vec(ty, &bytes, n).unwrap();
        if let Some(d) = common::first_difference(&got, &want) {
            errors.push(format!(
                "{name}: dequantize differs at (index, ours, theirs) {d:?}"
            ));
        }
        dequant_checked.push(ty);
        if let Some(src) = case["source"].as_str() {
            let x = common::read_f32_file(&dir.join(src));
            let ours = quant::quantize_to_vec(ty, &x).unwrap();
            if let Some(i) = ours.iter().zip(&bytes).position(|(a, b)| a != b) {
                let block = i / ty.type_size();
                errors.push(format!(
                    "{name}: quantize differs at byte {i} (block {block}): ours {:02x?}, theirs {:02x?}",
                    &ours[block * ty.type_size()..(block + 1) * ty.type_size()],
                    &bytes[block * ty.type_size()..(block + 1) * ty.type_size()]
                ));
            }
            quant_checked.push(ty);
        }
    }
    eprintln!("dequantize checked: {dequant_checked:?}\nquantize checked: {quant_checked:?}");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    // Every dequantizable type except the activation-only ones must have been covered.
    for ty in GgmlType::ALL {
        let activation_only = matches!(ty, GgmlType::Q8_1 | GgmlType::Q8_K | GgmlType::F32);
        if quant::is_supported(ty) && !activation_only {
            assert!(dequant_checked.contains(&ty), "no synthetic case for {ty}");
        }
    }
}
