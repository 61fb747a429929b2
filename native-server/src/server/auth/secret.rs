//! API key material: making keys and hashing them.
//!
//! A key is `weft_` + 32 bytes from the OS random generator, base64url. Only its SHA-256 is
//! stored. A slow password hash (argon2) exists to make guessing *low-entropy* secrets
//! expensive; a 256-bit random key cannot be guessed however fast the hash is, so one SHA-256
//! is as safe here and keeps checking a key on every request cheap. Users' passwords, which
//! people choose, are hashed with argon2id (`admin/users.rs`).

use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What every key starts with (so leaked keys are recognisable by scanners).
pub const KEY_PREFIX: &str = "weft_";

/// Characters of a key kept in listings to tell keys apart (prefix + 8).
const SHOWN: usize = KEY_PREFIX.len() + 8;

/// A fresh key from the OS random generator.
pub fn generate() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(format!(
        "{KEY_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// Hex SHA-256 of a key (what the database stores and looks keys up by).
pub fn hash(key: &str) -> String {
    let d = Sha256::digest(key.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The start of a key shown in listings.
pub fn shown_prefix(key: &str) -> String {
    key.chars().take(SHOWN).collect()
}

/// Compares two hashes in time independent of where they differ.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_long_random_and_hash_stably() {
        let (a, b) = (generate().unwrap(), generate().unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with(KEY_PREFIX));
        // 32 bytes base64url without padding: 43 characters.
        assert_eq!(a.len(), KEY_PREFIX.len() + 43);
        assert_eq!(hash(&a), hash(&a));
        assert_eq!(hash(&a).len(), 64);
        assert!(same(&hash(&a), &hash(&a)));
        assert!(!same(&hash(&a), &hash(&b)));
        assert_eq!(shown_prefix(&a).len(), KEY_PREFIX.len() + 8);
    }
}
