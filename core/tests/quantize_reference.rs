//! Weft's weight quantizers against llama.cpp's, byte for byte, on the data in
//! tests/reference/quant/ (made by scripts/gen_quant_reference.py with GGML's
//! `ggml_quantize_chunk`, the function `llama-quantize` runs without an importance matrix).

use weft_core::dtype::GgmlType;
use weft_core::quant::{dequantize_to_vec, quantize_reference};
use weft_core::test_support::reference_dir;

#[test]
fn every_type_matches_ggml_byte_for_byte() {
    let dir = reference_dir().join("quant");
    let raw = std::fs::read(dir.join("input.f32")).expect("tests/reference/quant/input.f32");
    let x: Vec<f32> = raw
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let types = [
        ("q4_0", GgmlType::Q4_0),
        ("q4_1", GgmlType::Q4_1),
        ("q5_0", GgmlType::Q5_0),
        ("q5_1", GgmlType::Q5_1),
        ("q8_0", GgmlType::Q8_0),
        ("q4_K", GgmlType::Q4_K),
        ("q5_K", GgmlType::Q5_K),
        ("q6_K", GgmlType::Q6_K),
    ];
    let mut report = Vec::new();
    for (file, ty) in types {
        let want = std::fs::read(dir.join(format!("{file}.bin"))).unwrap();
        let mut got = vec![0u8; want.len()];
        quantize_reference(ty, &x, &mut got).unwrap();
        let size = ty.type_size();
        let differing: Vec<usize> = got
            .chunks(size)
            .zip(want.chunks(size))
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, _)| i)
            .collect();
        report.push(format!(
            "{ty}: {} of {} blocks differ",
            differing.len(),
            want.len() / size
        ));
        if let Some(&i) = differing.first() {
            let a = dequantize_to_vec(ty, &got[i * size..(i + 1) * size], ty.block_size()).unwrap();
            let b =
                dequantize_to_vec(ty, &want[i * size..(i + 1) * size], ty.block_size()).unwrap();
            report.push(format!(
                "  first differing block {i}: weft {:?}... ggml {:?}...",
                &a[..4],
                &b[..4]
            ));
        }
    }
    let text = report.join("\n");
    eprintln!("{text}");
    assert!(
        report
            .iter()
            .filter(|l| !l.starts_with("  "))
            .all(|l| l.contains(": 0 of ")),
        "{text}"
    );
}
