//! Wan's DiT (`WanTransformer3DModel`) as a backend graph against diffusers on the tiny Wan
//! models (tests/data/video, made by scripts/video/make_tiny_wan.py), on the CPU backend and
//! on wgpu (lavapipe here; skipped loudly without an adapter, a failure under CI).
//!
//! Per step: the transformer is fed what diffusers' pipeline fed it (the latents before the
//! step, recorded by the reference, the step's timestep and the recorded prompt / negative
//! prompt encodings) and must give the recorded cond / uncond outputs. End to end (t2v and i2v):
//! the DiT, guidance, the expert switch and the UniPC scheduler from the initial noise give
//! the pipeline's latents after every step.

mod video_files;
mod wgpu_support;

use std::sync::Arc;

use video_files::{max_abs_diff, relative_error, Run};
use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::wgpu::WgpuOptions;
use weft_core::backend::Backend;
use weft_core::diffusion::wan_convert::convert_dit;
use weft_core::diffusion::wan_dit::{WanDit, WanDitConfig};
use weft_core::diffusion::wan_names::open_diffusers_dit;
use weft_core::diffusion::{classifier_free_guidance, Expert, SchedulerSpec};
use weft_core::quantize::FileType;

/// The bound on one transformer evaluation.
const STEP_TOLERANCE: f64 = 1e-4;
/// The bound on the pipeline's final latents.
const END_TO_END_TOLERANCE: f64 = 1e-3;

/// The backends a test runs on.
#[derive(Clone, Copy, Debug)]
enum On {
    Cpu,
    Wgpu,
}

/// A backend of that kind, or None (wgpu without an adapter, said loudly).
fn backend(on: On) -> Option<Box<dyn Backend>> {
    match on {
        On::Cpu => Some(Box::new(CpuBackend::new(2))),
        On::Wgpu => {
            wgpu_support::backend(&WgpuOptions::default()).map(|b| Box::new(b) as Box<dyn Backend>)
        }
    }
}

/// The transformer of a diffusers folder, loaded into `backend`.
fn load(folder: &str, backend: &mut dyn Backend) -> WanDit {
    WanDit::load_diffusers(&video_files::data(folder), backend)
        .unwrap_or_else(|e| panic!("{folder}: {e}"))
}

/// `[frames, height, width]` of a `[1, C, T, H, W]` tensor.
fn grid(shape: &[usize]) -> [usize; 3] {
    [shape[2], shape[3], shape[4]]
}

/// Checks every step's cond / uncond outputs of run `name`; `input` makes the transformer's
/// input from the latents before the step. Returns the worst relative error.
fn check_steps(on: On, name: &str, input: impl Fn(&[f32]) -> Vec<f32>) -> f64 {
    let Some(mut backend) = backend(on) else {
        return 0.0;
    };
    let backend = backend.as_mut();
    let run = Run::open(name);
    let prompt = run.tensor("prompt_embeds").data;
    let negative = run.tensor("negative_prompt_embeds").data;
    let noise = run.tensor("noise");
    let mut latents = noise.data.clone();
    let mut worst = 0f64;
    for (i, step) in run.steps().iter().enumerate() {
        let expert = step["expert"].as_str().unwrap();
        let dit = load(&format!("tiny-wan/{}/{expert}", &name[..3]), backend);
        let t = step["transformer_timestep"].as_f64().unwrap() as f32;
        let x = input(&latents);
        for (key, text) in [("cond", &prompt), ("uncond", &negative)] {
            let want = run.tensor(step[key].as_str().unwrap()).data;
            let clock = std::time::Instant::now();
            let ours = dit
                .forward(backend, &x, grid(&noise.shape), t, text)
                .unwrap();
            let took = clock.elapsed();
            let rel = relative_error(&ours, &want);
            let abs = max_abs_diff(&ours, &want);
            eprintln!(
                "{on:?} {name} step {i} ({expert}, t = {t}) {key}: relative error {rel:.3e}, \
                 max |diff| {abs:.3e} ({took:?})"
            );
            assert!(rel <= STEP_TOLERANCE, "{name} step {i} {key}: {rel:e}");
            worst = worst.max(rel);
        }
        latents = run.tensor(step["latents"].as_str().unwrap()).data;
    }
    worst
}

fn t2v_steps(on: On) {
    let worst = check_steps(on, "t2v-unipc", |latents| latents.to_vec());
    eprintln!("{on:?} t2v-unipc: worst relative error {worst:.3e}");
}

fn i2v_steps(on: On) {
    // The i2v transformers take 36 channels: the noisy latents, then the 4 mask and 16
    // encoded-image channels, which stay what they were at step 0.
    let condition = i2v_condition();
    let worst = check_steps(on, "i2v-unipc", |latents| {
        let mut x = latents.to_vec();
        x.extend_from_slice(&condition);
        x
    });
    eprintln!("{on:?} i2v-unipc: worst relative error {worst:.3e}");
}

#[test]
fn t2v_steps_match_diffusers() {
    t2v_steps(On::Cpu);
}

#[test]
fn i2v_steps_match_diffusers() {
    i2v_steps(On::Cpu);
}

#[test]
fn t2v_steps_match_diffusers_on_wgpu() {
    t2v_steps(On::Wgpu);
}

#[test]
fn i2v_steps_match_diffusers_on_wgpu() {
    i2v_steps(On::Wgpu);
}

/// Runs the whole denoising loop of run `name` from its noise: the DiT (the expert
/// `ExpertSwitch` picks, its guidance scale), guidance and the run's scheduler; `condition`
/// is appended to the latents as the transformer's extra input channels (i2v).
fn check_end_to_end(on: On, name: &str, condition: &[f32]) {
    let Some(mut backend) = backend(on) else {
        return;
    };
    let backend = backend.as_mut();
    let run = Run::open(name);
    let mode = &name[..3];
    let high = load(&format!("tiny-wan/{mode}/transformer"), backend);
    let low = (mode == "i2v").then(|| load(&format!("tiny-wan/{mode}/transformer_2"), backend));
    let prompt = run.tensor("prompt_embeds").data;
    let negative = run.tensor("negative_prompt_embeds").data;
    let noise = run.tensor("noise");
    let mut config = run.manifest["scheduler"]["config"].clone();
    config["_class_name"] = run.manifest["scheduler"]["class"].clone();
    let steps = run.steps();
    let mut sched = SchedulerSpec::from_diffusers_config(&config)
        .unwrap()
        .build(steps.len())
        .unwrap();
    let guidance = run.guidance();
    let mut latents = noise.data.clone();
    for (i, step) in steps.iter().enumerate() {
        let t = sched.timesteps()[i];
        let expert = guidance.switch.expert(t);
        let cfg = guidance.scale(expert);
        let dit = match expert {
            Expert::High => &high,
            Expert::Low => low.as_ref().unwrap_or(&high),
        };
        let mut x = latents.clone();
        x.extend_from_slice(condition);
        let g = grid(&noise.shape);
        let mut cond = dit.forward(backend, &x, g, t, &prompt).unwrap();
        let uncond = dit.forward(backend, &x, g, t, &negative).unwrap();
        classifier_free_guidance(&mut cond, &uncond, cfg).unwrap();
        sched.step(&cond, &mut latents).unwrap();
        let want = run.tensor(step["latents"].as_str().unwrap()).data;
        let rel = relative_error(&latents, &want);
        eprintln!("{on:?} {name} end to end, after step {i}: relative error {rel:.3e}");
        assert!(rel <= END_TO_END_TOLERANCE, "{name} step {i}: {rel:e}");
    }
    // The run moved the latents away from the noise (a do-nothing model would not pass).
    assert!(relative_error(&latents, &noise.data) > 0.1);
}

/// The i2v transformers' extra input channels (mask, encoded image), recorded at step 0.
fn i2v_condition() -> Vec<f32> {
    let run = Run::open("i2v-unipc");
    let first = run.tensor("transformer_input_step0");
    let noise = run.tensor("noise").data;
    assert_eq!(first.shape[1], 36);
    assert_eq!(
        first.data[..noise.len()],
        noise[..],
        "step 0 input starts with the noise"
    );
    first.data[noise.len()..].to_vec()
}

#[test]
fn t2v_pipeline_end_to_end() {
    check_end_to_end(On::Cpu, "t2v-unipc", &[]);
}

#[test]
fn i2v_pipeline_end_to_end() {
    check_end_to_end(On::Cpu, "i2v-unipc", &i2v_condition());
}

#[test]
fn t2v_pipeline_end_to_end_on_wgpu() {
    check_end_to_end(On::Wgpu, "t2v-unipc", &[]);
}

#[test]
fn i2v_pipeline_end_to_end_on_wgpu() {
    check_end_to_end(On::Wgpu, "i2v-unipc", &i2v_condition());
}

#[test]
fn the_experts_differ() {
    // Each i2v step is checked with the expert the manifest names; the other one is far off,
    // so the per-step test tells them apart.
    let run = Run::open("i2v-unipc");
    let noise = run.tensor("noise");
    let mut x = run.tensor("step1_latents").data;
    x.extend_from_slice(&i2v_condition());
    let prompt = run.tensor("prompt_embeds").data;
    let want = run.tensor("step2_cond").data;
    let mut cpu = CpuBackend::new(2);
    let wrong = load("tiny-wan/i2v/transformer", &mut cpu);
    let ours = wrong
        .forward(&mut cpu, &x, grid(&noise.shape), 833.0, &prompt)
        .unwrap();
    assert!(relative_error(&ours, &want) > 1e-2);
}

#[test]
fn the_prediction_depends_on_text_and_timestep() {
    let run = Run::open("t2v-unipc");
    let mut cpu = CpuBackend::new(2);
    let dit = load("tiny-wan/t2v/transformer", &mut cpu);
    let noise = run.tensor("noise");
    let prompt = run.tensor("prompt_embeds").data;
    let negative = run.tensor("negative_prompt_embeds").data;
    let g = grid(&noise.shape);
    let a = dit
        .forward(&mut cpu, &noise.data, g, 999.0, &prompt)
        .unwrap();
    let b = dit
        .forward(&mut cpu, &noise.data, g, 999.0, &negative)
        .unwrap();
    let c = dit
        .forward(&mut cpu, &noise.data, g, 500.0, &prompt)
        .unwrap();
    assert!(relative_error(&a, &b) > 1e-3);
    assert!(relative_error(&a, &c) > 1e-3);
}

#[test]
fn bad_input_is_an_error() {
    let mut cpu = CpuBackend::new(2);
    let b = &mut cpu;
    let dit = load("tiny-wan/t2v/transformer", b);
    let c = &dit.config;
    let text = vec![0f32; 3 * c.text_dim];
    let latents = vec![0f32; c.in_channels * 2 * 6 * 8];
    assert!(dit.forward(b, &latents, [2, 6, 8], 1.0, &text).is_ok());
    // Wrong length, odd size (the patch is 1 x 2 x 2), ragged text, no text, NaN timestep.
    assert!(dit
        .forward(b, &latents[1..], [2, 6, 8], 1.0, &text)
        .is_err());
    let odd = vec![0f32; c.in_channels * 2 * 5 * 8];
    assert!(dit.forward(b, &odd, [2, 5, 8], 1.0, &text).is_err());
    assert!(dit
        .forward(b, &latents, [2, 6, 8], 1.0, &text[1..])
        .is_err());
    assert!(dit.forward(b, &latents, [2, 6, 8], 1.0, &[]).is_err());
    assert!(dit
        .forward(b, &latents, [2, 6, 8], f32::NAN, &text)
        .is_err());
    // Not a transformer's weights: the VAE folder has no config of this kind.
    assert!(WanDitConfig::from_json(&video_files::data("tiny-wan/t2v/vae/config.json")).is_err());
    // A transformer's weights checked against another config: a shape differs, by name.
    let i2v = WanDitConfig::from_json(&video_files::data("tiny-wan/i2v/transformer/config.json"))
        .unwrap();
    let t2v_file = open_diffusers_dit(&video_files::data("tiny-wan/t2v/transformer")).unwrap();
    let e = WanDit::load(i2v, &Arc::new(t2v_file), b)
        .err()
        .expect("a shape mismatch");
    assert!(e.to_string().contains("patch_embedding.weight"), "{e}");
}

/// The same transformer converted to GGUF files (city96's layout; as stored, and Q8_0 where
/// a matrix takes it) and loaded from them: as stored, the prediction is the diffusers
/// folder's bit for bit; Q8_0 weights run through the quant kernels, close to diffusers.
#[test]
fn gguf_files_give_the_prediction() {
    let run = Run::open("t2v-unipc");
    let noise = run.tensor("noise");
    let prompt = run.tensor("prompt_embeds").data;
    let want = run.tensor("step0_cond").data;
    let dir = video_files::data("tiny-wan/t2v/transformer");
    let tmp = std::env::temp_dir().join(format!("weft-video-dit-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut cpu = CpuBackend::new(2);
    let folder = load("tiny-wan/t2v/transformer", &mut cpu);
    let g = grid(&noise.shape);
    let from_folder = folder
        .forward(&mut cpu, &noise.data, g, 999.0, &prompt)
        .unwrap();
    for (target, bound) in [(None, 0.0), (Some(FileType::Q8_0), 2e-2)] {
        let path = tmp.join(format!("dit-{target:?}.gguf"));
        convert_dit(&dir, "tiny", target, &path, &mut |_, _, _| true).unwrap();
        let dit = WanDit::load_gguf(&path, &mut cpu).unwrap();
        assert_eq!(dit.config, folder.config);
        let ours = dit
            .forward(&mut cpu, &noise.data, g, 999.0, &prompt)
            .unwrap();
        let (to_folder, to_ref) = (
            relative_error(&ours, &from_folder),
            relative_error(&ours, &want),
        );
        eprintln!("GGUF {target:?}: relative error {to_folder:.3e} to the folder's, {to_ref:.3e} to diffusers");
        if target.is_none() {
            assert_eq!(ours, from_folder);
        } else {
            assert!(to_folder > 0.0 && to_ref <= bound, "{to_ref:e}");
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
