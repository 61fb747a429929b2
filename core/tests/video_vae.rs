//! Wan's video VAE against diffusers' `AutoencoderKLWan` on the tiny Wan model
//! (tests/data/video/README.md): the pipeline's denormalisation of the final latents, the
//! decoded frames (raw and as bytes) of run `t2v-unipc`, and the encoding of run `i2v-unipc`'s
//! first frame followed by zero frames, with the pipeline's normalisation of it.

mod video_files;

use video_files::{bits_differing, max_abs_diff, psnr_u8, relative_error, Run};
use weft_core::diffusion::{frames_to_u8, WanVae};

fn vae() -> WanVae {
    WanVae::load(&video_files::data("tiny-wan/t2v/vae")).unwrap()
}

fn shape4(shape: &[usize]) -> [usize; 4] {
    assert_eq!(shape[0], 1, "batch of one");
    [shape[1], shape[2], shape[3], shape[4]]
}

#[test]
fn denormalized_latents_match_the_pipeline() {
    let run = Run::open("t2v-unipc");
    let vae = vae();
    let mut latents = run.tensor("step3_latents").data;
    vae.denormalize(&mut latents);
    let want = run.tensor("vae_input").data;
    let differing = bits_differing(&latents, &want);
    eprintln!(
        "denormalised latents: {differing} of {} values differ, max |diff| {:.3e}",
        want.len(),
        max_abs_diff(&latents, &want)
    );
    assert_eq!(differing, 0);
}

#[test]
fn decoded_frames_match_the_pipeline() {
    let run = Run::open("t2v-unipc");
    let vae = vae();
    let input = run.tensor("vae_input");
    let frames = vae.decode(&input.data, shape4(&input.shape)).unwrap();
    let want = run.tensor("frames_raw");
    assert_eq!(
        [frames.c, frames.t, frames.h, frames.w],
        shape4(&want.shape)
    );
    let rel = relative_error(&frames.data, &want.data);
    let abs = max_abs_diff(&frames.data, &want.data);
    eprintln!("raw frames: relative error {rel:.3e}, max |diff| {abs:.3e}");
    assert!(rel <= 1e-4, "raw frames: relative error {rel:e}");

    let bytes: Vec<f32> = frames_to_u8(&frames).into_iter().map(f32::from).collect();
    let want_bytes = run.tensor("frames");
    assert_eq!(bytes.len(), want_bytes.data.len());
    let psnr = psnr_u8(&bytes, &want_bytes.data);
    let differing = bytes
        .iter()
        .zip(&want_bytes.data)
        .filter(|(a, b)| a != b)
        .count();
    let worst = max_abs_diff(&bytes, &want_bytes.data);
    eprintln!(
        "u8 frames: PSNR {psnr:.1} dB, {differing} of {} bytes differ (by at most {worst})",
        bytes.len()
    );
    assert!(psnr >= 40.0, "u8 frames: PSNR {psnr}");
    assert!(worst <= 1.0, "u8 frames differ by {worst}");
}

#[test]
fn decoding_is_causal_in_time() {
    // The first latent frame alone decodes to the first frame of the full clip, bit for bit:
    // nothing later leaks backwards.
    let run = Run::open("t2v-unipc");
    let vae = vae();
    let input = run.tensor("vae_input");
    let [z, t, h, w] = shape4(&input.shape);
    assert!(t >= 2);
    let full = vae.decode(&input.data, [z, t, h, w]).unwrap();
    let mut first = Vec::new();
    for c in 0..z {
        let at = c * t * h * w;
        first.extend_from_slice(&input.data[at..at + h * w]);
    }
    let one = vae.decode(&first, [z, 1, h, w]).unwrap();
    assert_eq!(one.t, 1);
    assert_eq!(one.data, full.frames(0, 1).data);
    // ... and the later frames do depend on the second latent frame.
    assert!(
        max_abs_diff(
            &full.frames(1, full.t).data,
            &full.frames(0, 1).data.repeat(full.t - 1)
        ) > 1e-3
    );
}

#[test]
fn encoded_condition_matches_the_pipeline() {
    let run = Run::open("i2v-unipc");
    let vae = vae();
    let image = run.tensor("image_pixels");
    let [_, c, h, w] = [
        image.shape[0],
        image.shape[1],
        image.shape[2],
        image.shape[3],
    ];
    let frames_n = run.manifest["num_frames"].as_u64().unwrap() as usize;
    // The first frame, then zero frames: [c, frames, h, w].
    let mut clip = vec![0f32; c * frames_n * h * w];
    for ch in 0..c {
        clip[ch * frames_n * h * w..ch * frames_n * h * w + h * w]
            .copy_from_slice(&image.data[ch * h * w..(ch + 1) * h * w]);
    }
    let mean = vae.encode(&clip, [c, frames_n, h, w]).unwrap();
    let moments = run.tensor("vae_encode_moments");
    let z = vae.config.z_dim;
    assert_eq!(moments.shape[1], 2 * z);
    let per = mean.t * mean.h * mean.w;
    assert_eq!(
        [mean.t, mean.h, mean.w],
        [moments.shape[2], moments.shape[3], moments.shape[4]]
    );
    let want = &moments.data[..z * per];
    let rel = relative_error(&mean.data, want);
    eprintln!(
        "encoder mean: relative error {rel:.3e}, max |diff| {:.3e}",
        max_abs_diff(&mean.data, want)
    );
    assert!(rel <= 1e-4, "encoder mean: relative error {rel:e}");

    // The pipeline's normalised condition is channels 20..36 of the transformer's input
    // (16 noise channels, 4 mask channels, then the condition).
    let input = run.tensor("transformer_input_step0");
    let mut ours = mean.data.clone();
    vae.normalize(&mut ours);
    let theirs = &input.data[(input.shape[1] - z) * per..];
    let rel = relative_error(&ours, theirs);
    eprintln!("normalised condition: relative error {rel:.3e}");
    assert!(rel <= 1e-4, "normalised condition: relative error {rel:e}");
}

#[test]
fn bad_input_is_an_error() {
    let vae = vae();
    let z = vae.config.z_dim;
    assert!(vae.decode(&[0.0; 4], [z, 1, 2, 2]).is_err());
    assert!(vae
        .decode(&vec![0.0; (z + 1) * 4], [z + 1, 1, 2, 2])
        .is_err());
    assert!(vae.decode(&[], [z, 0, 2, 2]).is_err());
    // 4 frames is not 1 + 4n; 12 pixels is not a multiple of 8.
    assert!(vae.encode(&vec![0.0; 3 * 4 * 8 * 8], [3, 4, 8, 8]).is_err());
    assert!(vae.encode(&vec![0.0; 3 * 12 * 8], [3, 1, 12, 8]).is_err());
    assert!(WanVae::load(&video_files::data("tiny-wan/t2v/text_encoder")).is_err());
}
