//! `weft convert` on a diffusers Wan pipeline folder (the tiny models of tests/data/video):
//! the command writes the DiT, UMT5 and VAE files named for the runtime's companion rule and
//! says what it wrote; a missing or file-shaped `-o` and an unknown `--type` are clear errors.
//! What the files hold is core's test (core/tests/video_wan_convert.rs).

use std::path::PathBuf;
use std::process::Command;

use weft_tests::weft_binary;

fn tiny(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/video/tiny-wan")
        .join(rel)
        .display()
        .to_string()
}

fn weft(args: &[&str]) -> (bool, String) {
    let out = Command::new(weft_binary())
        .args(args)
        .output()
        .expect("running weft");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn a_wan_pipeline_converts_to_a_folder_of_files() {
    let out = std::env::temp_dir().join(format!("weft-wan-convert-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = out.display().to_string();
    let (ok, text) = weft(&["convert", &tiny("t2v"), "-o", &o]);
    assert!(ok, "{text}");
    for (file, role) in [
        ("t2v.gguf", "DiT"),
        ("t2v-umt5.gguf", "UMT5 text encoder"),
        ("t2v-vae.safetensors", "VAE"),
    ] {
        assert!(out.join(file).is_file(), "{file} missing:\n{text}");
        assert!(text.contains(file) && text.contains(role), "{text}");
    }

    let (ok, text) = weft(&["convert", &tiny("i2v"), "-o", &o, "--type", "f16"]);
    assert!(ok, "{text}");
    assert!(out.join("i2v-high-noise.gguf").is_file(), "{text}");
    assert!(out.join("i2v-low-noise.gguf").is_file(), "{text}");
    assert!(
        text.contains("text_encoder: named by model_index.json but not in the folder"),
        "{text}"
    );

    for (args, expect) in [
        (vec!["convert", &tiny("t2v")], "-o DIR"),
        (
            vec!["convert", &tiny("t2v"), "-o", "x.gguf"],
            "not a .gguf path",
        ),
        (
            vec!["convert", &tiny("t2v"), "-o", &o, "--type", "Q9_9"],
            "--type Q9_9",
        ),
    ] {
        let (ok, text) = weft(&args);
        assert!(!ok && text.contains(expect), "{args:?}: {text}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
