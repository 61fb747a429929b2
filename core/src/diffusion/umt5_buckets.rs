//! T5's relative-position buckets, bidirectional (the encoder's): which row of a layer's
//! `relative_attention_bias` table the pair (query i, key j) reads, from `j - i`.
//!
//! Half the buckets serve keys after the query, half keys at or before it. Within a half,
//! the first quarter of all buckets are exact distances; the rest are log-spaced up to
//! `max_distance`, beyond which everything shares the last bucket. The log is taken in f32
//! and divided by the f64 constant rounded to f32, as transformers does on an f32 tensor,
//! so the boundaries (distances 8, 12, 16, 23, 32, 46, 64, 91 for Wan's 32 / 128) fall where
//! they fall there.

/// The bucket of relative position `rel = key - query`.
pub fn relative_position_bucket(rel: i64, num_buckets: usize, max_distance: usize) -> usize {
    let half = num_buckets / 2;
    let base = if rel > 0 { half } else { 0 };
    let dist = rel.unsigned_abs() as usize;
    let max_exact = half / 2;
    if dist < max_exact {
        return base + dist;
    }
    let span = ((max_distance as f64) / (max_exact as f64)).ln() as f32;
    let ratio = (dist as f32 / max_exact as f32).ln() / span * (half - max_exact) as f32;
    // `ratio` is finite and non-negative here (dist >= max_exact >= 1, checked config).
    base + (max_exact + ratio as usize).min(half - 1)
}

#[cfg(test)]
mod tests {
    use super::relative_position_bucket;

    /// The distances where the bucket changes for 32 buckets / max distance 128, as
    /// transformers 4.57's `UMT5Attention._relative_position_bucket` gives them (checked
    /// over 0..=200 in both directions).
    #[test]
    fn boundaries_match_transformers() {
        let changes = [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 23, 32, 46, 64, 91];
        for sign in [1i64, -1] {
            let b = |d: i64| relative_position_bucket(sign * d, 32, 128);
            let found: Vec<i64> = (1..=200).filter(|&d| b(d) != b(d - 1)).collect();
            assert_eq!(found, changes, "sign {sign}");
        }
        assert_eq!(relative_position_bucket(0, 32, 128), 0);
        assert_eq!(relative_position_bucket(1, 32, 128), 17);
        assert_eq!(relative_position_bucket(-1, 32, 128), 1);
        assert_eq!(relative_position_bucket(8, 32, 128), 24);
        assert_eq!(relative_position_bucket(-64, 32, 128), 14);
        assert_eq!(relative_position_bucket(200, 32, 128), 31);
        assert_eq!(relative_position_bucket(-200, 32, 128), 15);
    }
}
