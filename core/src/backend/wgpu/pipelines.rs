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
    /// Bidirectional attention within each sequence of an encoder step.
    EncoderAttention,
    /// Mean / first / last pooling of each sequence of an encoder step.
    Pool,
    /// Average pooling of a grid of rows (a vision encoder's patch grid).
    GridPool,
    /// Rotary embedding by a per-row table of angles (`Op::RopeMulti`).
    RopeTable,
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
    /// (source, entry point); `sg`: the reductions use subgroup operations; `f16`: F16 weights
    /// and the f16 cache are read through native f16 bindings (shader-f16); `packed`: packed
    /// 8-bit quants go through WGSL's `packed_4x8_integer_dot_product` built-ins.
    fn source(self, sg: bool, f16: bool, packed: bool) -> (String, &'static str) {
        use weft_shaders as s;
        let quant = |kernel: &str, t: GgmlType| {
            if f16 && t == GgmlType::F16 {
                s::with_quant_f16(kernel)
            } else {
                s::with_quant(
                    kernel,
                    quant_name(t).expect("weights are converted to a kernel type"),
                )
            }
        };
        // The products and the activation quantizer (the users of packed quants).
        let matmul = |t: GgmlType| s::with_packed(&quant(s::MATMUL, t), packed);
        let actquant = || s::with_packed(&s::with_exact(s::ACTQUANT), packed);
        // Browsers need the directive; naga (native) rejects it.
        let sg_directive = |src: String| {
            if sg && cfg!(target_arch = "wasm32") {
                format!("{}{src}", s::SUBGROUPS_DIRECTIVE)
            } else {
                src
            }
        };
        let reduce = |k: &str| sg_directive(s::with_reduce(k, sg));
        match self {
            Kernel::MatMul(t) => (matmul(t), "main"),
            Kernel::MatMulTiled(t) => (
                s::with_packed(
                    &s::matmul_tiled(quant_name(t).expect("tiled products take quantized weights")),
                    packed,
                ),
                "tiled",
            ),
            Kernel::MatMulRows(t) => (matmul(t), "per_row"),
            Kernel::MatMulRowsTile(t) => (matmul(t), "per_row_tile"),
            Kernel::Embed(t) => (quant(s::EMBED, t), "main"),
            Kernel::Elementwise => (s::with_exact(&s::with_math(s::ELEMENTWISE)), "main"),
            Kernel::RmsNorm => (s::with_exact(s::NORM), "rms_norm"),
            Kernel::LayerNorm => (s::with_exact(s::NORM), "layer_norm"),
            Kernel::Rope => (s::with_exact(&s::with_math(s::ROPE)), "main"),
            Kernel::KvStoreF16 => (s::with_exact(s::KV), "store_f16"),
            Kernel::KvStoreF32 => (s::with_exact(s::KV), "store_f32"),
            Kernel::AttentionF16 => (sg_directive(s::attention(f16, sg)), "attn_f16"),
            Kernel::AttentionF32 => (sg_directive(s::attention(false, sg)), "attn_f32"),
            Kernel::Softmax => (reduce(&s::with_math(s::SOFTMAX)), "main"),
            Kernel::TopK => (reduce(s::TOPK), "main"),
            Kernel::ActQ8_0 => (actquant(), "q8_0"),
            Kernel::ActQ8K => (actquant(), "q8_k"),
            Kernel::EncoderAttention => (s::with_math(s::ENCODER_ATTENTION), "attend"),
            Kernel::Pool => (s::POOL.to_string(), "pool"),
            Kernel::GridPool => (s::GRID_POOL.to_string(), "avg_pool_2d"),
            Kernel::RopeTable => (s::ROPE_TABLE.to_string(), "main"),
        }
    }
}

/// The pipeline cache.
pub(super) struct Pipelines {
    map: HashMap<Kernel, wgpu::ComputePipeline>,
    /// Reductions use subgroup operations (the device was opened with `SUBGROUP`).
    subgroups: bool,
    /// F16 weights and caches are read as native f16 (the device was opened with `SHADER_F16`).
    f16: bool,
    /// Packed quants use the `packed_4x8_integer_dot_product` built-ins (else core WGSL).
    packed: bool,
}

impl Pipelines {
    /// An empty cache; `subgroups`: build the subgroup variants of the reduction kernels;
    /// `f16`: the native f16 variants of the F16-weight and f16-cache readers; `packed`: the
    /// packed-quant built-ins (where the WGSL implementation has them).
    pub fn new(subgroups: bool, f16: bool, packed: bool) -> Self {
        Pipelines {
            map: HashMap::new(),
            subgroups,
            f16,
            packed,
        }
    }

    /// Whether packed quants use the `packed_4x8_integer_dot_product` built-ins.
    pub fn packed_builtins(&self) -> bool {
        self.packed
    }

    /// Whether the reductions use subgroup operations.
    pub fn subgroups(&self) -> bool {
        self.subgroups
    }

    /// Whether F16 weights and f16 caches are read through native f16 bindings.
    pub fn f16(&self) -> bool {
        self.f16
    }

    /// The pipeline of `k`, compiled on first use.
    pub fn get(&mut self, device: &wgpu::Device, k: Kernel) -> &wgpu::ComputePipeline {
        let (sg, f16, packed) = (self.subgroups, self.f16, self.packed);
        self.map.entry(k).or_insert_with(|| {
            let (src, entry) = k.source(sg, f16, packed);
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
