//! The one-run trust set: the keys a verification or import trusts (the trust store's keys plus
//! any `--trusted-key` files for this run). The persistent store is the trust file (`trust_file`).

use super::keys::{key_id, load_verifying_key};
use super::TrustError;
use ed25519_dalek::VerifyingKey;
use serde::Serialize;
use std::path::Path;

/// One trusted public key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustedKey {
    pub name: String,
    pub key_id: String,
    /// When it was added to the trust store (`None` for keys trusted for one run).
    pub added_at: Option<String>,
    /// Where it came from: the file it was added from, or `--trusted-key`.
    pub source: String,
    #[serde(skip)]
    pub public_key: VerifyingKey,
}

/// The keys a verification trusts: the trust store plus any `--trusted-key` files for this run.
#[derive(Debug, Clone, Default)]
pub struct TrustSet {
    keys: Vec<TrustedKey>,
}

impl TrustSet {
    pub fn empty() -> Self {
        TrustSet { keys: Vec::new() }
    }

    /// A set of exactly these keys (the trust store's, read from its file).
    pub fn from_keys(keys: Vec<TrustedKey>) -> Self {
        TrustSet { keys }
    }

    /// Trusts the public key in `path` for this run (`--trusted-key`); returns its key id. A key
    /// that is already trusted keeps its trust-store name.
    pub fn add_key_file(&mut self, path: &Path) -> Result<String, TrustError> {
        let key = load_verifying_key(path)?;
        Ok(self.add_key(
            &format!("--trusted-key {}", crate::core::text::visible_path(path)),
            key,
            "--trusted-key",
        ))
    }

    /// Trusts `key` under `name`; returns its key id (an already trusted key keeps its name).
    pub fn add_key(&mut self, name: &str, key: VerifyingKey, source: &str) -> String {
        let id = key_id(&key);
        if self.name_of(&id).is_none() {
            self.keys.push(TrustedKey {
                name: name.to_string(),
                key_id: id.clone(),
                added_at: None,
                source: source.to_string(),
                public_key: key,
            });
        }
        id
    }

    pub fn name_of(&self, key_id: &str) -> Option<&str> {
        self.keys
            .iter()
            .find(|k| k.key_id == key_id)
            .map(|k| k.name.as_str())
    }

    /// The public key and name of a trusted key id.
    pub fn lookup(&self, key_id: &str) -> Option<(&VerifyingKey, &str)> {
        self.keys
            .iter()
            .find(|k| k.key_id == key_id)
            .map(|k| (&k.public_key, k.name.as_str()))
    }

    pub fn entries(&self) -> Vec<TrustedKey> {
        self.keys.clone()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}
