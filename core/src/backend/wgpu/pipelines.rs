//! Compute pipelines, compiled once per (kernel, weight type, entry point) and cached.

use std::collections::HashMap;

use crate::dtype::GgmlType;

/// A kernel variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Kernel {
    MatMul(GgmlType),
    /// Tiles of weight rows × tokens decoded into workgroup memory (prefill on GPUs,
    /// quantized weights).
    MatMulTiled(GgmlType),
    /// One invocation per row, no barriers (CPU adapters).
    MatMulRows(GgmlType),
    /// As `MatMulRows`, each weight unit decoded once per token tile (prefill on CPU adapters).
    MatMulRowsTile(GgmlType),
    Embed(GgmlType),
    Elementwise,
    RmsNorm,
    LayerNorm,
    Rope,
    KvStoreF16,
    KvStoreF32,
    AttentionF16,
    AttentionF32,
    Softmax,
    TopK,
    /// Activation quantize-dequantize to Q8_0/Q8_1 values.
    ActQ8_0,
    /// Activation quantize-dequantize to Q8_K values.
    ActQ8K,
}

/// The `quant.wgsl` suffix of a weight type the kernels read directly, if any.
pub(super) fn quant_name(ty: GgmlType) -> Option<&'static str> {
    use GgmlType::*;
    Some(match ty {
        F32 => "f32",
        F16 => "f16",
        Q4_0 => "q4_0",
        Q4_1 => "q4_1",
        Q5_0 => "q5_0",
        Q8_0 => "q8_0",
        Q4_K => "q4_k",
        Q5_K => "q5_k",
        Q6_K => "q6_k",
        _ => return None,
    })
}

/// How the matrix product treats weights of type `ty` (`weft_shaders::quant_kind`): 0 float
/// weights, 1 32-element blocks, 2 K blocks with a minimum, 3 Q6_K.
pub(super) fn quant_kind(ty: GgmlType) -> u32 {
    quant_name(ty).map_or(0, weft_shaders::quant_kind)
}

impl Kernel {
    /// (source, entry point); `sg`: the reductions use subgroup operations.
    fn source(self, sg: bool) -> (String, &'static str) {
        use weft_shaders as s;
        let ty = |t: GgmlType| quant_name(t).expect("weights are converted to a kernel type");
        let reduce = |k: &str| {
            let src = s::with_reduce(k, sg);
            // Browsers need the directive; naga (native) rejects it.
            if sg && cfg!(target_arch = "wasm32") {
                format!("{}{src}", s::SUBGROUPS_DIRECTIVE)
            } else {
                src
            }
        };
        let attention = || reduce(&s::with_exact(&s::with_math(s::ATTENTION)));
        match self {
            Kernel::MatMul(t) => (s::with_quant(s::MATMUL, ty(t)), "main"),
            Kernel::MatMulTiled(t) => (s::matmul_tiled(ty(t)), "tiled"),
            Kernel::MatMulRows(t) => (s::with_quant(s::MATMUL, ty(t)), "per_row"),
            Kernel::MatMulRowsTile(t) => (s::with_quant(s::MATMUL, ty(t)), "per_row_tile"),
            Kernel::Embed(t) => (s::with_quant(s::EMBED, ty(t)), "main"),
            Kernel::Elementwise => (s::with_exact(&s::with_math(s::ELEMENTWISE)), "main"),
            Kernel::RmsNorm => (s::with_exact(s::NORM), "rms_norm"),
            Kernel::LayerNorm => (s::with_exact(s::NORM), "layer_norm"),
            Kernel::Rope => (s::with_exact(&s::with_math(s::ROPE)), "main"),
            Kernel::KvStoreF16 => (s::KV.into(), "store_f16"),
            Kernel::KvStoreF32 => (s::KV.into(), "store_f32"),
            Kernel::AttentionF16 => (attention(), "attn_f16"),
            Kernel::AttentionF32 => (attention(), "attn_f32"),
            Kernel::Softmax => (reduce(&s::with_math(s::SOFTMAX)), "main"),
            Kernel::TopK => (reduce(s::TOPK), "main"),
            Kernel::ActQ8_0 => (s::with_exact(s::ACTQUANT), "q8_0"),
            Kernel::ActQ8K => (s::with_exact(s::ACTQUANT), "q8_k"),
        }
    }
}

/// The pipeline cache.
pub(super) struct Pipelines {
    map: HashMap<Kernel, wgpu::ComputePipeline>,
    /// Reductions use subgroup operations (the device was opened with `SUBGROUP`).
    subgroups: bool,
}

impl Pipelines {
    /// An empty cache; `subgroups`: build the subgroup variants of the reduction kernels.
    pub fn new(subgroups: bool) -> Self {
        Pipelines {
            map: HashMap::new(),
            subgroups,
        }
    }

    /// Whether the reductions use subgroup operations.
    pub fn subgroups(&self) -> bool {
        self.subgroups
    }

    /// The pipeline of `k`, compiled on first use.
    pub fn get(&mut self, device: &wgpu::Device, k: Kernel) -> &wgpu::ComputePipeline {
        let sg = self.subgroups;
        self.map.entry(k).or_insert_with(|| {
            let (src, entry) = k.source(sg);
            let label = format!("{k:?}");
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(&label),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&label),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        })
    }

    /// An already compiled pipeline (see [`Pipelines::get`]).
    pub fn peek(&self, k: Kernel) -> &wgpu::ComputePipeline {
        &self.map[&k]
    }

    /// Pipelines compiled so far.
    pub fn len(&self) -> usize {
        self.map.len()
    }
}
