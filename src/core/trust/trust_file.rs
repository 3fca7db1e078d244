//! The trust store file (`DATA_DIR/trust.json`): trusted public keys with a name each and the
//! persistent signature policy; plain JSON, locked while open, replaced atomically.

use super::keys::{
    create_private_dir, key_id, load_verifying_key, public_key_pem, verifying_key_from_pem,
};
use super::names::validate_name;
use super::trust_set::{TrustSet, TrustedKey};
use super::TrustError;
use crate::core::file_input::MAX_CONFIG_BYTES;
use crate::core::paths::data_dir;
use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

const STORE_VERSION: u32 = 1;

/// The trust store file: `DATA_DIR/trust.json`.
pub fn trust_store_path() -> PathBuf {
    data_dir().join("trust.json")
}

impl TrustSet {
    /// The trust store in the data directory (empty when there is none yet).
    pub fn load_default() -> Result<Self, TrustError> {
        Ok(TrustStore::open_default()?.trust_set())
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoreFile {
    version: u32,
    keys: Vec<StoredKey>,
    /// The persistent signature policy ([`super::policy`]): every verify and import requires a
    /// signature by a trusted key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    require_signature: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredKey {
    name: String,
    key_id: String,
    public_key: String,
    added_at: String,
    source: String,
}

/// How long a change waits for another process's change of the same trust store to finish.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The persistent trust store (`DATA_DIR/trust.json`).
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
    keys: Vec<TrustedKey>,
    require_signature: bool,
    lock_wait: std::time::Duration,
}

impl TrustStore {
    pub fn open_default() -> Result<Self, TrustError> {
        Self::open(&trust_store_path())
    }

    /// Reads the store at `path`; a missing file is an empty store.
    pub fn open(path: &Path) -> Result<Self, TrustError> {
        let (keys, require_signature) = read_store_file(path)?;
        Ok(TrustStore {
            path: path.to_path_buf(),
            keys,
            require_signature,
            lock_wait: LOCK_WAIT,
        })
    }

    /// Whether the persistent policy requires a signature by a trusted key (`requireSignature`).
    pub fn require_signature(&self) -> bool {
        self.require_signature
    }

    /// Sets the persistent `requireSignature` policy.
    pub fn set_require_signature(&mut self, on: bool) -> Result<(), TrustError> {
        self.modify(|_, require| {
            *require = on;
            Ok(())
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn keys(&self) -> &[TrustedKey] {
        &self.keys
    }

    pub fn trust_set(&self) -> TrustSet {
        TrustSet::from_keys(self.keys.clone())
    }

    /// Adds the public key file `public_path` under `name`.
    pub fn add_file(&mut self, public_path: &Path, name: &str) -> Result<TrustedKey, TrustError> {
        validate_name(name)?;
        let key = load_verifying_key(public_path)?;
        // Where it came from, as text: a name that is not UTF-8 keeps its bytes as `\xNN`.
        let source =
            std::fs::canonicalize(public_path).unwrap_or_else(|_| public_path.to_path_buf());
        self.add(name, key, &crate::core::text::visible_path(&source))
    }

    /// Adds `key` under `name`. The same key id or the same name twice is an error.
    pub fn add(
        &mut self,
        name: &str,
        key: VerifyingKey,
        source: &str,
    ) -> Result<TrustedKey, TrustError> {
        validate_name(name)?;
        let id = key_id(&key);
        let entry = TrustedKey {
            name: name.to_string(),
            key_id: id.clone(),
            added_at: Some(crate::core::time::now_rfc3339()),
            source: source.to_string(),
            public_key: key,
        };
        let added = entry.clone();
        self.modify(move |keys, _| {
            if let Some(k) = keys.iter().find(|k| k.key_id == id) {
                return Err(TrustError::DuplicateKey {
                    key_id: id.clone(),
                    name: k.name.clone(),
                });
            }
            if let Some(k) = keys.iter().find(|k| k.name == entry.name) {
                return Err(TrustError::DuplicateName {
                    name: entry.name.clone(),
                    key_id: k.key_id.clone(),
                });
            }
            keys.push(entry);
            Ok(())
        })?;
        Ok(added)
    }

    /// Removes the key with this name or key id; returns it.
    pub fn remove(&mut self, name_or_id: &str) -> Result<TrustedKey, TrustError> {
        let mut removed = None;
        self.modify(|keys, _| {
            let i = keys
                .iter()
                .position(|k| k.name == name_or_id || k.key_id == name_or_id)
                .ok_or_else(|| TrustError::NotTrusted(name_or_id.to_string()))?;
            removed = Some(keys.remove(i));
            Ok(())
        })?;
        Ok(removed.expect("set when modify succeeds"))
    }

    /// Read-modify-write under an exclusive lock, so concurrent adds never lose one another; the
    /// file is replaced atomically.
    fn modify(
        &mut self,
        change: impl FnOnce(&mut Vec<TrustedKey>, &mut bool) -> Result<(), TrustError>,
    ) -> Result<(), TrustError> {
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        create_private_dir(&dir)?;
        let _lock = lock_file(&self.path, self.lock_wait)?;
        let (mut keys, mut require_signature) = read_store_file(&self.path)?;
        change(&mut keys, &mut require_signature)?;
        let file = StoreFile {
            version: STORE_VERSION,
            require_signature,
            keys: keys
                .iter()
                .map(|k| StoredKey {
                    name: k.name.clone(),
                    key_id: k.key_id.clone(),
                    public_key: public_key_pem(&k.public_key),
                    added_at: k.added_at.clone().unwrap_or_default(),
                    source: k.source.clone(),
                })
                .collect(),
        };
        let mut text = serde_json::to_string_pretty(&file).expect("the store always serialises");
        text.push('\n');
        crate::core::file_output::write_atomic_private(&self.path, text.as_bytes())?;
        self.keys = keys;
        self.require_signature = require_signature;
        Ok(())
    }
}

/// An exclusive lock held while the file is changed: `PATH.lock` beside `path`. Waits at most
/// `wait` for another process's change to finish, then says who to wait for instead of hanging.
fn lock_file(path: &Path, wait: std::time::Duration) -> Result<std::fs::File, TrustError> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    let lock_path = path.with_file_name(name);
    let err = |source| TrustError::Write {
        path: lock_path.clone(),
        source,
    };
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| match lock_path.symlink_metadata() {
            // Not there: its folder refused a new file.
            Err(_) => err(crate::core::file_output::folder_not_writable(
                lock_path
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new(".")),
                e,
            )),
            Ok(_) => err(e),
        })?;
    let deadline = std::time::Instant::now() + wait;
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(std::fs::TryLockError::Error(source)) => return Err(err(source)),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(TrustError::StoreLocked {
                    path: path.to_path_buf(),
                    lock: lock_path,
                    secs: wait.as_secs(),
                })
            }
        }
    }
}

/// A small JSON configuration file (regular, at most [`MAX_CONFIG_BYTES`]) as text.
pub(crate) fn read_config_text(path: &Path) -> std::io::Result<String> {
    let bytes = crate::core::file_input::read_regular_capped(path, MAX_CONFIG_BYTES)?;
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::other(format!(
            "not UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

fn read_store_file(path: &Path) -> Result<(Vec<TrustedKey>, bool), TrustError> {
    let text = match read_config_text(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
        Err(source) => {
            return Err(TrustError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let damaged = |detail: String| TrustError::StoreDamaged {
        path: path.to_path_buf(),
        detail,
    };
    let file: StoreFile =
        serde_json::from_str(&text).map_err(|e| damaged(format!("not a trust store ({e})")))?;
    if file.version != STORE_VERSION {
        return Err(damaged(format!(
            "version {} is not supported (this airlock reads version {STORE_VERSION})",
            file.version
        )));
    }
    let mut keys: Vec<TrustedKey> = Vec::with_capacity(file.keys.len());
    for (i, k) in file.keys.into_iter().enumerate() {
        let key = verifying_key_from_pem(&k.public_key)
            .map_err(|e| damaged(format!("keys[{i}] ({:?}): bad public key: {e}", k.name)))?;
        let id = key_id(&key);
        if id != k.key_id {
            return Err(damaged(format!(
                "keys[{i}] ({:?}): keyId {} does not match its public key ({id})",
                k.name, k.key_id
            )));
        }
        if keys.iter().any(|o| o.key_id == id || o.name == k.name) {
            return Err(damaged(format!("keys[{i}] ({:?}) is listed twice", k.name)));
        }
        keys.push(TrustedKey {
            name: k.name,
            key_id: id,
            added_at: Some(k.added_at).filter(|s| !s.is_empty()),
            source: k.source,
            public_key: key,
        });
    }
    Ok((keys, file.require_signature))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_round_trip_duplicates_and_removal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/trust.json");
        let a = ed25519_dalek::SigningKey::from_bytes(&[1; 32]).verifying_key();
        let b = ed25519_dalek::SigningKey::from_bytes(&[2; 32]).verifying_key();
        let mut store = TrustStore::open(&path).unwrap();
        assert!(store.keys().is_empty());
        store.add("alpha", a, "a.pub.pem").unwrap();
        assert!(matches!(
            store.add("other", a, "x"),
            Err(TrustError::DuplicateKey { .. })
        ));
        assert!(matches!(
            store.add("alpha", b, "x"),
            Err(TrustError::DuplicateName { .. })
        ));
        store.add("beta", b, "b.pub.pem").unwrap();
        let reopened = TrustStore::open(&path).unwrap();
        assert_eq!(reopened.keys(), store.keys());
        let set = reopened.trust_set();
        assert_eq!(set.name_of(&key_id(&b)), Some("beta"));
        let mut store = reopened;
        let removed = store.remove(&key_id(&a)).unwrap();
        assert_eq!(removed.name, "alpha");
        assert!(matches!(
            store.remove("alpha"),
            Err(TrustError::NotTrusted(_))
        ));
        assert_eq!(TrustStore::open(&path).unwrap().keys().len(), 1);
    }

    #[test]
    fn a_change_while_another_process_changes_the_store_waits_then_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trust.json");
        let a = ed25519_dalek::SigningKey::from_bytes(&[1; 32]).verifying_key();
        let mut store = TrustStore::open(&path).unwrap();
        store.lock_wait = std::time::Duration::from_millis(100);
        // Another process's change in progress: its own open of the lock file, locked.
        let held = std::fs::File::create(dir.path().join("trust.json.lock")).unwrap();
        held.lock().unwrap();
        let err = store.add("alpha", a, "a").unwrap_err();
        assert!(matches!(err, TrustError::StoreLocked { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("trust.json.lock") && text.contains("retry"),
            "{text}"
        );
        assert!(TrustStore::open(&path).unwrap().keys().is_empty());
        drop(held);
        store.add("alpha", a, "a").unwrap();
        assert_eq!(TrustStore::open(&path).unwrap().keys().len(), 1);
    }

    #[test]
    fn a_tampered_store_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trust.json");
        let a = ed25519_dalek::SigningKey::from_bytes(&[1; 32]).verifying_key();
        TrustStore::open(&path)
            .unwrap()
            .add("alpha", a, "a")
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let other = "0".repeat(64);
        std::fs::write(&path, text.replace(&key_id(&a), &other)).unwrap();
        assert!(matches!(
            TrustStore::open(&path),
            Err(TrustError::StoreDamaged { .. })
        ));
    }
}
