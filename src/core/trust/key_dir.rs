//! Local key listing: the key pairs in a keys directory (`DATA_DIR/keys` by default), what
//! `keys list` and the console's Keys screen show.

use super::keys::{key_id, load_signing_key, read_key_file, KeyFile};
use super::TrustError;
use crate::core::paths::data_dir;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where `keys generate` writes by default and `keys list` looks: `DATA_DIR/keys`.
pub fn default_keys_dir() -> PathBuf {
    data_dir().join("keys")
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
