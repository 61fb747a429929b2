//! `weft info`: correct metadata on the real models, one-line errors on corrupt files.

use std::process::Command;

use weft_core::test_support::{model_path, reference};

fn weft() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weft"))
}

#[test]
fn info_json_on_real_models() {
    let expect = [
        ("smollm2", "llama", 30, 576, "gpt2"),
        ("gemma3", "gemma3", 18, 640, "llama"),
        ("qwen2", "qwen2", 24, 896, "gpt2"),
    ];
    for (key, arch, layers, width, tok) in expect {
        let Some(path) = model_path(key) else {
            continue;
        };
        let out = weft()
            .arg("info")
            .arg(&path)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["architecture"], arch);
        assert_eq!(j["hparams"]["block_count"], layers);
        assert_eq!(j["hparams"]["embedding_length"], width);
        assert_eq!(j["tokenizer"]["model"], tok);
        assert_eq!(j["file_bytes"], reference(key).unwrap()["model"]["bytes"]);
        let tensors = j["tensors"].as_array().unwrap();
        let embd = tensors
            .iter()
            .find(|t| t["name"] == "token_embd.weight")
            .unwrap();
        assert_eq!(embd["dims"][0], width);

        let text = weft().arg("info").arg(&path).output().unwrap();
        assert!(text.status.success());
        let s = String::from_utf8(text.stdout).unwrap();
        assert!(s.contains(&format!("architecture:  {arch}")), "{s}");
        assert!(s.contains("token_embd.weight"));
    }
}

fn assert_one_line_error(path: &std::path::Path, expect: &str) {
    let out = weft().arg("info").arg(path).output().unwrap();
    assert!(!out.status.success());
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("weft: error:"), "{err}");
    assert!(err.contains(expect), "expected {expect:?} in {err}");
}

#[test]
fn info_on_corrupt_files_prints_one_line_and_fails() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let bytes = std::fs::read(&path).unwrap();
    let dir = std::env::temp_dir().join(format!("weft-info-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let truncated = dir.join("truncated.gguf");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    assert_one_line_error(&truncated, "truncated GGUF");

    let header_cut = dir.join("header.gguf");
    std::fs::write(&header_cut, &bytes[..100_000]).unwrap();
    assert_one_line_error(&header_cut, "truncated GGUF");

    let mut flipped = bytes[..4096].to_vec();
    flipped[0] ^= 0xff;
    let bad_magic = dir.join("magic.gguf");
    std::fs::write(&bad_magic, &flipped).unwrap();
    assert_one_line_error(&bad_magic, "not a GGUF file");

    let mut version = bytes[..4096].to_vec();
    version[5] = 0x7f;
    let bad_version = dir.join("version.gguf");
    std::fs::write(&bad_version, &version).unwrap();
    assert_one_line_error(&bad_version, "version");

    assert_one_line_error(&dir.join("missing.gguf"), "No such file");
    std::fs::remove_dir_all(&dir).ok();
}
