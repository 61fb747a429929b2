//! GGUF reader: round trips through the writer, every value type, and clear errors on bad input.

use weft_core::dtype::GgmlType;
use weft_core::gguf::{parse_header, write_gguf, GgufError, ModelFile, TensorToWrite, Value};

fn sample_file() -> Vec<u8> {
    let meta = vec![
        ("general.architecture", Value::String("llama".into())),
        ("general.alignment", Value::U32(64)),
        ("t.u8", Value::U8(200)),
        ("t.i8", Value::I8(-5)),
        ("t.u16", Value::U16(60000)),
        ("t.i16", Value::I16(-30000)),
        ("t.u32", Value::U32(4_000_000_000)),
        ("t.i32", Value::I32(-2_000_000_000)),
        ("t.f32", Value::F32(1.5)),
        ("t.bool", Value::Bool(true)),
        ("t.u64", Value::U64(u64::MAX)),
        ("t.i64", Value::I64(i64::MIN)),
        ("t.f64", Value::F64(-0.25)),
        ("t.empty", Value::Array(vec![])),
        (
            "t.nested",
            Value::Array(vec![
                Value::Array(vec![Value::String("a".into()), Value::String("bé".into())]),
                Value::Array(vec![Value::String("c".into())]),
            ]),
        ),
    ];
    let f32s: Vec<u8> = (0..64).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let q8 = vec![7u8; 34 * 2];
    write_gguf(
        &meta,
        &[
            TensorToWrite {
                name: "a",
                dims: &[16, 4],
                ty: GgmlType::F32,
                data: &f32s,
            },
            TensorToWrite {
                name: "b",
                dims: &[64],
                ty: GgmlType::Q8_0,
                data: &q8,
            },
        ],
        64,
    )
}

#[test]
fn round_trip_every_value_type() {
    let bytes = sample_file();
    let m = ModelFile::from_vec(bytes.clone()).unwrap();
    let g = &m.gguf;
    assert_eq!(g.version, 3);
    assert_eq!(g.alignment, 64);
    assert_eq!(g.architecture(), Some("llama"));
    assert_eq!(g.get("t.u8"), Some(&Value::U8(200)));
    assert_eq!(g.get("t.i8"), Some(&Value::I8(-5)));
    assert_eq!(g.get("t.u16"), Some(&Value::U16(60000)));
    assert_eq!(g.get("t.i16"), Some(&Value::I16(-30000)));
    assert_eq!(g.get_u64("t.u32"), Some(4_000_000_000));
    assert_eq!(g.get("t.i32").and_then(Value::as_i64), Some(-2_000_000_000));
    assert_eq!(g.get_f64("t.f32"), Some(1.5));
    assert_eq!(g.get_bool("t.bool"), Some(true));
    assert_eq!(g.get_u64("t.u64"), Some(u64::MAX));
    assert_eq!(g.get("t.i64").and_then(Value::as_i64), Some(i64::MIN));
    assert_eq!(g.get_f64("t.f64"), Some(-0.25));
    assert_eq!(g.get_array("t.empty").map(|a| a.len()), Some(0));
    let nested = g.get_array("t.nested").unwrap();
    assert_eq!(nested[0].as_array().unwrap()[1].as_str(), Some("bé"));
    assert_eq!(g.data_offset % 64, 0);

    let (a, data) = m.tensor("a").unwrap();
    assert_eq!(a.dims, vec![16, 4]);
    assert_eq!(a.n_rows(), 4);
    assert_eq!(f32::from_le_bytes(data[4 * 63..].try_into().unwrap()), 63.0);
    let (b, data) = m.tensor("b").unwrap();
    assert_eq!(b.ty, GgmlType::Q8_0);
    assert_eq!(b.offset % 64, 0);
    assert_eq!(data, &[7u8; 68][..]);
}

#[test]
fn every_truncation_is_a_clean_error() {
    let bytes = sample_file();
    for len in 0..bytes.len() {
        let cut = &bytes[..len];
        let err = parse_header(cut, len as u64).err();
        let Some(err) = err else {
            panic!("truncated to {len} bytes yet parsed");
        };
        let msg = err.to_string();
        assert!(!msg.is_empty());
        assert!(
            matches!(err, GgufError::Truncated { .. } | GgufError::BadMagic(_)),
            "{len}: {msg}"
        );
    }
}

#[test]
fn header_can_be_fed_in_chunks() {
    let bytes = sample_file();
    let total = bytes.len() as u64;
    let mut have = 1usize;
    let g = loop {
        match parse_header(&bytes[..have], total) {
            Ok(g) => break g,
            Err(GgufError::NeedMore { need, .. }) => {
                assert!(need as usize > have);
                have = (have + 7).min(bytes.len());
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(g.tensors.len(), 2);
    assert!(
        have < bytes.len(),
        "the header needs less than the whole file"
    );
}

#[test]
fn corrupt_headers_name_the_problem() {
    let good = sample_file();
    type Corrupt = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Corrupt, &str)> = vec![
        ("magic", Box::new(|b| b[0] = b'X'), "not a GGUF file"),
        ("version", Box::new(|b| b[4] = 9), "version 9"),
        (
            "big endian",
            Box::new(|b| b[4..8].copy_from_slice(&3u32.to_be_bytes())),
            "big-endian",
        ),
        (
            "huge kv count",
            Box::new(|b| b[16..24].copy_from_slice(&u64::MAX.to_le_bytes())),
            "metadata entries",
        ),
        (
            "huge tensor count",
            Box::new(|b| b[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes())),
            "tensor",
        ),
    ];
    for (name, corrupt, expect) in cases {
        let mut b = good.clone();
        corrupt(&mut b);
        let err = ModelFile::from_vec(b)
            .err()
            .unwrap_or_else(|| panic!("{name}: parsed"));
        assert!(err.to_string().contains(expect), "{name}: {err}");
    }
}

#[test]
fn bad_tensor_infos_are_rejected() {
    let data = [0u8; 40];
    let cases: Vec<(Vec<u64>, GgmlType, &[u8], &str)> = vec![
        (vec![10], GgmlType::Q8_0, &data[..34], "not a multiple"),
        (vec![64], GgmlType::Q8_0, &data[..34], "data of tensor"),
        (
            vec![1, 1, 1, 1, 1, 1],
            GgmlType::F32,
            &data[..4],
            "dimensions",
        ),
        (vec![u64::MAX, 2], GgmlType::F32, &data[..4], "overflow"),
    ];
    for (dims, ty, d, expect) in cases {
        let bytes = write_gguf(
            &[],
            &[TensorToWrite {
                name: "t",
                dims: &dims,
                ty,
                data: d,
            }],
            32,
        );
        // A tensor whose data runs past the end is only detectable when the writer wrote less than
        // the dims imply; for the others the header itself is inconsistent.
        let err = ModelFile::from_vec(bytes)
            .err()
            .unwrap_or_else(|| panic!("{dims:?} parsed"));
        assert!(err.to_string().contains(expect), "{dims:?}: {err}");
    }
}

#[test]
fn real_models_parse() {
    for (key, _) in weft_core::test_support::MODELS {
        let Some(path) = weft_core::test_support::model_path(key) else {
            continue;
        };
        let m = ModelFile::open(&path).unwrap();
        let g = &m.gguf;
        let reference = weft_core::test_support::reference(key).unwrap();
        assert_eq!(g.file_len, reference["model"]["bytes"].as_u64().unwrap());
        assert!(g.architecture().is_some());
        let vocab = g.get_array("tokenizer.ggml.tokens").unwrap();
        assert!(vocab.len() > 40_000);
        assert!(g.tensor("token_embd.weight").is_some());
        for t in &g.tensors {
            assert_eq!(m.tensor_data(t).len() as u64, t.n_bytes);
        }
    }
}

/// Inputs the fuzzer once crashed on (fuzz/): each must now parse or fail cleanly, and anything
/// parsed must have all its tensor data inside the file.
#[test]
fn fuzz_regressions_do_not_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        if let Ok(m) = ModelFile::from_vec(bytes) {
            for t in &m.gguf.tensors {
                assert_eq!(m.tensor_data(t).len() as u64, t.n_bytes);
            }
        }
        n += 1;
    }
    assert!(n > 0);
}
