//! WGSL kernels of the wgpu backend, one `.wgsl` file per kernel family (in `wgsl/`).
//!
//! Kernels that read weights (matrix product, embedding gather) are generic over the weight
//! type: [`with_quant`] appends the dequantizers of `quant.wgsl` and two one-line functions
//! that pick the type's dequantizer, so one source file serves every type.
//!
//! Every function-scope `var` has an initializer (tests/initializers.rs checks it): WGSL
//! re-zeroes a `var` without one each time its declaration runs, but Chromium's Tint
//! (Chromium 156) zero-initialises it once per invocation, so one declared in a loop body kept
//! its value from the previous iteration there.

/// Fused dequantize + matrix product (decode matrix-vector and prefill token tiles).
pub const MATMUL: &str = include_str!("../wgsl/matmul.wgsl");
/// Workgroup-memory tiles of weight rows × tokens for prefill on GPUs (entry point `tiled`);
/// appended to [`MATMUL`] (see [`matmul_tiled`]).
pub const MATMUL_TILED: &str = include_str!("../wgsl/matmul_tiled.wgsl");
/// `pack_i8`/`unpack_i8`/`dot_i8` on WGSL's `packed_4x8_integer_dot_product` built-ins, for
/// the modules using packed 8-bit quants (see [`with_packed`]).
pub const PACKED_I8: &str = include_str!("../wgsl/packed_i8.wgsl");
/// The same functions in core WGSL, for implementations without that language extension.
pub const PACKED_I8_CORE: &str = include_str!("../wgsl/packed_i8_core.wgsl");
/// Embedding gather from a (quantized) table.
pub const EMBED: &str = include_str!("../wgsl/embed.wgsl");
/// Dequantizers of every supported weight type (appended to `MATMUL` / `EMBED`; it declares
/// their weight binding as u32 words).
pub const QUANT: &str = include_str!("../wgsl/quant.wgsl");
/// The F16 dequantizer on a native `array<vec2<f16>>` weight binding, in place of [`QUANT`]
/// for F16 weights on devices with shader-f16 (see [`with_quant_f16`]).
pub const QUANT_F16: &str = include_str!("../wgsl/quant_f16.wgsl");
/// Element-wise ops: add, mul, scale, soft-cap, GELU, SiLU, GeGLU, SwiGLU, bias, GELU (erf).
pub const ELEMENTWISE: &str = include_str!("../wgsl/elementwise.wgsl");
/// RMSNorm and LayerNorm (entry points `rms_norm`, `layer_norm`).
pub const NORM: &str = include_str!("../wgsl/norm.wgsl");
/// Rotary position embedding (normal and NeoX layouts).
pub const ROPE: &str = include_str!("../wgsl/rope.wgsl");
/// KV-cache append (entry points `store_f16`, `store_f32`).
pub const KV: &str = include_str!("../wgsl/kv.wgsl");
/// Causal attention with GQA and sliding window (entry points `attn_f16`, `attn_f32`); the
/// cache bindings come from [`ATTN_KV`] or [`ATTN_KV_F16`] (see [`attention`]).
pub const ATTENTION: &str = include_str!("../wgsl/attention.wgsl");
/// Attention's cache bindings as u32 words (f16 pairs or f32 bit patterns), on every device.
pub const ATTN_KV: &str = include_str!("../wgsl/attn_kv.wgsl");
/// Attention's f16 cache bindings as native `array<f16>` (shader-f16; `attn_f16` only).
pub const ATTN_KV_F16: &str = include_str!("../wgsl/attn_kv_f16.wgsl");
/// Activation quantization (entry points `q8_0`, `q8_k`) before quantized products.
pub const ACTQUANT: &str = include_str!("../wgsl/actquant.wgsl");
/// Correctly rounded division, square root and f64 sums, and the CPU's f32 → f16 rounding, from
/// integer operations (appended to `NORM`, `ACTQUANT`, `KV`, `ATTENTION` and the type-generic
/// kernels).
pub const EXACT: &str = include_str!("../wgsl/exact.wgsl");
/// Accurate `exp_acc` and correctly rounded `exp_cr` (appended to `ATTENTION`, `SOFTMAX` and
/// `ELEMENTWISE`, whose uniforms carry the `zero` word `exp_cr` needs), and correctly rounded
/// `sincos_cr` (for `ROPE`).
pub const MATH: &str = include_str!("../wgsl/math.wgsl");
/// Bidirectional attention within each sequence of an encoder step (entry point `attend`).
pub const ENCODER_ATTENTION: &str = include_str!("../wgsl/encoder_attention.wgsl");
/// Mean / first / last pooling of each sequence of an encoder step (entry point `pool`).
pub const POOL: &str = include_str!("../wgsl/pool.wgsl");
/// Average pooling of a grid of rows, a vision encoder's patch grid (entry point
/// `avg_pool_2d`).
pub const GRID_POOL: &str = include_str!("../wgsl/grid_pool.wgsl");
/// Rotary embedding by a per-row table of angles (multi-component RoPE).
pub const ROPE_TABLE: &str = include_str!("../wgsl/rope_table.wgsl");
/// Row-wise softmax.
pub const SOFTMAX: &str = include_str!("../wgsl/softmax.wgsl");
/// Top-k (and argmax, k = 1) of each row.
pub const TOPK: &str = include_str!("../wgsl/topk.wgsl");

/// Order-independent workgroup reductions (`wg_max`, `wg_best`) in workgroup memory, the
/// fallback of [`REDUCE_SG`] (appended to `SOFTMAX`, `ATTENTION` and `TOPK`).
pub const REDUCE: &str = include_str!("../wgsl/reduce.wgsl");
/// The same reductions on subgroup operations (WGSL `enable subgroups;`, wgpu's `SUBGROUP`
/// feature), with bit-identical results.
pub const REDUCE_SG: &str = include_str!("../wgsl/reduce_sg.wgsl");

/// Weight types the dequantizers in `quant.wgsl` read (the suffix of `unit_<type>`).
pub const QUANT_TYPES: &[&str] = &[
    "f32", "f16", "q4_0", "q4_1", "q5_0", "q8_0", "q4_k", "q5_k", "q6_k",
];

/// Weight types whose blocks carry an additive minimum that `quad_<type>` leaves out and
/// `min_<type>` returns (the product adds it times the activation block's sum).
pub const TYPES_WITH_MIN: &[&str] = &["q4_1"];

/// How `matmul.wgsl` forms products with weights of type `ty`: 0 float weights with f32
/// activations, 1 32-element blocks, 2 K blocks with a minimum, 3 Q6_K (integer dots with
/// quantized activations, in the CPU backend's arithmetic).
pub fn quant_kind(ty: &str) -> u32 {
    match ty {
        "q4_0" | "q4_1" | "q5_0" | "q8_0" => 1,
        "q4_k" | "q5_k" => 2,
        "q6_k" => 3,
        _ => 0,
    }
}

/// `kernel` (which declares `w` and calls `scales`/`quad`/`min_of`, or the integer forms
/// `iquad`/`lscale`/`kscale`/`kdm` with `QKIND` and `HAS_MIN`) completed for weights of type
/// `ty` (one of [`QUANT_TYPES`]). An element's value is `quad(..)[i] + min_of(sc)`.
pub fn with_quant(kernel: &str, ty: &str) -> String {
    with_dequantizers(kernel, ty, QUANT)
}

/// [`with_quant`] with the dequantizer file `quant` ([`QUANT`] or [`QUANT_F16`]).
fn with_dequantizers(kernel: &str, ty: &str, quant: &str) -> String {
    let has_min = TYPES_WITH_MIN.contains(&ty);
    let min = if has_min {
        format!("min_{ty}(sc)")
    } else {
        "0.0".to_string()
    };
    let kind = quant_kind(ty);
    // Integer forms the type lacks are zero stubs (never called: QKIND rules them out).
    let iquad = if kind != 0 {
        format!("iquad_{ty}(row, u, q)")
    } else {
        "vec4<i32>(0)".to_string()
    };
    let lscale = if kind == 1 {
        format!("lscale_{ty}(row, u)")
    } else {
        "vec2<f32>(0.0)".to_string()
    };
    let (kscale, kdm) = if kind >= 2 {
        (
            format!("kscale_{ty}(row, u)"),
            format!("kdm_{ty}(row, blk)"),
        )
    } else {
        ("vec2<i32>(0)".to_string(), "vec2<f32>(0.0)".to_string())
    };
    format!(
        "{kernel}\n{quant}\n{EXACT}\n\
         const QKIND: u32 = {kind}u;\n\
         const HAS_MIN: bool = {has_min};\n\
         fn scales(row: u32, u: u32) -> vec2<f32> {{\n    return scales_{ty}(row, u);\n}}\n\
         fn quad(row: u32, u: u32, q: u32, sc: vec2<f32>) -> vec4<f32> {{\n    return quad_{ty}(row, u, q, sc);\n}}\n\
         fn min_of(sc: vec2<f32>) -> f32 {{\n    return {min};\n}}\n\
         fn iquad(row: u32, u: u32, q: u32) -> vec4<i32> {{\n    return {iquad};\n}}\n\
         fn lscale(row: u32, u: u32) -> vec2<f32> {{\n    return {lscale};\n}}\n\
         fn kscale(row: u32, u: u32) -> vec2<i32> {{\n    return {kscale};\n}}\n\
         fn kdm(row: u32, blk: u32) -> vec2<f32> {{\n    return {kdm};\n}}\n"
    )
}

/// The tiled prefill product ([`MATMUL`] with [`MATMUL_TILED`]) for weights of type `ty`.
pub fn matmul_tiled(ty: &str) -> String {
    with_quant(&format!("{MATMUL}\n{MATMUL_TILED}"), ty)
}

/// As [`with_quant`], for F16 weights read through a native f16 binding ([`QUANT_F16`]): the
/// module starts with [`F16_DIRECTIVE`] and needs a device with shader-f16 (wgpu's
/// `SHADER_F16`). Products are bit-identical to `with_quant(kernel, "f16")`'s.
pub fn with_quant_f16(kernel: &str) -> String {
    format!(
        "{F16_DIRECTIVE}{}",
        with_dequantizers(kernel, "f16", QUANT_F16)
    )
}

/// The complete attention module (before any subgroups directive): [`ATTENTION`] with the
/// math and exact helpers, the reductions of [`with_reduce`] (`subgroups`) and the cache
/// bindings: native f16 ([`ATTN_KV_F16`], with [`F16_DIRECTIVE`]; only `attn_f16` may be
/// built from it) when `native_f16`, else u32 words ([`ATTN_KV`]).
pub fn attention(native_f16: bool, subgroups: bool) -> String {
    let body = with_reduce(&with_exact(&with_math(ATTENTION)), subgroups);
    if native_f16 {
        format!("{F16_DIRECTIVE}{body}\n{ATTN_KV_F16}")
    } else {
        format!("{body}\n{ATTN_KV}")
    }
}

/// The directive of modules that use the `f16` type (naga and browsers both require it).
pub const F16_DIRECTIVE: &str = "enable f16;\n";

/// `kernel` (the activation quantizer or a matrix product: the users of packed 8-bit quants)
/// with `pack_i8`/`unpack_i8`/`dot_i8` appended: on the language extension's built-ins
/// ([`PACKED_I8`]) when `builtins`, else in core WGSL ([`PACKED_I8_CORE`]); same results.
pub fn with_packed(kernel: &str, builtins: bool) -> String {
    let f = if builtins { PACKED_I8 } else { PACKED_I8_CORE };
    format!("{kernel}\n{f}")
}

/// `kernel` with the correctly rounded integer arithmetic of `exact.wgsl` appended.
pub fn with_exact(kernel: &str) -> String {
    format!("{kernel}\n{EXACT}")
}

/// `kernel` with the accurate math functions of `math.wgsl` appended.
pub fn with_math(kernel: &str) -> String {
    format!("{kernel}\n{MATH}")
}

/// `kernel` with the reductions of [`REDUCE_SG`] (`subgroups`) or of [`REDUCE`] appended.
///
/// naga 30 (wgpu's native shader compiler) rejects WGSL's `enable subgroups;` and accepts
/// subgroup built-ins without it; browsers require it: see [`SUBGROUPS_DIRECTIVE`].
pub fn with_reduce(kernel: &str, subgroups: bool) -> String {
    if subgroups {
        format!("{kernel}\n{REDUCE_SG}")
    } else {
        format!("{kernel}\n{REDUCE}")
    }
}

/// The directive a browser's WebGPU needs at the top of a module using subgroup operations
/// (prepended only on wasm32, where wgpu hands WGSL to the browser).
pub const SUBGROUPS_DIRECTIVE: &str = "enable subgroups;\n";

/// Every complete shader module the backend can build, as (name, source): the type-generic
/// kernels once per weight type (F16 also on native f16 bindings), those with reductions with
/// and without subgroups, attention also on a native f16 cache, the others as they are. Names
/// carry "+f16" for modules needing shader-f16 and "+sg" for those needing subgroups. Used by
/// the validation test.
pub fn all_modules() -> Vec<(String, String)> {
    let mut v = Vec::new();
    // The users of packed quants with the language extension's built-ins, and ("+core") with
    // the core-WGSL functions.
    for (tag, builtins) in [("", true), ("+core", false)] {
        for ty in QUANT_TYPES {
            let matmul = with_packed(&with_quant(MATMUL, ty), builtins);
            v.push((format!("matmul/{ty}{tag}"), matmul));
            v.push((
                format!("matmul_tiled/{ty}{tag}"),
                with_packed(&matmul_tiled(ty), builtins),
            ));
        }
        let act = with_packed(&with_exact(ACTQUANT), builtins);
        v.push((format!("actquant{tag}"), act));
    }
    for ty in QUANT_TYPES {
        v.push((format!("embed/{ty}"), with_quant(EMBED, ty)));
    }
    // F16 weights through native f16 bindings ("+f16": shader-f16 devices).
    v.push((
        "matmul/f16+f16".into(),
        with_packed(&with_quant_f16(MATMUL), true),
    ));
    v.push(("embed/f16+f16".into(), with_quant_f16(EMBED)));
    for (name, src) in [
        ("elementwise", with_exact(&with_math(ELEMENTWISE))),
        ("norm", with_exact(NORM)),
        ("rope", with_exact(&with_math(ROPE))),
        ("kv", with_exact(KV)),
        ("encoder_attention", with_math(ENCODER_ATTENTION)),
        ("pool", POOL.to_string()),
        ("grid_pool", GRID_POOL.to_string()),
        ("rope_table", ROPE_TABLE.to_string()),
    ] {
        v.push((name.to_string(), src));
    }
    // Kernels with workgroup reductions, without and with subgroups ("+sg"); attention also
    // with its native f16 cache ("+f16").
    for sg in [false, true] {
        let tag = if sg { "+sg" } else { "" };
        for (name, src) in [("softmax", with_math(SOFTMAX)), ("topk", TOPK.to_string())] {
            v.push((format!("{name}{tag}"), with_reduce(&src, sg)));
        }
        v.push((format!("attention{tag}"), attention(false, sg)));
        v.push((format!("attention+f16{tag}"), attention(true, sg)));
    }
    v
}
