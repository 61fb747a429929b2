//! Quantized block formats: layouts, dequantization, quantization.
