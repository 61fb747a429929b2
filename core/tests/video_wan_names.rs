//! The diffusers <-> GGUF name map of Wan's DiT and the zero-copy view of a diffusers
//! `transformer/` folder under GGUF names, on the tiny models of tests/data/video: every
//! tensor of the safetensors file appears once under its GGUF name with the same shape, type
//! and bytes, and the config read back from the view's header equals the folder's
//! config.json.

mod video_files;

use std::path::Path;

use safetensors::SafeTensors;
use weft_core::diffusion::wan_dit::WanDitConfig;
use weft_core::diffusion::wan_gguf::dit_info;
use weft_core::diffusion::wan_names::{dit_diffusers_name, dit_gguf_name, KEY_HEAD_COUNT};
use weft_core::diffusion::{open_diffusers_dit, ModelFileError};

fn check_view(dir: &Path) {
    let view = open_diffusers_dit(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let bytes = std::fs::read(dir.join("diffusion_pytorch_model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(view.gguf.tensors.len(), st.len(), "{}", dir.display());
    for (name, t) in st.tensors() {
        let gguf = dit_gguf_name(&name).unwrap_or_else(|| panic!("{name} has no GGUF name"));
        assert_eq!(dit_diffusers_name(&gguf).as_deref(), Some(name.as_str()));
        let (info, data) = view
            .tensor(&gguf)
            .unwrap_or_else(|| panic!("{gguf} missing from the view"));
        let dims: Vec<usize> = info.dims.iter().rev().map(|&d| d as usize).collect();
        assert_eq!(dims, t.shape(), "{gguf}");
        assert_eq!(data, t.data(), "{gguf}: bytes differ");
        // Zero-copy: the view's bytes are the file's, at the same place.
        assert_eq!(
            data.as_ptr() as usize - view.bytes().as_ptr() as usize,
            t.data().as_ptr() as usize - bytes.as_ptr() as usize,
            "{gguf}: not in place"
        );
    }
    assert_eq!(view.gguf.architecture(), Some("wan"));
    let info = dit_info(&view.gguf, dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let want = WanDitConfig::from_json(&dir.join("config.json")).unwrap();
    assert_eq!(info.config, want, "{}", dir.display());
    assert!(info.heads_from_metadata);
    assert_eq!(info.image_dim, None);
    let patch = view.gguf.tensor("patch_embedding.weight").unwrap();
    assert_eq!(patch.dims.len(), 5, "the conv3d weight stays 5-D");
}

#[test]
fn diffusers_transformers_are_seen_under_gguf_names() {
    for rel in [
        "tiny-wan/t2v/transformer",
        "tiny-wan/i2v/transformer",
        "tiny-wan/i2v/transformer_2",
    ] {
        check_view(&video_files::data(rel));
    }
}

#[test]
fn the_head_count_comes_from_the_file_or_dim_over_128() {
    let dir = video_files::data("tiny-wan/t2v/transformer");
    let mut view = open_diffusers_dit(&dir).unwrap();
    view.gguf.metadata.retain(|(k, _)| k != KEY_HEAD_COUNT);
    // dim 32: without the key, ComfyUI's dim / 128 cannot apply.
    let err = dit_info(&view.gguf, &dir).unwrap_err().to_string();
    assert!(err.contains(KEY_HEAD_COUNT) && err.contains("128"), "{err}");
}

#[test]
fn a_folder_that_is_not_a_wan_transformer_is_refused_by_name() {
    let vae = video_files::data("tiny-wan/t2v/vae");
    let Err(err) = open_diffusers_dit(&vae) else {
        panic!("a VAE folder opened as a DiT")
    };
    assert!(matches!(err, ModelFileError::Config { .. }), "{err}");
    assert!(err.to_string().contains("AutoencoderKLWan"), "{err}");
    let missing = video_files::data("tiny-wan/t2v/no-such-folder");
    let Err(err) = open_diffusers_dit(&missing) else {
        panic!("a missing folder opened")
    };
    let err = err.to_string();
    assert!(err.contains("no-such-folder"), "{err}");
}
