//! vec_dot on real weight rows of the three reference models: equal to the f64 dot of the
//! dequantized weight row and dequantized activation (tight relative tolerance), and the SIMD
//! kernel equal to the scalar one.

use weft_core::dtype::GgmlType;
use weft_core::gguf::ModelFile;
use weft_core::quant::{self, dot};
use weft_core::test_support::model_path;

/// Deterministic pseudo-random activations in [-1, 1) with a few larger outliers.
fn activation(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let v = (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
            if i % 61 == 0 {
                v * 20.0
            } else {
                v
            }
        })
        .collect()
}

fn f16(b: &[u8], i: usize) -> f64 {
    half::f16::from_le_bytes([b[i], b[i + 1]]).to_f32() as f64
}

fn check_model(key: &str) {
    let Some(path) = model_path(key) else { return };
    let model = ModelFile::open(&path).unwrap();
    let mut rows_checked = std::collections::BTreeMap::<String, usize>::new();
    for t in &model.gguf.tensors {
        if t.dims.len() < 2 || !dot::supports_vec_dot(t.ty) {
            continue;
        }
        let n = t.dims[0] as usize;
        let row_bytes = t.ty.bytes_for(n as u64).unwrap() as usize;
        let data = model.tensor_data(t);
        let n_rows = t.n_rows() as usize;
        let x = activation(n, t.n_elements);
        let at = dot::vec_dot_type(t.ty);
        let act = quant::quantize_to_vec(at, &x).unwrap();
        let act_f = quant::dequantize_to_vec(at, &act, n).unwrap();
        for r in [0, n_rows / 3, n_rows - 1] {
            let row = &data[r * row_bytes..(r + 1) * row_bytes];
            let w = quant::dequantize_to_vec(t.ty, row, n).unwrap();
            let (exact, mag) = w.iter().zip(&act_f).fold((0f64, 0f64), |(s, m), (p, q)| {
                let v = *p as f64 * *q as f64;
                (s + v, m + v.abs())
            });
            // Q8_1 keeps sum(a) as an f16, which Q4_1 / Q5_1 use for their min term.
            let s_rounding: f64 = if at == GgmlType::Q8_1 {
                row.chunks(t.ty.type_size())
                    .zip(act.chunks(36))
                    .map(|(bw, ba)| f16(bw, 2).abs() * (f16(ba, 2).abs() / 2048.0 + 3e-8))
                    .sum()
            } else {
                0.0
            };
            let tol = 1e-5 * mag + s_rounding + 1e-30;
            let fast = dot::vec_dot(t.ty, row, &act, n) as f64;
            let slow = dot::vec_dot_scalar(t.ty, row, &act, n) as f64;
            assert!(
                (fast - exact).abs() <= tol && (slow - exact).abs() <= tol,
                "{key} {} row {r} ({}): simd {fast}, scalar {slow}, dequantized {exact}, tol {tol}",
                t.name,
                t.ty
            );
            assert!(
                (fast - slow).abs() <= 1e-5 * mag + 1e-30,
                "{key} {} row {r}: simd {fast} vs scalar {slow}",
                t.name
            );
            *rows_checked.entry(t.ty.to_string()).or_default() += 1;
        }
    }
    eprintln!("{key}: rows checked per type {rows_checked:?}");
    assert!(!rows_checked.is_empty());
}

#[test]
fn smollm2_rows() {
    check_model("smollm2");
}

#[test]
fn gemma3_rows() {
    check_model("gemma3");
}

#[test]
fn qwen2_rows() {
    check_model("qwen2");
}
