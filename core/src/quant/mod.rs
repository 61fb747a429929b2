//! Quantized block formats: layouts, dequantization, quantization, and dot products.
//!
//! Every format stores a tensor row as consecutive blocks of `GgmlType::block_size()` elements
//! and `GgmlType::type_size()` bytes; each family's file documents its block layout.
//! - [`dequantize`] handles F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K … Q8_K,
//!   IQ4_NL and IQ4_XS, bit-identically to GGML's reference code (checked against the `gguf`
//!   Python package on every tensor of the reference models and on synthetic blocks).
//! - [`quantize`] handles F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 (byte-identical
//!   to GGML's reference quantizers), Q4_K, Q6_K and Q8_K (own simple quantizers with a proven
//!   error bound; Q8_K is the activation type of the K-quant dot products).
//! - [`quantize_reference`] is what model files are quantized with: GGML's reference
//!   quantizers for F32, F16, BF16, Q4_0 … Q8_0, Q4_K, Q5_K and Q6_K, byte-identical to
//!   llama.cpp's `llama-quantize` without an importance matrix.
//! - [`dot`]: the CPU backend's quantized dot products.
//!
//! Files: `float.rs` (F32, F16, BF16), `legacy.rs` (Q4_0 … Q8_1), `kquant.rs` (K layouts and
//! dequantization), `kquant_quantize.rs` (bounded K quantizers), `kquant_ref.rs` (GGML's
//! reference K quantizers), `iq4.rs` (IQ4_NL, IQ4_XS), `error.rs`.

pub mod dot;
mod error;
mod float;
mod iq4;
mod kquant;
mod kquant_quantize;
mod kquant_ref;
mod legacy;

pub use error::QuantError;
pub use iq4::IQ4_LEVELS;

use crate::dtype::GgmlType;

type BlockDequant = fn(&[u8], &mut [f32]);
type BlockQuant = fn(&[f32], &mut [u8]);

/// The per-block dequantizer of a type. Float types are handled as 1-element "blocks" but
/// their functions also work on whole runs, which is how they are called.
fn dequantizer(ty: GgmlType) -> Option<BlockDequant> {
    use GgmlType::*;
    Some(match ty {
        F32 => float::dequant_f32,
        F16 => float::dequant_f16,
        BF16 => float::dequant_bf16,
        Q4_0 => legacy::dequant_q4_0,
        Q4_1 => legacy::dequant_q4_1,
        Q5_0 => legacy::dequant_q5_0,
        Q5_1 => legacy::dequant_q5_1,
        Q8_0 => legacy::dequant_q8_0,
        Q8_1 => legacy::dequant_q8_1,
        Q2_K => kquant::dequant_q2_k,
        Q3_K => kquant::dequant_q3_k,
        Q4_K => kquant::dequant_q4_k,
        Q5_K => kquant::dequant_q5_k,
        Q6_K => kquant::dequant_q6_k,
        Q8_K => kquant::dequant_q8_k,
        IQ4_NL => iq4::dequant_iq4_nl,
        IQ4_XS => iq4::dequant_iq4_xs,
        _ => return None,
    })
}

fn quantizer(ty: GgmlType) -> Option<BlockQuant> {
    use GgmlType::*;
    Some(match ty {
        F32 => float::quant_f32,
        F16 => float::quant_f16,
        BF16 => float::quant_bf16,
        Q4_0 => legacy::quant_q4_0,
        Q4_1 => legacy::quant_q4_1,
        Q5_0 => legacy::quant_q5_0,
        Q5_1 => legacy::quant_q5_1,
        Q8_0 => legacy::quant_q8_0,
        Q8_1 => legacy::quant_q8_1,
        Q4_K => kquant_quantize::quant_q4_k,
        Q6_K => kquant_quantize::quant_q6_k,
        Q8_K => kquant_quantize::quant_q8_k,
        _ => return None,
    })
}

/// GGML's reference weight quantizers (what `llama-quantize` writes without an imatrix).
fn reference_quantizer(ty: GgmlType) -> Option<BlockQuant> {
    use GgmlType::*;
    Some(match ty {
        Q4_K => kquant_ref::quant_q4_k_ref,
        Q5_K => kquant_ref::quant_q5_k_ref,
        Q6_K => kquant_ref::quant_q6_k_ref,
        F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 => return quantizer(ty),
        _ => return None,
    })
}

/// Whether [`quantize_reference`] handles `ty`.
pub fn can_quantize_reference(ty: GgmlType) -> bool {
    reference_quantizer(ty).is_some()
}

/// Encodes `src` as type `ty` into `dst` (exactly `ty.bytes_for(src.len())` bytes) the way
/// llama.cpp quantizes model weights without an importance matrix, byte for byte: the legacy
/// formats as [`quantize`] does, Q4_K/Q5_K/Q6_K by GGML's reference search (see
/// `kquant_ref.rs`). This is what `weft quantize` writes.
pub fn quantize_reference(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    let f = reference_quantizer(ty).ok_or(QuantError::QuantUnsupported(ty))?;
    check_len(ty, src.len(), dst.len())?;
    quantize_scalar_checked(ty, f, src, dst);
    Ok(())
}

/// Whether [`dequantize`] handles `ty`.
pub fn is_supported(ty: GgmlType) -> bool {
    dequantizer(ty).is_some()
}

/// Whether [`quantize`] handles `ty`.
pub fn can_quantize(ty: GgmlType) -> bool {
    quantizer(ty).is_some()
}

/// Checks that `n` elements of `ty` are whole blocks taking exactly `bytes` bytes.
fn check_len(ty: GgmlType, n: usize, bytes: usize) -> Result<(), QuantError> {
    let (block, size) = ty.block_geometry();
    if !n.is_multiple_of(block) {
        return Err(QuantError::NotWholeBlocks { ty, n, block });
    }
    // Saturates rather than overflows for absurd counts; no buffer can match then.
    let expected = (n / block).saturating_mul(size);
    if bytes != expected {
        return Err(QuantError::WrongByteLen {
            ty,
            n,
            expected,
            got: bytes,
        });
    }
    Ok(())
}

/// Decodes `dst.len()` elements of type `ty` from `src`, which must hold exactly
/// `ty.bytes_for(dst.len())` bytes.
pub fn dequantize(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    let f = dequantizer(ty).ok_or(QuantError::DequantUnsupported(ty))?;
    check_len(ty, dst.len(), src.len())?;
    let (block, size) = ty.block_geometry();
    if block == 1 {
        f(src, dst);
    } else {
        for (b, y) in src.chunks_exact(size).zip(dst.chunks_exact_mut(block)) {
            f(b, y);
        }
    }
    Ok(())
}

/// [`dequantize`] into a new vector of `n` elements.
pub fn dequantize_to_vec(ty: GgmlType, src: &[u8], n: usize) -> Result<Vec<f32>, QuantError> {
    // Validate before allocating: `n` may come from an untrusted file header.
    dequantizer(ty).ok_or(QuantError::DequantUnsupported(ty))?;
    check_len(ty, n, src.len())?;
    let mut out = vec![0f32; n];
    dequantize(ty, src, &mut out)?;
    Ok(out)
}

/// Encodes `src` as type `ty` into `dst`, which must hold exactly `ty.bytes_for(src.len())`
/// bytes, with GGML's reference quantizers (what weights are quantized with). See
/// [`can_quantize`] for the types handled. Activations are quantized as llama.cpp's CPU backend
/// does instead, by [`dot::quantize_activation_to`].
pub fn quantize(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    let f = quantizer(ty).ok_or(QuantError::QuantUnsupported(ty))?;
    check_len(ty, src.len(), dst.len())?;
    quantize_scalar_checked(ty, f, src, dst);
    Ok(())
}

/// The same as [`quantize`] (the portable GGML reference quantizers).
pub fn quantize_scalar(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    let f = quantizer(ty).ok_or(QuantError::QuantUnsupported(ty))?;
    check_len(ty, src.len(), dst.len())?;
    quantize_scalar_checked(ty, f, src, dst);
    Ok(())
}

fn quantize_scalar_checked(ty: GgmlType, f: BlockQuant, src: &[f32], dst: &mut [u8]) {
    let (block, size) = ty.block_geometry();
    if block == 1 {
        f(src, dst);
    } else {
        for (x, b) in src.chunks_exact(block).zip(dst.chunks_exact_mut(size)) {
            f(x, b);
        }
    }
}

/// [`quantize`] into a new byte vector.
pub fn quantize_to_vec(ty: GgmlType, src: &[f32]) -> Result<Vec<u8>, QuantError> {
    let (block, size) = ty.block_geometry();
    let mut out = vec![0u8; src.len() / block * size];
    quantize(ty, src, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests;
