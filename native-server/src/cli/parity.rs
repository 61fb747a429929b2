//! `weft parity`: the matrix products of a backend against the CPU backend, for every weight
//! type the models use, on random weights written with Weft's GGUF writer (in memory). Single
//! tokens (the decode kernels) and a batch (the prefill kernels). For GPU machines without
//! Rust: bench/gpu-check.sh runs it on a prebuilt binary.

use std::sync::Arc;

use anyhow::{bail, Result};
use clap::Args;
use weft_core::backend::{Backend, BackendOptions, Graph, Readback, StepBatch, Weight};
use weft_core::dtype::GgmlType;
use weft_core::gguf::{write_gguf, ModelFile, TensorToWrite, Value};

use super::backend_args::BackendArgs;
use crate::backends::backends;

#[derive(Args)]
pub struct ParityArgs {
    #[command(flatten)]
    backend: BackendArgs,
    /// Weight rows (outputs).
    #[arg(long, default_value_t = 512)]
    rows: usize,
    /// Weight columns (a multiple of 256, for the K-quants).
    #[arg(long, default_value_t = 1024)]
    cols: usize,
    /// Largest error allowed, relative to the largest CPU output.
    #[arg(long, default_value_t = 1e-3)]
    tolerance: f64,
}

/// The weight types of the three model families' files.
pub const TYPES: [GgmlType; 11] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

/// Batch sizes: one token (decode products), a short prompt chunk (the batched products) and a
/// long one (CUDA's shared-memory tiled products: two full tiles of 32 tokens and a partial).
const TOKENS: [usize; 3] = [1, 19, 77];

/// Deterministic values in about [-1, 1) (an LCG; no seed to pass around).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

fn encode(ty: GgmlType, v: &[f32]) -> Option<Vec<u8>> {
    weft_core::quant::quantize_to_vec(ty, v).ok().or_else(|| {
        let mut out = vec![0u8; v.len() / ty.block_size() * ty.type_size()];
        weft_core::quant::quantize_reference(ty, v, &mut out).ok()?;
        Some(out)
    })
}

/// One product `x · wᵀ` for `n` tokens on `b`.
fn product(b: &mut dyn Backend, x: Weight, w: Weight, n: usize) -> Result<Vec<f32>> {
    let mut g = Graph::new(n);
    let e = g.embed(x, 1.0);
    let y = g.matmul(w, e);
    g.output(y);
    let ids: Vec<u32> = (0..n as u32).collect();
    let seqs = vec![0u32; n];
    let batch = StepBatch {
        tokens: &ids,
        positions: &ids,
        seqs: &seqs,
    };
    match b.execute(&g, &batch)?.pop() {
        Some(Readback::F32 { data, .. }) => Ok(data),
        _ => bail!("the backend returned no product"),
    }
}

pub fn run(a: ParityArgs) -> Result<()> {
    a.backend.check()?;
    if a.cols == 0 || !a.cols.is_multiple_of(256) || a.rows == 0 {
        bail!("--cols must be a positive multiple of 256 and --rows positive");
    }
    let max_tokens = *TOKENS.iter().max().unwrap_or(&1);
    let xs = values(a.cols * max_tokens, 1);
    let mut blobs: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)> = vec![(
        "x".into(),
        vec![a.cols as u64, max_tokens as u64],
        GgmlType::F32,
        xs.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )];
    for (i, &ty) in TYPES.iter().enumerate() {
        let w = values(a.rows * a.cols, 100 + i as u64);
        match encode(ty, &w) {
            Some(bytes) => blobs.push((
                format!("w.{ty:?}"),
                vec![a.cols as u64, a.rows as u64],
                ty,
                bytes,
            )),
            None => println!("{ty:?}: no quantizer here, skipped"),
        }
    }
    let tensors: Vec<TensorToWrite> = blobs
        .iter()
        .map(|(name, dims, ty, data)| TensorToWrite {
            name,
            dims,
            ty: *ty,
            data,
        })
        .collect();
    let meta = [("general.architecture", Value::String("parity".into()))];
    let file = Arc::new(ModelFile::from_vec(write_gguf(&meta, &tensors, 32))?);
    let reg = backends();
    let mut cpu = reg.create(
        "cpu",
        &BackendOptions {
            threads: a.backend.threads(),
            gpu_device: None,
        },
    )?;
    let mut dut = a.backend.create()?;
    let (xc, xd) = (cpu.load_weight(&file, "x")?, dut.load_weight(&file, "x")?);
    let mut worst = 0f64;
    println!(
        "{:<6} {:>6} {:>14} {:>10}",
        "type", "tokens", "max rel err", "same bits"
    );
    for (name, _, ty, _) in blobs.iter().skip(1) {
        let (wc, wd) = (cpu.load_weight(&file, name)?, dut.load_weight(&file, name)?);
        for n in TOKENS {
            let want = product(cpu.as_mut(), xc, wc, n)?;
            let got = product(dut.as_mut(), xd, wd, n)?;
            if got.len() != want.len() {
                bail!("{ty:?}: {} outputs, expected {}", got.len(), want.len());
            }
            let scale = want
                .iter()
                .fold(0f64, |m, v| m.max(v.abs() as f64))
                .max(1e-30);
            let err = want
                .iter()
                .zip(&got)
                .map(|(a, b)| ((a - b).abs() as f64) / scale)
                .fold(
                    0f64,
                    |m, e| if e.is_nan() { f64::INFINITY } else { m.max(e) },
                );
            let same = want
                .iter()
                .zip(&got)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            println!(
                "{:<6} {n:>6} {err:>14.3e} {:>10}",
                format!("{ty:?}"),
                if same { "yes" } else { "no" }
            );
            worst = worst.max(err);
        }
    }
    if worst > a.tolerance {
        bail!(
            "{} products differ from the CPU's by up to {worst:.3e} of the largest output (tolerance {:.0e})",
            dut.name(),
            a.tolerance
        );
    }
    Ok(())
}
