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
    /// The file name without `.pem` / `.pub.pem`: a name that is not UTF-8 keeps its bytes as
    /// `\xNN` (two such names never become one).
    pub name: String,
    pub key_id: Option<String>,
    /// Serialised as [`crate::core::text::visible_path`] shows it (never U+FFFD, never an error).
    #[serde(serialize_with = "crate::core::text::serialize_opt_path")]
    pub private_path: Option<PathBuf>,
    #[serde(serialize_with = "crate::core::text::serialize_opt_path")]
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
    // By name: a directory of many files is read in n log n, and the pairs come out sorted.
    let mut by_name: std::collections::BTreeMap<String, LocalKey> = Default::default();
    for entry in rd.flatten() {
        let file_name = entry.file_name();
        let file_name = file_name.as_encoded_bytes();
        let (name, public) = if let Some(n) = file_name.strip_suffix(b".pub.pem") {
            (n, true)
        } else if let Some(n) = file_name.strip_suffix(b".pem") {
            (n, false)
        } else {
            continue;
        };
        if name.starts_with(b".") {
            continue;
        }
        let name = crate::core::text::visible_bytes(name);
        let k = by_name.entry(name).or_insert_with_key(|name| LocalKey {
            name: name.clone(),
            key_id: None,
            private_path: None,
            public_path: None,
            problem: None,
        });
        if public {
            k.public_path = Some(entry.path());
        } else {
            k.private_path = Some(entry.path());
        }
    }
    let mut out: Vec<LocalKey> = by_name.into_values().collect();
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
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::trust::keys::generate_key;

    #[test]
    fn pairs_are_matched_by_name_and_listed_sorted() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["zeta", "alpha", "mid"] {
            generate_key(name, dir.path()).unwrap();
        }
        // A pair whose halves are two keys, a lone public half, and files that are not keys.
        let other = tempfile::tempdir().unwrap();
        generate_key("other", other.path()).unwrap();
        std::fs::copy(
            other.path().join("other.pub.pem"),
            dir.path().join("mid.pub.pem"),
        )
        .unwrap();
        std::fs::copy(
            other.path().join("other.pub.pem"),
            dir.path().join("lone.pub.pem"),
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        std::fs::write(dir.path().join(".hidden.pem"), "x").unwrap();
        let keys = local_keys(dir.path()).unwrap();
        let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["alpha", "lone", "mid", "zeta"]);
        for k in &keys {
            assert!(k.key_id.is_some(), "{k:?}");
        }
        let by = |n: &str| keys.iter().find(|k| k.name == n).unwrap();
        assert!(by("alpha").problem.is_none() && by("alpha").private_path.is_some());
        assert!(by("lone").private_path.is_none() && by("lone").public_path.is_some());
        let mid = by("mid").problem.as_deref().unwrap();
        assert!(mid.contains("not one key pair"), "{mid}");
    }
}
