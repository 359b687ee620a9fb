//! Sealing of the secrets the log must hold: platform users' SigV4 secret keys, which the server
//! needs in clear to check signatures, so they cannot be stored as hashes the way data-plane API
//! keys are. A secret is sealed with AES-256-GCM under the nodes' seal key before it is written
//! to the log, and unsealed when a request is checked; dumps, audits and change streams only
//! ever see the sealed bytes.
//!
//! The seal key is `platform.seal_key` (64 hex digits), the same on every node of a cluster; when
//! that is empty, a node uses `<data_dir>/seal.key`, created with a random key on first use
//! (mode 0600). Losing the key loses the users' secrets: their keys must then be issued again.

use std::path::Path;

use ring::{
    aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey},
    rand::{SecureRandom, SystemRandom},
};

use crate::error::{Error, Result};

pub struct SealKey {
    key: LessSafeKey,
    random: SystemRandom,
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(..)")
    }
}

impl SealKey {
    /// A key from 64 hex digits.
    pub fn from_hex(text: &str) -> Result<SealKey> {
        let bytes = hex::decode(text.trim())
            .ok()
            .filter(|bytes| bytes.len() == 32)
            .ok_or_else(|| {
                Error::BadRequest("platform.seal_key must be 64 hex digits (32 bytes)".to_owned())
            })?;
        let key = UnboundKey::new(&AES_256_GCM, &bytes)
            .map_err(|_| Error::Internal("cannot make an AES-256-GCM key".to_owned()))?;
        Ok(SealKey {
            key: LessSafeKey::new(key),
            random: SystemRandom::new(),
        })
    }

    /// The configured key, or else the data directory's `seal.key`, made on first use.
    pub fn load(configured: &str, data_dir: &Path) -> Result<SealKey> {
        if !configured.is_empty() {
            return SealKey::from_hex(configured);
        }
        let path = data_dir.join("seal.key");
        match std::fs::read_to_string(&path) {
            Ok(text) => SealKey::from_hex(&text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let mut bytes = [0u8; 32];
                SystemRandom::new()
                    .fill(&mut bytes)
                    .map_err(|_| Error::Internal("no randomness for a seal key".to_owned()))?;
                let text = hex::encode(bytes);
                write_private(&path, &text)?;
                tracing::info!(path = %path.display(), "created a seal key for users' secret keys");
                SealKey::from_hex(&text)
            }
            Err(error) => Err(Error::Internal(format!(
                "cannot read {}: {error}",
                path.display()
            ))),
        }
    }

    /// `nonce || ciphertext || tag`.
    pub fn seal(&self, secret: &[u8]) -> Result<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| Error::Internal("no randomness for a nonce".to_owned()))?;
        let mut sealed = secret.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::empty(),
                &mut sealed,
            )
            .map_err(|_| Error::Internal("sealing failed".to_owned()))?;
        let mut out = nonce.to_vec();
        out.extend(sealed);
        Ok(out)
    }

    /// The secret, or an error when the bytes were sealed with another key or changed.
    pub fn unseal(&self, sealed: &[u8]) -> Result<Vec<u8>> {
        if sealed.len() < NONCE_LEN {
            return Err(Error::Internal("a sealed secret is truncated".to_owned()));
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| Error::Internal("a sealed secret has a bad nonce".to_owned()))?;
        let mut buffer = rest.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::empty(), &mut buffer)
            .map_err(|_| {
                Error::Internal(
                    "a user's secret key was sealed with another seal key (platform.seal_key must be the same on every node)"
                        .to_owned(),
                )
            })?;
        Ok(plain.to_vec())
    }
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::Internal(format!("cannot create {}: {e}", path.display())))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| Error::Internal(format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_with_its_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let key = SealKey::load("", dir.path()).unwrap();
        let sealed = key.seal(b"wJalrXUtnFEMI").unwrap();
        assert!(!sealed.windows(4).any(|w| w == b"wJal"));
        assert_eq!(key.unseal(&sealed).unwrap(), b"wJalrXUtnFEMI");
        // The same file gives the same key; sealing twice gives different bytes.
        let again = SealKey::load("", dir.path()).unwrap();
        assert_eq!(again.unseal(&sealed).unwrap(), b"wJalrXUtnFEMI");
        assert_ne!(key.seal(b"wJalrXUtnFEMI").unwrap(), sealed);
        // Another key, or changed bytes, do not open it.
        let other = SealKey::from_hex(&"ab".repeat(32)).unwrap();
        assert!(other.unseal(&sealed).is_err());
        let mut changed = sealed.clone();
        changed[20] ^= 1;
        assert!(key.unseal(&changed).is_err());
        assert!(SealKey::from_hex("abc").is_err());
    }
}
