//! `weft devices`: the CUDA devices (for `--backend cuda --gpu-device N`) and the GPU adapters
//! the wgpu backend can use (for `--backend wgpu --gpu-device N`). Honours `WGPU_BACKEND`
//! (e.g. `vulkan`, `gl`).

use anyhow::{bail, Result};
use clap::Args;
use serde_json::json;
use weft_core::backend::wgpu::{list_adapters, AdapterSummary, NO_ADAPTER};
use weft_cuda::CudaDevice;

#[derive(Args)]
pub struct DevicesArgs {
    /// Print one JSON array instead of text.
    #[arg(long)]
    json: bool,
}

fn mib(b: u64) -> String {
    format!("{} MiB", b >> 20)
}

fn print_text(a: &AdapterSummary) {
    println!(
        "[{}] {} ({}, {})",
        a.index, a.name, a.backend, a.device_type
    );
    if !a.driver.is_empty() {
        println!("    driver: {}", a.driver);
    }
    println!(
        "    limits: storage binding {}, buffer {}, {} storage buffers/stage, {} invocations/workgroup, {} KiB workgroup memory",
        mib(a.max_storage_buffer_binding_size),
        mib(a.max_buffer_size),
        a.max_storage_buffers_per_shader_stage,
        a.max_compute_invocations_per_workgroup,
        a.max_compute_workgroup_storage_size / 1024
    );
    let sub = match a.subgroups {
        Some((lo, hi)) => format!("yes ({lo}..{hi})"),
        None => "no".into(),
    };
    println!(
        "    shader-f16: {}, subgroups: {sub}",
        if a.f16 { "yes" } else { "no" }
    );
}

fn print_cuda(d: &CudaDevice) {
    let (ma, mi) = d.compute_capability;
    let (dv, dm) = d.driver_version;
    println!("[cuda {}] {}", d.index, d.name);
    println!(
        "    memory: {}, compute capability {ma}.{mi}, {} SMs, driver CUDA {dv}.{dm}",
        mib(d.memory),
        d.sm_count
    );
}

fn cuda_json(d: &CudaDevice) -> serde_json::Value {
    let (ma, mi) = d.compute_capability;
    let (dv, dm) = d.driver_version;
    json!({
        "index": d.index, "name": d.name, "backend": "cuda", "memory": d.memory,
        "compute_capability": format!("{ma}.{mi}"), "sm_count": d.sm_count,
        "driver_version": format!("{dv}.{dm}"),
    })
}

pub fn run(a: DevicesArgs) -> Result<()> {
    // CUDA devices first (never fails: without a driver there are none, and the reason is
    // printed in text mode); then the wgpu adapters, whose absence stays the error it was.
    let cuda = weft_cuda::list_devices();
    let adapters = list_adapters();
    if a.json {
        let cuda_v: Vec<_> = cuda
            .as_ref()
            .map(|v| v.iter().map(cuda_json).collect())
            .unwrap_or_default();
        let wgpu_v: Vec<serde_json::Value> = adapters
            .iter()
            .map(|d| {
                json!({
                    "index": d.index, "name": d.name, "backend": d.backend,
                    "type": d.device_type, "driver": d.driver,
                    "max_storage_buffer_binding_size": d.max_storage_buffer_binding_size,
                    "max_buffer_size": d.max_buffer_size,
                    "max_storage_buffers_per_shader_stage": d.max_storage_buffers_per_shader_stage,
                    "max_compute_invocations_per_workgroup": d.max_compute_invocations_per_workgroup,
                    "max_compute_workgroup_storage_size": d.max_compute_workgroup_storage_size,
                    "shader_f16": d.f16,
                    "subgroups": d.subgroups.map(|(lo, hi)| json!({"min": lo, "max": hi})),
                })
            })
            .collect();
        // One array: CUDA devices (`"backend": "cuda"`, indices for --backend cuda), then the
        // wgpu adapters (indices for --backend wgpu).
        let v: Vec<_> = cuda_v.into_iter().chain(wgpu_v).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        match &cuda {
            Ok(devs) => devs.iter().for_each(print_cuda),
            Err(e) => println!("CUDA: {e}"),
        }
        for d in &adapters {
            print_text(d);
        }
    }
    if adapters.is_empty() && cuda.as_ref().map_or(true, |v| v.is_empty()) {
        bail!("{NO_ADAPTER}");
    }
    Ok(())
}
