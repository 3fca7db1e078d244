//! The default signing key setting (`DATA_DIR/signing.json`, or `AIRLOCK_SIGNING_KEY`): which key
//! `jobs export --sign`, `jobs sign` and snapshot signing use when no `--key` is given.

use super::keys::{create_private_dir, key_id, load_signing_key};
use super::trust_file::read_config_text;
use super::TrustError;
use crate::core::paths::data_dir;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Environment variable naming the default signing key file (wins over `keys default`).
pub const SIGNING_KEY_ENV: &str = "AIRLOCK_SIGNING_KEY";

/// The default signing key configuration: `DATA_DIR/signing.json`.
pub fn signing_config_path() -> PathBuf {
    data_dir().join("signing.json")
}

/// Where the default signing key setting came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultKeySource {
    /// The `AIRLOCK_SIGNING_KEY` environment variable.
    Env,
    /// The configuration file written by `airlock keys default KEY.pem`.
    Config(PathBuf),
}

/// The configured default signing key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultSigningKey {
    pub path: PathBuf,
    pub source: DefaultKeySource,
    /// The key id recorded by `keys default` (none for `AIRLOCK_SIGNING_KEY`).
    pub key_id: Option<String>,
}

impl DefaultSigningKey {
    /// Loads the key (with the warnings of [`load_signing_key`]). A file that no longer holds the
    /// key `keys default` recorded (regenerated under the same name, or swapped) is refused: signing
    /// with it would make bundles the receiving side does not trust.
    pub fn load(&self) -> Result<(ed25519_dalek::SigningKey, Vec<String>), TrustError> {
        let (key, warnings) = load_signing_key(&self.path)?;
        let actual = key_id(&key.verifying_key());
        if let Some(expected) = self.key_id.as_ref().filter(|e| **e != actual) {
            return Err(TrustError::DefaultKeyChanged {
                path: self.path.clone(),
                expected: expected.clone(),
                actual,
            });
        }
        Ok((key, warnings))
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SigningConfig {
    key_path: PathBuf,
    key_id: String,
    set_at: String,
}

/// The default signing key path: `AIRLOCK_SIGNING_KEY`, else the one set by `keys default`.
pub fn default_signing_key() -> Result<Option<DefaultSigningKey>, TrustError> {
    if let Some(p) = std::env::var_os(SIGNING_KEY_ENV).filter(|v| !v.is_empty()) {
        return Ok(Some(DefaultSigningKey {
            path: PathBuf::from(p),
            source: DefaultKeySource::Env,
            key_id: None,
        }));
    }
    let path = signing_config_path();
    let text = match read_config_text(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(TrustError::Read { path, source }),
    };
    let cfg: SigningConfig = serde_json::from_str(&text).map_err(|e| TrustError::StoreDamaged {
        path: path.clone(),
        detail: format!("not a signing key setting ({e})"),
    })?;
    Ok(Some(DefaultSigningKey {
        path: cfg.key_path,
        source: DefaultKeySource::Config(path),
        key_id: Some(cfg.key_id),
    }))
}

/// Makes `key_path` the default signing key (it must load as an ed25519 private key). Returns the
/// absolute path stored, the key id, and warnings about the key file.
pub fn set_default_signing_key(
    key_path: &Path,
) -> Result<(PathBuf, String, Vec<String>), TrustError> {
    let (key, warnings) = load_signing_key(key_path)?;
    let abs = std::fs::canonicalize(key_path).map_err(|source| TrustError::Read {
        path: key_path.to_path_buf(),
        source,
    })?;
    let id = key_id(&key.verifying_key());
    let cfg = SigningConfig {
        key_path: abs.clone(),
        key_id: id.clone(),
        set_at: crate::core::time::now_rfc3339(),
    };
    let path = signing_config_path();
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    let mut text = serde_json::to_string_pretty(&cfg).expect("the setting always serialises");
    text.push('\n');
    crate::core::file_output::write_atomic_private(&path, text.as_bytes())?;
    Ok((abs, id, warnings))
}

/// Forgets the configured default signing key; returns whether one was set.
pub fn clear_default_signing_key() -> Result<bool, TrustError> {
    let path = signing_config_path();
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(TrustError::Write { path, source }),
    }
}
