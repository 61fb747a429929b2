//! Average pooling over a 2-D grid of rows (a vision encoder's patch grid): each output row is
//! the mean of a `k × k` block of input rows, blocks taken row by row with stride `k`.

/// `x` holds `height × width` rows of `cols` values (grid row by row); `out` receives
/// `(height / k) × (width / k)` rows. The sum runs over the block row by row, then is divided
/// by `k²`, the order ggml's average `pool_2d` uses.
pub fn avg_pool_2d(x: &[f32], cols: usize, width: usize, height: usize, k: usize, out: &mut [f32]) {
    let (ow, oh) = (width / k, height / k);
    let inv = 1.0 / (k * k) as f32;
    for oy in 0..oh {
        for ox in 0..ow {
            let o = &mut out[(oy * ow + ox) * cols..(oy * ow + ox + 1) * cols];
            o.fill(0.0);
            for dy in 0..k {
                for dx in 0..k {
                    let r = (oy * k + dy) * width + ox * k + dx;
                    for (a, &v) in o.iter_mut().zip(&x[r * cols..(r + 1) * cols]) {
                        *a += v;
                    }
                }
            }
            for a in o.iter_mut() {
                *a *= inv;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_blocks_of_the_grid() {
        // A 4 × 2 grid (width 4, height 2) of 1-wide rows, pooled 2 × 2 into 2 rows.
        let x = [1.0, 2.0, 10.0, 20.0, 3.0, 4.0, 30.0, 40.0];
        let mut out = [0.0; 2];
        avg_pool_2d(&x, 1, 4, 2, 2, &mut out);
        assert_eq!(out, [2.5, 25.0]);
        // Two channels keep apart.
        let x2: Vec<f32> = x.iter().flat_map(|&v| [v, -v]).collect();
        let mut out2 = [0.0; 4];
        avg_pool_2d(&x2, 2, 4, 2, 2, &mut out2);
        assert_eq!(out2, [2.5, -2.5, 25.0, -25.0]);
    }
}
