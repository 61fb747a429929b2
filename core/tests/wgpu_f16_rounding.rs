//! exact.wgsl's integer f32 → f16 rounding (`f32_to_f16_bits`, used by the KV store and by
//! attention's f16 rounding of queries and weights) and its exact widening (`f16_bits_to_f32`,
//! `round_f16`) run on the GPU and give the CPU backend's conversion (the `half` crate's, which
//! the CPU KV cache uses) bit for bit: around every f16 rounding boundary, at the special values
//! and on a few million random bit patterns.

mod wgpu_support;

use half::f16;
use half::slice::HalfFloatSliceExt;
use wgpu_support::Rng;

/// Per input word x: out[2i] = f32_to_f16_bits(x), out[2i + 1] = bits of round_f16(x as f32).
/// Inputs are read as u32 words so NaN payloads reach the function untouched.
const KERNEL: &str = r#"
@group(0) @binding(0) var<storage, read> xs: array<u32>;
@group(0) @binding(1) var<storage, read_write> ys: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = gid.x + gid.y * nw.x * 64u;
    if (i < arrayLength(&xs)) {
        let x = xs[i];
        ys[2u * i] = f32_to_f16_bits(x);
        ys[2u * i + 1u] = bitcast<u32>(round_f16(bitcast<f32>(x)));
    }
}
"#;

/// A raw device (the same adapter the backend picks), or None without one (as
/// `wgpu_support::backend`: loud skip, failure under CI).
fn device() -> Option<(wgpu::Device, wgpu::Queue)> {
    // Opening the backend first settles the skip-or-fail policy and the loader environment.
    wgpu_support::backend(&Default::default())?;
    let inst = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(inst.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
        apply_limit_buckets: false,
    }))
    .expect("the backend found an adapter");
    let desc = wgpu::DeviceDescriptor {
        label: Some("f16 rounding test"),
        required_limits: adapter.limits(),
        ..Default::default()
    };
    Some(pollster::block_on(adapter.request_device(&desc)).expect("a device"))
}

/// Runs the kernel over `xs`; returns (f16 bits, round_f16 bits) per input.
fn run_gpu(dev: &wgpu::Device, queue: &wgpu::Queue, xs: &[u32]) -> Vec<(u32, u32)> {
    let src = weft_shaders::with_exact(KERNEL);
    let module = dev.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("f16 rounding"),
        source: wgpu::ShaderSource::Wgsl(src.into()),
    });
    let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("f16 rounding"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let mut out = Vec::with_capacity(xs.len());
    // 2^20 inputs per dispatch: 16384 workgroups, 8 MiB of results.
    for chunk in xs.chunks(1 << 20) {
        let n = chunk.len() as u64;
        let input = dev.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: n * 4,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        queue.write_buffer(&input, 0, bytemuck::cast_slice(chunk));
        let output = dev.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: n * 8,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let staging = dev.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: n * 8,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let bind = dev.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: input.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: output.as_entire_binding(),
                },
            ],
        });
        let mut enc = dev.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            let groups = (n as u32).div_ceil(64);
            let x = groups.min(1024);
            pass.dispatch_workgroups(x, groups.div_ceil(x), 1);
        }
        enc.copy_buffer_to_buffer(&output, 0, &staging, 0, n * 8);
        queue.submit([enc.finish()]);
        staging
            .slice(..)
            .map_async(wgpu::MapMode::Read, |r| r.unwrap());
        dev.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let view = staging.slice(..).get_mapped_range().unwrap();
        let words: &[u32] = bytemuck::cast_slice(&view);
        out.extend(words.chunks_exact(2).map(|p| (p[0], p[1])));
    }
    out
}

/// Inputs around every f16 rounding boundary (each finite f16, the midpoint to the next one
/// up, one f32 ulp either side of both, both signs), the special values, then random words.
fn inputs() -> Vec<u32> {
    let mut v = Vec::new();
    for h in 0u16..0x7C00 {
        let lo = f16::from_bits(h).to_f32();
        // The next f16 up (0x7BFF's is inf: its midpoint is the overflow threshold 65520).
        let hi = if h == 0x7BFF {
            65536.0
        } else {
            f16::from_bits(h + 1).to_f32()
        };
        let mid = (lo + hi) / 2.0; // exact: f32 has 13 more significand bits
        for x in [lo, mid] {
            let b = x.to_bits();
            for c in [b.wrapping_sub(1), b, b + 1] {
                v.push(c);
                v.push(c ^ 0x8000_0000);
            }
        }
    }
    v.extend([
        0x0000_0000,
        0x8000_0000,
        0x0000_0001, // f32 subnormals
        0x807F_FFFF,
        0x7F80_0000, // ±inf
        0xFF80_0000,
        0x7F7F_FFFF, // f32 max
        0x7FC0_0000, // NaNs: quiet, signalling, payload only in the low bits, negative
        0x7F80_0001,
        0x7FA0_0000,
        0x7F80_2000,
        0x7FFF_FFFF,
        0xFFC0_0001,
        0x4780_0000, // 65536, 2^16: overflow before rounding
        0x477F_F000, // 65520: the overflow threshold (ties up to inf)
        0x477F_EFFF, // just below: 65504
        0x3300_0000, // 2^-25: half the smallest subnormal, ties to 0
        0x3300_0001,
        0x32FF_FFFF,
        0x3380_0000, // 2^-24: the smallest subnormal
        0x387F_E000, // the largest subnormal
        0x387F_F000, // midway to 2^-14: rounds up into the normal range
    ]);
    let mut rng = Rng::new(0xF16);
    // Every bit pattern, then patterns whose exponent lies in or near the f16 range.
    for _ in 0..3_000_000 {
        v.push(rng.next_u64() as u32);
    }
    for _ in 0..1_000_000 {
        let r = rng.next_u64();
        let e = 100 + (r >> 40) as u32 % 46; // f32 exponents 100 ..= 145
        v.push((r as u32 & 0x807F_FFFF) | (e << 23));
    }
    v
}

#[test]
fn gpu_f32_to_f16_matches_the_cpu_conversion_bit_for_bit() {
    let Some((dev, queue)) = device() else {
        return;
    };
    let xs = inputs();
    let floats: Vec<f32> = xs.iter().map(|&b| f32::from_bits(b)).collect();
    // The CPU cache converts slices; scalar conversion must agree with it.
    let mut want = vec![f16::ZERO; xs.len()];
    want.convert_from_f32_slice(&floats);
    let got = run_gpu(&dev, &queue, &xs);
    assert_eq!(got.len(), xs.len());
    let mut bad = Vec::new();
    for (i, (&x, &(h, r))) in xs.iter().zip(&got).enumerate() {
        let w = want[i];
        let scalar = f16::from_f32(f32::from_bits(x)).to_bits();
        assert_eq!(
            w.to_bits(),
            scalar,
            "half: slice vs scalar conversion of {x:#010x}"
        );
        let ok_h = h == w.to_bits() as u32;
        // round_f16 passes its f32 through the GPU, which may quiet NaN payloads.
        let wf = w.to_f32();
        let rf = f32::from_bits(r);
        let ok_r = if wf.is_nan() {
            rf.is_nan()
        } else {
            r == wf.to_bits()
        };
        if !(ok_h && ok_r) && bad.len() < 20 {
            bad.push(format!(
                "{x:#010x} ({}): f16 {h:#06x} want {:#06x}; round_f16 {r:#010x} want {:#010x}",
                f32::from_bits(x),
                w.to_bits(),
                wf.to_bits()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "GPU f16 rounding differs:\n{}",
        bad.join("\n")
    );
}
