//! The whole Wan pipeline (`WanPipeline::generate`: tokenizer, UMT5, DiT experts with
//! guidance, scheduler, VAE) against diffusers' `WanPipeline` / `WanImageToVideoPipeline` on
//! the tiny models (tests/data/video), started from the reference's exported noise: the final
//! latents and the u8 frames must match. Also the progress reports and cancellation.

mod video_files;

use video_files::{first_frame, psnr_u8, relative_error, Run};
use weft_core::diffusion::{
    Companions, Control, Phase, Progress, Sampler, VideoError, VideoMode, VideoRequest, WanPipeline,
};

fn pipeline(mode: &str, run: &Run) -> WanPipeline {
    let dir = video_files::data(&format!("tiny-wan/{mode}"));
    let mut p = WanPipeline::load(&dir, &Companions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    // The reference runs pad the text to 24 rows instead of the pipelines' 512.
    p.max_sequence_length = run.manifest["max_sequence_length"].as_u64().unwrap() as usize;
    p
}

/// Runs `name` and checks the final latents and the frames against diffusers'.
fn check_run(name: &str, sampler: Sampler) {
    let run = Run::open(name);
    let mode = &name[..3];
    let p = pipeline(mode, &run);
    let mut heard = Vec::new();
    let video = p
        .generate(&run.request(Some(sampler)), &mut |r| {
            heard.push(r);
            Control::Continue
        })
        .unwrap();

    let steps = run.steps();
    let want = run.tensor(steps.last().unwrap()["latents"].as_str().unwrap());
    let rel = relative_error(&video.latents, &want.data);
    let frames = run.tensor("frames");
    assert_eq!(
        frames.shape,
        vec![video.frames, video.height, video.width, 3]
    );
    let ours: Vec<f32> = video.rgb.iter().map(|&b| f32::from(b)).collect();
    let psnr = psnr_u8(&ours, &frames.data);
    let differing = ours
        .iter()
        .zip(&frames.data)
        .filter(|(a, b)| a != b)
        .count();
    eprintln!(
        "{name}: final latents relative error {rel:.3e}; frames PSNR {psnr:.1} dB, \
         {differing} of {} bytes differ",
        ours.len()
    );
    assert!(rel <= 1e-3, "{name}: latents {rel:e}");
    assert!(psnr >= 40.0, "{name}: PSNR {psnr}");
    // The run did something (a do-nothing pipeline would leave the noise).
    assert!(relative_error(&video.latents, &run.tensor("noise").data) > 0.1);

    // Progress: text-encode, (image-encode,) denoise 0..=steps, vae-decode, in that order.
    let mut expected = vec![(Phase::TextEncode, 0, 1), (Phase::TextEncode, 1, 1)];
    if mode == "i2v" {
        expected.extend([(Phase::ImageEncode, 0, 1), (Phase::ImageEncode, 1, 1)]);
    }
    expected.extend((0..=steps.len()).map(|i| (Phase::Denoise, i, steps.len())));
    expected.extend([(Phase::VaeDecode, 0, 1), (Phase::VaeDecode, 1, 1)]);
    let heard: Vec<_> = heard.iter().map(|r| (r.phase, r.step, r.total)).collect();
    assert_eq!(heard, expected);
}

#[test]
fn t2v_unipc_matches_diffusers() {
    check_run("t2v-unipc", Sampler::UniPc);
}

#[test]
fn t2v_euler_matches_diffusers() {
    check_run("t2v-euler", Sampler::Euler);
}

#[test]
fn i2v_unipc_matches_diffusers() {
    check_run("i2v-unipc", Sampler::UniPc);
}

#[test]
fn text_encoding_matches_the_pipeline() {
    // Real tokens encoded alone, padded with zero rows, are the pipeline's padded encoding.
    let run = Run::open("t2v-unipc");
    let p = pipeline("t2v", &run);
    for (key, file) in [
        ("prompt", "prompt_embeds"),
        ("negative_prompt", "negative_prompt_embeds"),
    ] {
        let ours = p.encode_text(run.manifest[key].as_str().unwrap()).unwrap();
        let want = run.tensor(file).data;
        let rel = relative_error(&ours, &want);
        assert!(rel <= 1e-5, "{key}: {rel:e}");
    }
}

#[test]
fn cancel_stops_between_steps() {
    let run = Run::open("t2v-unipc");
    let p = pipeline("t2v", &run);
    let mut heard: Vec<Progress> = Vec::new();
    let result = p.generate(&run.request(Some(Sampler::UniPc)), &mut |r| {
        heard.push(r);
        if r.phase == Phase::Denoise && r.step == 2 {
            Control::Stop
        } else {
            Control::Continue
        }
    });
    assert!(matches!(result, Err(VideoError::Cancelled)), "{result:?}");
    let last = heard.last().unwrap();
    assert_eq!((last.phase, last.step), (Phase::Denoise, 2));
    assert!(heard.iter().all(|r| r.phase != Phase::VaeDecode));
}

#[test]
fn same_seed_same_frames() {
    let run = Run::open("t2v-unipc");
    let p = pipeline("t2v", &run);
    let mut r = run.request(Some(Sampler::UniPc));
    r.noise = None;
    r.steps = Some(2);
    r.seed = 7;
    let go = |r: &VideoRequest| p.generate(r, &mut |_| Control::Continue).unwrap();
    let (a, b) = (go(&r), go(&r));
    assert_eq!(a.rgb, b.rgb);
    r.seed = 8;
    assert_ne!(go(&r).latents, a.latents);
}

/// Diffusers' runs drew their noise with `torch.Generator().manual_seed(noise_seed)`: the same
/// seed here, with no noise given, makes the same video.
#[test]
fn the_reference_seed_gives_the_reference_video() {
    let run = Run::open("t2v-unipc");
    let p = pipeline("t2v", &run);
    let mut r = run.request(Some(Sampler::UniPc));
    r.noise = None;
    r.seed = run.manifest["noise_seed"].as_u64().unwrap();
    let video = p.generate(&r, &mut |_| Control::Continue).unwrap();
    let steps = run.steps();
    let want = run.tensor(steps.last().unwrap()["latents"].as_str().unwrap());
    let rel = relative_error(&video.latents, &want.data);
    eprintln!("seed {}: final latents relative error {rel:.3e}", r.seed);
    assert!(rel <= 1e-3, "latents {rel:e}");
}

#[test]
fn requests_the_model_cannot_serve_are_refused() {
    let run = Run::open("t2v-unipc");
    let t2v = pipeline("t2v", &run);
    assert_eq!(t2v.mode(), VideoMode::TextToVideo);
    assert!(!t2v.has_two_experts());
    assert_eq!((t2v.size_grid(), t2v.frame_step()), (16, 4));
    let base = run.request(Some(Sampler::UniPc));
    let refuse = |p: &WanPipeline, r: VideoRequest| {
        let e = p.generate(&r, &mut |_| Control::Continue).unwrap_err();
        assert!(matches!(e, VideoError::Request(_)), "{e}");
        e.to_string()
    };
    let e = refuse(
        &t2v,
        VideoRequest {
            image: Some(first_frame()),
            ..base.clone()
        },
    );
    assert!(e.contains("text-to-video"), "{e}");
    let e = refuse(
        &t2v,
        VideoRequest {
            noise: Some(vec![0.0; 5]),
            ..base.clone()
        },
    );
    assert!(e.contains("noise"), "{e}");
    refuse(
        &t2v,
        VideoRequest {
            frames: Some(0),
            ..base.clone()
        },
    );
    let i2v_run = Run::open("i2v-unipc");
    let i2v = pipeline("i2v", &i2v_run);
    assert_eq!(i2v.mode(), VideoMode::ImageToVideo);
    assert!(i2v.has_two_experts());
    let e = refuse(
        &i2v,
        VideoRequest {
            image: None,
            ..i2v_run.request(Some(Sampler::UniPc))
        },
    );
    assert!(e.contains("needs an image"), "{e}");
    // A folder that is not a pipeline.
    assert!(WanPipeline::load(
        &video_files::data("tiny-wan/t2v/vae"),
        &Companions::default()
    )
    .is_err());
}
