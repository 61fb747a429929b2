//! `gaussian_noise` against PyTorch's CPU `randn` (files made by scripts/video/make_noise_ref.py;
//! the pipeline runs' noise.f32 is diffusers' own initial latents for seed 1234).

use std::path::PathBuf;

use weft_core::diffusion::noise::gaussian_noise;

fn data(rel: &str) -> Vec<f32> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/video/ref")
        .join(rel);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// Torch's AVX2 Box-Muller uses its own log/sin/cos, so a value may differ in its last bits;
/// anything more is a wrong draw (a wrong draw is off by O(1)).
fn assert_close(ours: &[f32], theirs: &[f32], what: &str) {
    assert_eq!(ours.len(), theirs.len(), "{what}: length");
    let mut exact = 0;
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        let tolerance = 4.0 * f32::EPSILON * b.abs().max(1.0);
        assert!(
            (a - b).abs() <= tolerance,
            "{what}[{i}]: ours {a}, torch {b}"
        );
        exact += (a == b) as usize;
    }
    eprintln!(
        "{what}: {exact} of {} bit-identical, the rest within 4 ulp",
        ours.len()
    );
}

#[test]
fn matches_torch_randn_for_the_pipeline_seed() {
    for run in ["t2v-unipc", "t2v-euler", "i2v-unipc"] {
        let theirs = data(&format!("{run}/noise.f32"));
        assert_close(&gaussian_noise(1234, theirs.len()), &theirs, run);
    }
}

#[test]
fn matches_torch_randn_for_tails_small_counts_and_wide_seeds() {
    for (seed, n) in [(7u64, 17usize), ((1 << 40) + 5, 100), (0, 16), (99, 4096)] {
        let theirs = data(&format!("noise/seed{seed}_n{n}.f32"));
        assert_close(
            &gaussian_noise(seed, n),
            &theirs,
            &format!("seed {seed}, n {n}"),
        );
    }
}
