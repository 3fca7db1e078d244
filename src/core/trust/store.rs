//! The trust store (trusted public keys with a name each), the one-run trust set used by verify and
//! import, local key listing and the configured default signing key. All files live in the data
//! directory (`crate::core::paths::data_dir()`), are plain JSON and are replaced atomically.

use super::keys::{
    create_private_dir, key_id, load_signing_key, load_verifying_key, looks_like_key_id,
    public_key_pem, read_key_file, verifying_key_from_pem, KeyFile,
};
use super::TrustError;
use crate::core::file_input::MAX_CONFIG_BYTES;
use crate::core::paths::data_dir;
use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Environment variable naming the default signing key file (wins over `keys default`).
pub const SIGNING_KEY_ENV: &str = "AIRLOCK_SIGNING_KEY";

const STORE_VERSION: u32 = 1;

/// The trust store file: `DATA_DIR/trust.json`.
pub fn trust_store_path() -> PathBuf {
    data_dir().join("trust.json")
}

/// The default signing key configuration: `DATA_DIR/signing.json`.
pub fn signing_config_path() -> PathBuf {
    data_dir().join("signing.json")
}

/// Where `keys generate` writes by default and `keys list` looks: `DATA_DIR/keys`.
pub fn default_keys_dir() -> PathBuf {
    data_dir().join("keys")
}

/// Checks a key or trust-store name: 1 to 64 characters of `[A-Za-z0-9._-]`, starting with a letter
/// or digit, and not shaped like a key id (so `trust remove NAME|KEYID` is never ambiguous).
pub fn validate_name(name: &str) -> Result<(), TrustError> {
    let bad = |reason: &str| {
        Err(TrustError::InvalidName {
            name: name.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() || name.len() > 64 {
        return bad("a name has 1 to 64 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("use only letters, digits, '.', '_' and '-'");
    }
    if !name.as_bytes()[0].is_ascii_alphanumeric() {
        return bad("a name starts with a letter or digit");
    }
    if looks_like_key_id(name) {
        return bad("a name must not look like a key id (64 hex digits)");
    }
    Ok(())
}

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

    /// The trust store in the data directory (empty when there is none yet).
    pub fn load_default() -> Result<Self, TrustError> {
        Ok(TrustStore::open_default()?.trust_set())
    }

    /// Trusts the public key in `path` for this run (`--trusted-key`); returns its key id. A key
    /// that is already trusted keeps its trust-store name.
    pub fn add_key_file(&mut self, path: &Path) -> Result<String, TrustError> {
        let key = load_verifying_key(path)?;
        Ok(self.add_key(
            &format!("--trusted-key {}", path.display()),
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

/// The persistent trust store (`DATA_DIR/trust.json`).
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
    keys: Vec<TrustedKey>,
    require_signature: bool,
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
        TrustSet {
            keys: self.keys.clone(),
        }
    }

    /// Adds the public key file `public_path` under `name`.
    pub fn add_file(&mut self, public_path: &Path, name: &str) -> Result<TrustedKey, TrustError> {
        validate_name(name)?;
        let key = load_verifying_key(public_path)?;
        let source = std::fs::canonicalize(public_path)
            .unwrap_or_else(|_| public_path.to_path_buf())
            .display()
            .to_string();
        self.add(name, key, &source)
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
        let _lock = lock_file(&self.path)?;
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

/// An exclusive lock held while the file is open: `PATH.lock` beside `path`.
fn lock_file(path: &Path) -> Result<std::fs::File, TrustError> {
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
        .map_err(err)?;
    f.lock().map_err(err)?;
    Ok(f)
}

/// A small JSON configuration file (regular, at most [`MAX_CONFIG_BYTES`]) as text.
fn read_config_text(path: &Path) -> std::io::Result<String> {
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

/// A key pair found in a keys directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalKey {
    pub name: String,
    pub key_id: Option<String>,
    pub private_path: Option<PathBuf>,
    pub public_path: Option<PathBuf>,
    /// Why the key could not be read, or why it is a concern.
    pub problem: Option<String>,
}

/// The key pairs in `dir` (`NAME.pem` / `NAME.pub.pem`), sorted by name. A missing directory is empty.
pub fn local_keys(dir: &Path) -> Result<Vec<LocalKey>, TrustError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(TrustError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out: Vec<LocalKey> = Vec::new();
    for entry in rd.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let (name, public) = if let Some(n) = file_name.strip_suffix(".pub.pem") {
            (n.to_string(), true)
        } else if let Some(n) = file_name.strip_suffix(".pem") {
            (n.to_string(), false)
        } else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let i = match out.iter().position(|k| k.name == name) {
            Some(i) => i,
            None => {
                out.push(LocalKey {
                    name,
                    key_id: None,
                    private_path: None,
                    public_path: None,
                    problem: None,
                });
                out.len() - 1
            }
        };
        if public {
            out[i].public_path = Some(entry.path());
        } else {
            out[i].private_path = Some(entry.path());
        }
    }
    for k in &mut out {
        let mut note = |m: String| {
            k.problem.get_or_insert(m);
        };
        let mut id_private = None;
        if let Some(p) = &k.private_path {
            match load_signing_key(p) {
                Ok((key, warnings)) => {
                    id_private = Some(key_id(&key.verifying_key()));
                    if let Some(w) = warnings.into_iter().next() {
                        note(w);
                    }
                }
                Err(e) => note(e.to_string()),
            }
        }
        let mut id_public = None;
        if let Some(p) = &k.public_path {
            match read_key_file(p) {
                Ok(KeyFile::Public(key)) => id_public = Some(key_id(&key)),
                Ok(KeyFile::Private(_)) => {
                    note(TrustError::PrivateWherePublic { path: p.clone() }.to_string())
                }
                Err(e) => note(e.to_string()),
            }
        }
        if let (Some(a), Some(b)) = (&id_private, &id_public) {
            if a != b {
                note(format!(
                    "{}.pem and {}.pub.pem are not one key pair",
                    k.name, k.name
                ));
            }
        }
        k.key_id = id_private.or(id_public);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for ok in ["ops", "site-a.2026", "A_1"] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".hidden",
            "-x",
            "a/b",
            "a b",
            "é",
            &"a".repeat(65),
            &"b".repeat(64),
        ] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

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
