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
    /// UTF-8 text: a path that is not is refused when set ([`PathNotText`](TrustError::PathNotText)).
    key_path: String,
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
        path: PathBuf::from(cfg.key_path),
        source: DefaultKeySource::Config(path),
        key_id: Some(cfg.key_id),
    }))
}

/// Makes `key_path` the default signing key (it must load as an ed25519 private key). Returns the
/// absolute path stored, the key id, and warnings about the key file. A path that is not UTF-8 is
/// refused before anything is written: the setting stores it as text.
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
        key_path: storable_text(&abs)?.to_string(),
        key_id: id.clone(),
        set_at: crate::core::time::now_rfc3339(),
    };
    let path = signing_config_path();
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    let write_err = |source| TrustError::Write {
        path: path.clone(),
        source,
    };
    let mut text = serde_json::to_string_pretty(&cfg).map_err(|e| write_err(e.into()))?;
    text.push('\n');
    crate::core::file_output::write_atomic_private(&path, text.as_bytes())?;
    Ok((abs, id, warnings))
}

/// Refuses, before anything is written, a key file the default signing key setting could not
/// store (`keys generate --default` checks the key pair's future path with it): the path it would
/// store, canonical as far as it exists, must be UTF-8.
pub fn check_default_key_path(key_path: &Path) -> Result<(), TrustError> {
    let abs = std::path::absolute(key_path).unwrap_or_else(|_| key_path.to_path_buf());
    // The deepest part that exists, canonical (symbolic links resolved), and the rest as given.
    let stored = abs
        .ancestors()
        .find_map(|base| {
            let canonical = std::fs::canonicalize(base).ok()?;
            let rest = abs.strip_prefix(base).ok()?;
            Some(match rest.as_os_str().is_empty() {
                true => canonical,
                false => canonical.join(rest),
            })
        })
        .unwrap_or(abs);
    storable_text(&stored).map(|_| ())
}

/// `path` as the text the setting stores, or why it cannot be stored.
fn storable_text(path: &Path) -> Result<&str, TrustError> {
    path.to_str().ok_or_else(|| TrustError::PathNotText {
        path: path.to_path_buf(),
        config: signing_config_path(),
        env: SIGNING_KEY_ENV,
    })
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

/// The key a report written without `--key` (the console's triage reports and inbox filings) is
/// signed with, and what the operator must hear about it: the warnings about the key file (e.g.
/// readable by other users) and why a key was not used.
pub struct ReportSigner {
    pub key: Option<super::SigningKey>,
    pub warnings: Vec<String>,
}

/// The local signing key: the configured default (`keys default`, `$AIRLOCK_SIGNING_KEY`), else
/// the first key pair in `keys_dir` without a problem (an over-readable private key is passed
/// over there, as the key listing says); none when there is no key.
pub fn report_signer(keys_dir: &Path) -> ReportSigner {
    report_signer_from(default_signing_key().ok().flatten(), keys_dir)
}

/// [`report_signer`] with the default key given.
fn report_signer_from(default: Option<DefaultSigningKey>, keys_dir: &Path) -> ReportSigner {
    // The configured default, only while its file still holds the key recorded for it (as `jobs
    // sign` requires): a swapped key file signs nothing, and the report says why it is unsigned.
    if let Some(default) = default {
        return match default.load() {
            Ok((key, warnings)) => ReportSigner {
                key: Some(key),
                warnings,
            },
            Err(e) => ReportSigner {
                key: None,
                warnings: vec![format!("the default signing key was not used: {e}")],
            },
        };
    }
    let keys = match super::key_dir::local_keys(keys_dir) {
        Ok(keys) => keys,
        Err(e) => {
            return ReportSigner {
                key: None,
                warnings: vec![format!("no key signed: {e}")],
            }
        }
    };
    let usable = keys
        .iter()
        .find_map(|k| k.private_path.as_ref().filter(|_| k.problem.is_none()));
    if let Some((key, warnings)) = usable.and_then(|path| load_signing_key(path).ok()) {
        return ReportSigner {
            key: Some(key),
            warnings,
        };
    }
    // No key signs: say why each key pair there was passed over.
    ReportSigner {
        key: None,
        warnings: keys
            .iter()
            .filter(|k| k.private_path.is_some())
            .filter_map(|k| {
                let problem = k.problem.as_ref()?;
                Some(format!("key {} was not used: {problem}", k.name))
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::trust::keys::generate_key;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Without a default key, the first key pair without a problem signs; one other users can
    /// read is passed over (and said so when no key signs); the default key, when configured,
    /// signs even when over-readable, with the warning `jobs sign` prints.
    #[test]
    fn a_report_is_signed_by_the_default_else_the_first_sound_key_pair() {
        let dir = tempfile::tempdir().unwrap();
        let a = generate_key("a", dir.path()).unwrap();
        let b = generate_key("b", dir.path()).unwrap();
        let id = |s: &ReportSigner| s.key.as_ref().map(|k| key_id(&k.verifying_key()));
        let s = report_signer_from(None, dir.path());
        assert_eq!(id(&s), Some(a.key_id.clone()));
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        // `a.pem` readable by others: `b` signs.
        chmod(&dir.path().join("a.pem"), 0o644);
        assert_eq!(id(&report_signer_from(None, dir.path())), Some(b.key_id));
        // Both: nothing signs, and each is named with its problem.
        chmod(&dir.path().join("b.pem"), 0o640);
        let s = report_signer_from(None, dir.path());
        assert!(s.key.is_none());
        assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
        assert!(s.warnings[0].starts_with("key a was not used: private key"));
        assert!(
            s.warnings[0].contains("readable by other users"),
            "{:?}",
            s.warnings
        );
        // The default key signs even so, and the warning goes with the report.
        let default = DefaultSigningKey {
            path: dir.path().join("a.pem"),
            source: DefaultKeySource::Env,
            key_id: None,
        };
        let s = report_signer_from(Some(default.clone()), dir.path());
        assert_eq!(id(&s), Some(a.key_id.clone()));
        assert!(
            s.warnings[0].contains("readable by other users"),
            "{:?}",
            s.warnings
        );
        // A default whose file holds another key than the one recorded signs nothing.
        let swapped = DefaultSigningKey {
            key_id: Some("0".repeat(64)),
            source: DefaultKeySource::Config(dir.path().join("signing.json")),
            ..default
        };
        let s = report_signer_from(Some(swapped), dir.path());
        assert!(s.key.is_none());
        assert!(
            s.warnings[0].starts_with("the default signing key was not used"),
            "{:?}",
            s.warnings
        );
        // A keys directory that is not one: said, not silently unsigned.
        let file = dir.path().join("a.pub.pem");
        let s = report_signer_from(None, &file);
        assert!(s.key.is_none());
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
    }
}
