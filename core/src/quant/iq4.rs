//! Non-linear 4-bit formats: IQ4_NL (32-element blocks) and IQ4_XS (256-element super-blocks).
//!
//! Both map each 4-bit index through the same fixed table of 16 levels, chosen by GGML to fit
//! the bell shape of weight distributions.
//! - IQ4_NL (18 B): d (f16), qs[16]; element j < 16 is the low nibble of qs[j], j >= 16 the
//!   high nibble of qs[j - 16]; value = d * LEVELS[q].
//! - IQ4_XS (136 B): d (f16), scales_h (u16), scales_l[4], qs[128]. Sub-block ib (of 8, 32
//!   elements each) has the six-bit scale `nibble (ib % 2) of scales_l[ib / 2]` plus bits
//!   `2ib..2ib+2` of scales_h as its top bits, offset by 32; its element `n*16 + k` is nibble n
//!   of `qs[ib*16 + k]`; value = (d * scale) * LEVELS[q].

use super::float::f16_at;

/// The 16 levels of IQ4_NL and IQ4_XS.
pub const IQ4_LEVELS: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

pub(crate) fn dequant_iq4_nl(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let v = b[2 + j];
        y[j] = d * IQ4_LEVELS[(v & 0x0F) as usize] as f32;
        y[j + 16] = d * IQ4_LEVELS[(v >> 4) as usize] as f32;
    }
}

/// The eight signed sub-block scales of an IQ4_XS block.
#[inline(always)]
pub(crate) fn iq4_xs_scales(b: &[u8]) -> [i32; 8] {
    let high = u16::from_le_bytes([b[2], b[3]]);
    let mut out = [0i32; 8];
    for (ib, o) in out.iter_mut().enumerate() {
        let low = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let hi = ((high >> (2 * ib)) & 3) as u8;
        *o = (low | (hi << 4)) as i32 - 32;
    }
    out
}

pub(crate) fn dequant_iq4_xs(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let scales = iq4_xs_scales(b);
    let qs = &b[8..136];
    for ib in 0..8 {
        let dl = d * scales[ib] as f32;
        for k in 0..16 {
            let v = qs[ib * 16 + k];
            y[ib * 32 + k] = dl * IQ4_LEVELS[(v & 0x0F) as usize] as f32;
            y[ib * 32 + 16 + k] = dl * IQ4_LEVELS[(v >> 4) as usize] as f32;
        }
    }
}
