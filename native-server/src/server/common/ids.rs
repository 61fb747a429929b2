//! Identifiers for sessions, responses, completions and tool calls: 128 bits from the OS
//! random generator, as 32 lowercase hex digits. An id is not a secret (owners are checked),
//! but one must not be guessable or countable from another: ids that were time plus a counter
//! told a caller roughly which ids other principals had just been given.

/// A fresh id (32 lowercase hex digits, 128 random bits).
pub fn unique() -> String {
    weft_storage::random_hex128()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `s` has the shape of [`unique`]'s ids: 32 lowercase hex digits.
    fn is_unique(s: &str) -> bool {
        s.len() == 32
            && s.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    }

    #[test]
    fn ids_are_128_random_bits() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| unique()).collect();
        assert_eq!(ids.len(), 1000, "no id repeats");
        assert!(ids.iter().all(|i| is_unique(i)));
        // 32 hex digits hold 128 bits; each bit position takes both values across the sample,
        // which a time or counter part would not (its high bits stay fixed).
        let (mut ones, mut zeros) = (0u128, 0u128);
        for i in &ids {
            let v = u128::from_str_radix(i, 16).unwrap();
            ones |= v;
            zeros |= !v;
        }
        assert_eq!((ones, zeros), (u128::MAX, u128::MAX));
        assert!(!is_unique("0123"));
        assert!(!is_unique("0123456789ABCDEF0123456789abcdef"));
    }
}
