//! WGSL kernels of the wgpu backend, one `.wgsl` file per kernel family (in `wgsl/`).
//!
//! Kernels that read weights (matrix product, embedding gather) are generic over the weight
//! type: [`with_quant`] appends the dequantizers of `quant.wgsl` and two one-line functions
//! that pick the type's dequantizer, so one source file serves every type.

/// Fused dequantize + matrix product (decode matrix-vector and prefill token tiles).
pub const MATMUL: &str = include_str!("../wgsl/matmul.wgsl");
/// Embedding gather from a (quantized) table.
pub const EMBED: &str = include_str!("../wgsl/embed.wgsl");
/// Dequantizers of every supported weight type (appended to `MATMUL` / `EMBED`).
pub const QUANT: &str = include_str!("../wgsl/quant.wgsl");
/// Element-wise ops: add, mul, scale, soft-cap, GELU, SiLU, GeGLU, SwiGLU, bias.
pub const ELEMENTWISE: &str = include_str!("../wgsl/elementwise.wgsl");
/// RMSNorm and LayerNorm (entry points `rms_norm`, `layer_norm`).
pub const NORM: &str = include_str!("../wgsl/norm.wgsl");
/// Rotary position embedding (normal and NeoX layouts).
pub const ROPE: &str = include_str!("../wgsl/rope.wgsl");
/// KV-cache append (entry points `store_f16`, `store_f32`).
pub const KV: &str = include_str!("../wgsl/kv.wgsl");
/// Causal attention with GQA and sliding window (entry points `attn_f16`, `attn_f32`).
pub const ATTENTION: &str = include_str!("../wgsl/attention.wgsl");
/// Activation quantization (entry points `q8_0`, `q8_k`) before quantized products.
pub const ACTQUANT: &str = include_str!("../wgsl/actquant.wgsl");
/// Row-wise softmax.
pub const SOFTMAX: &str = include_str!("../wgsl/softmax.wgsl");
/// Top-k (and argmax, k = 1) of each row.
pub const TOPK: &str = include_str!("../wgsl/topk.wgsl");

/// Weight types the dequantizers in `quant.wgsl` read (the suffix of `unit_<type>`).
pub const QUANT_TYPES: &[&str] = &[
    "f32", "f16", "q4_0", "q4_1", "q5_0", "q8_0", "q4_k", "q5_k", "q6_k",
];

/// `kernel` (which declares `w` and calls `scales`/`quad`) completed for weights of type `ty`
/// (one of [`QUANT_TYPES`]).
pub fn with_quant(kernel: &str, ty: &str) -> String {
    format!(
        "{kernel}\n{QUANT}\n\
         fn scales(row: u32, u: u32) -> vec2<f32> {{\n    return scales_{ty}(row, u);\n}}\n\
         fn quad(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {{\n    return quad_{ty}(row, u, q, sc);\n}}\n"
    )
}

/// Every complete shader module the backend can build, as (name, source): the type-generic
/// kernels once per weight type, the others as they are. Used by the validation test.
pub fn all_modules() -> Vec<(String, String)> {
    let mut v = Vec::new();
    for ty in QUANT_TYPES {
        v.push((format!("matmul/{ty}"), with_quant(MATMUL, ty)));
        v.push((format!("embed/{ty}"), with_quant(EMBED, ty)));
    }
    for (name, src) in [
        ("elementwise", ELEMENTWISE),
        ("norm", NORM),
        ("rope", ROPE),
        ("kv", KV),
        ("attention", ATTENTION),
        ("softmax", SOFTMAX),
        ("actquant", ACTQUANT),
        ("topk", TOPK),
    ] {
        v.push((name.to_string(), src.to_string()));
    }
    v
}
