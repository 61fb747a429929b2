//! Wan from GGUF files (`WanPipeline::load_gguf`): the tiny diffusers folders converted with
//! `weft convert`'s API into the DiT GGUF(s), the UMT5 GGUF (tokenizer embedded) and the
//! Wan-named VAE safetensors; the pipeline run from those files must give what the folder
//! pipeline gives (f32 conversion: the same numbers) and diffusers' final latents. Also the
//! embedded tokenizer against tokenizer.json, the configs read from GGUF metadata / shapes
//! against config.json, and the errors for missing companions.

mod video_files;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use video_files::{max_abs_diff, relative_error, Run};
use weft_core::diffusion::wan_convert::convert_pipeline;
use weft_core::diffusion::wan_pipeline_gguf::gguf_schedule;
use weft_core::diffusion::wan_vae_file::config_from_shapes;
use weft_core::diffusion::wan_vae_names::open_vae;
use weft_core::diffusion::{
    umt5_gguf, umt5_tokenizer, wan_pipeline::WAN_NEGATIVE_PROMPT, Companions, Control, Umt5Config,
    VideoMode, WanPipeline, WanVaeConfig,
};
use weft_core::gguf::ModelFile;
use weft_core::tokenizer::Tokenizer;

/// The tiny t2v and i2v folders converted into one folder, once per test binary: `t2v.gguf`,
/// `t2v-umt5.gguf`, `t2v-vae.safetensors`, `i2v-high-noise.gguf`, `i2v-low-noise.gguf` (the i2v
/// folder has no encoder or VAE of its own: the single `*umt5*` / `*vae*` files beside it are
/// its companions, as with files downloaded one by one).
fn converted() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wan-gguf-pipeline");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for model in ["t2v", "i2v"] {
            let src = video_files::data(&format!("tiny-wan/{model}"));
            convert_pipeline(&src, &dir, None, None, &mut |_, _, _| true)
                .unwrap_or_else(|e| panic!("{model}: {e}"));
        }
        dir
    })
}

fn final_latents(p: &mut WanPipeline, run: &Run) -> Vec<f32> {
    p.max_sequence_length = run.manifest["max_sequence_length"].as_u64().unwrap() as usize;
    p.generate(&run.request(None), &mut |_| Control::Continue)
        .unwrap()
        .latents
}

/// The GGUF trio runs as the folder does, and as diffusers did.
fn check(run_name: &str, folder: &str, dit: &str, mode: VideoMode, two: bool) {
    let run = Run::open(run_name);
    let path = converted().join(dit);
    let mut gguf = WanPipeline::load_gguf(&path, &Companions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(gguf.mode(), mode);
    assert_eq!(gguf.has_two_experts(), two);
    let mut folder = WanPipeline::load(&video_files::data(folder), &Companions::default()).unwrap();
    let ours = final_latents(&mut gguf, &run);
    let theirs = final_latents(&mut folder, &run);
    let steps = run.steps();
    let want = run
        .tensor(steps.last().unwrap()["latents"].as_str().unwrap())
        .data;
    let (vs_folder, vs_diffusers) = (relative_error(&ours, &theirs), relative_error(&ours, &want));
    eprintln!(
        "{run_name} from {dit}: vs the folder pipeline relative {vs_folder:.3e} (max |diff| \
         {:.3e}); vs diffusers {vs_diffusers:.3e}",
        max_abs_diff(&ours, &theirs)
    );
    assert!(
        vs_folder <= 1e-6,
        "{run_name}: {vs_folder:e} from the folder's"
    );
    assert!(
        vs_diffusers <= 1e-3,
        "{run_name}: {vs_diffusers:e} from diffusers'"
    );
    assert!(relative_error(&ours, &run.tensor("noise").data) > 0.1);
}

#[test]
fn t2v_from_gguf_files_matches_the_folder_and_diffusers() {
    // The folder's scheduler is the Wan 2.1 recipe the GGUF loader assumes (UniPC, shift 3).
    assert_eq!(gguf_schedule(false, VideoMode::TextToVideo), (3.0, None));
    check(
        "t2v-unipc",
        "tiny-wan/t2v",
        "t2v.gguf",
        VideoMode::TextToVideo,
        false,
    );
}

#[test]
fn i2v_expert_pair_from_either_file_matches_the_folder_and_diffusers() {
    // Wan 2.2 I2V-A14B's recipe: shift 5, boundary 0.9, as the tiny i2v folder's configs.
    assert_eq!(
        gguf_schedule(true, VideoMode::ImageToVideo),
        (5.0, Some(0.9))
    );
    check(
        "i2v-unipc",
        "tiny-wan/i2v",
        "i2v-low-noise.gguf",
        VideoMode::ImageToVideo,
        true,
    );
}

/// Texts the embedded tokenizer must split as tokenizer.json does.
fn texts() -> Vec<String> {
    let run = Run::open("t2v-unipc");
    let mut t: Vec<String> = ["prompt", "negative_prompt"]
        .iter()
        .map(|k| run.manifest[*k].as_str().unwrap().to_string())
        .collect();
    t.push(WAN_NEGATIVE_PROMPT.into());
    t.extend(
        [
            "  A cat  sits\ton a mat.  ",
            "ＡＢＣ fullwidth, café, naïve — “quotes” ½",
            "</s> <pad> <unk> literal specials",
            "",
            "snow snow snow fox fox dawn",
        ]
        .map(String::from),
    );
    t
}

#[test]
fn embedded_tokenizer_gives_tokenizer_json_ids() {
    let file = ModelFile::open(converted().join("t2v-umt5.gguf")).unwrap();
    let ours = umt5_tokenizer::from_gguf(&file.gguf).unwrap();
    let json = std::fs::read(video_files::data("tiny-wan/t2v/tokenizer/tokenizer.json")).unwrap();
    let reference = Tokenizer::from_tokenizer_json(&json).unwrap();
    for text in texts() {
        let want = reference.encode(&text, true, false);
        assert_eq!(ours.encode(&text, true, false), want, "{text:?}");
    }
    // The pipeline's ids on the reference prompt (also what llama.cpp reads from the file).
    let run = Run::open("t2v-unipc");
    let ids = ours.encode(run.manifest["prompt"].as_str().unwrap(), true, false);
    assert_eq!(ids, [29, 48, 111, 156, 49, 45, 166, 40, 94, 20, 1]);
}

#[test]
fn configs_from_metadata_and_shapes_equal_config_json() {
    let t2v = video_files::data("tiny-wan/t2v");
    let path = converted().join("t2v-umt5.gguf");
    let file = ModelFile::open(&path).unwrap();
    let want = Umt5Config::from_json(&t2v.join("text_encoder/config.json")).unwrap();
    assert_eq!(umt5_gguf::config(&file, &path).unwrap(), want);

    let path = converted().join("t2v-vae.safetensors");
    let file = open_vae(&path).unwrap();
    let want = WanVaeConfig::from_json(&t2v.join("vae/config.json")).unwrap();
    // The folder's latents statistics are Wan 2.1's constants, which the file lacks.
    assert_eq!(config_from_shapes(&file, &path).unwrap(), want);
}

/// A scratch folder holding copies of some converted files.
fn folder_with(name: &str, files: &[&str]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("wan-gguf-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in files {
        std::fs::copy(converted().join(f), dir.join(f)).unwrap();
    }
    dir
}

fn load_error(dit: &Path, given: &Companions) -> String {
    match WanPipeline::load_gguf(dit, given) {
        Ok(_) => panic!("{} loaded", dit.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn missing_companions_are_clear_errors() {
    let alone = folder_with("alone", &["t2v.gguf"]);
    let e = load_error(&alone.join("t2v.gguf"), &Companions::default());
    assert!(e.contains("no UMT5 text encoder"), "{e}");
    assert!(
        e.contains(&alone.join("t2v-umt5.gguf").display().to_string()),
        "{e}"
    );
    assert!(e.contains("--video-text-encoder"), "{e}");

    let no_vae = folder_with("no-vae", &["t2v.gguf", "t2v-umt5.gguf"]);
    let e = load_error(&no_vae.join("t2v.gguf"), &Companions::default());
    assert!(e.contains("no Wan VAE"), "{e}");
    assert!(
        e.contains(&no_vae.join("t2v-vae.safetensors").display().to_string()),
        "{e}"
    );
    assert!(e.contains("--video-vae"), "{e}");
    // Named, it is found wherever it is.
    let given = Companions {
        vae: Some(converted().join("t2v-vae.safetensors")),
        ..Default::default()
    };
    WanPipeline::load_gguf(&no_vae.join("t2v.gguf"), &given).unwrap();

    let half = folder_with(
        "half-pair",
        &[
            "i2v-high-noise.gguf",
            "t2v-umt5.gguf",
            "t2v-vae.safetensors",
        ],
    );
    let e = load_error(&half.join("i2v-high-noise.gguf"), &Companions::default());
    assert!(
        e.contains(&half.join("i2v-low-noise.gguf").display().to_string()),
        "{e}"
    );
    assert!(e.contains("missing"), "{e}");

    // The wrong kind of file in a companion's place, and a DiT that is not there.
    let given = Companions {
        text_encoder: Some(converted().join("t2v.gguf")),
        ..Default::default()
    };
    let e = load_error(&converted().join("t2v.gguf"), &given);
    assert!(e.contains("t5encoder"), "{e}");
    let e = load_error(&alone.join("nothing.gguf"), &Companions::default());
    assert!(e.contains("no such file"), "{e}");
}
