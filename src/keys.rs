//! API keys: generation, hashing, parsing, and the database-name patterns keys carry.
//!
//! A key reads `sk_<id>_<secret>`: `id` is 16 hex digits, public, used to find the key; `secret`
//! is 64 hex digits (256 random bits). Only the SHA-256 of the whole text is stored (a hash is
//! enough for a secret of that entropy; no password stretching is needed).

use rand::RngCore;
use sha2::{Digest, Sha256};

/// A newly issued key: the text to show once, and what to store.
#[derive(Debug, Clone)]
pub struct IssuedKey {
    pub text: String,
    pub id: String,
    pub sha256: [u8; 32],
}

pub fn issue() -> IssuedKey {
    let mut rng = rand::rng();
    let mut id = [0u8; 8];
    let mut secret = [0u8; 32];
    rng.fill_bytes(&mut id);
    rng.fill_bytes(&mut secret);
    let id = hex::encode(id);
    let text = format!("sk_{id}_{}", hex::encode(secret));
    let sha256 = hash(&text);
    IssuedKey { text, id, sha256 }
}

pub fn hash(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// The id of a key text, if the text has the shape of a key.
pub fn id_of(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("sk_")?;
    let (id, secret) = rest.split_once('_')?;
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(id, 16) && hex(secret, 64)).then_some(id)
}

/// Compares two hashes in time independent of where they differ.
pub fn same_hash(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `name` matches the glob `pattern`: `*` is any run of characters, `?` any one.
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                backtrack = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match backtrack {
                Some((star, matched)) => {
                    pi = star + 1;
                    ni = matched + 1;
                    backtrack = Some((star, matched + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Checks a pattern given to `strata keys create`.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("the database pattern must not be empty".to_owned());
    }
    if let Some(bad) = pattern
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '?')))
    {
        return Err(format!(
            "the database pattern {pattern:?} may hold only name characters, * and ?, not {bad:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_keys_parse_and_hash() {
        let key = issue();
        assert_eq!(id_of(&key.text), Some(key.id.as_str()));
        assert!(same_hash(&hash(&key.text), &key.sha256));
        assert!(!same_hash(&hash("sk_x"), &key.sha256));
        assert_ne!(issue().text, key.text);
        assert_eq!(id_of("sk_0123"), None);
        assert_eq!(id_of(&key.text.replace("sk_", "pk_")), None);
        assert_eq!(id_of(&format!("{}0", key.text)), None);
    }

    #[test]
    fn globs() {
        for (pattern, name, expected) in [
            ("*", "anything", true),
            ("*", "", true),
            ("prod-*", "prod-eu", true),
            ("prod-*", "staging", false),
            ("db?", "db1", true),
            ("db?", "db12", false),
            ("*-eu-*", "a-eu-b", true),
            ("*-eu-*", "a-us-b", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
        ] {
            assert_eq!(
                pattern_matches(pattern, name),
                expected,
                "{pattern} ~ {name}"
            );
        }
        assert!(check_pattern("prod-*").is_ok());
        assert!(check_pattern("").is_err());
        assert!(check_pattern("a/b").is_err());
    }
}
