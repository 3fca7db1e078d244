//! `checksums.txt` and `root_hash` of a portable bundle (SPEC section 10).
//!
//! One line per file of the inner archive other than `checksums.txt` itself:
//! `<lowercase hex SHA-256>  <name>\n` (the `sha256sum` format), sorted by name bytewise.
//! `root_hash` = `sha256:` + lowercase hex of the RFC 6962 tree hash whose leaves are the 32-byte
//! file digests in line order.

use crate::core::chain::Digest32;
use crate::core::merkle;
use sha2::{Digest, Sha256};

/// The name of the checksum file inside the portable bundle.
pub const CHECKSUMS_NAME: &str = "checksums.txt";

/// A file's name and SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    pub name: String,
    pub sha256: Digest32,
}

impl FileDigest {
    pub fn of(name: &str, bytes: &[u8]) -> Self {
        FileDigest {
            name: name.to_string(),
            sha256: Sha256::digest(bytes).into(),
        }
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The text of `checksums.txt` for `files` (sorted here by name bytewise).
pub fn checksums_txt(files: &[FileDigest]) -> String {
    let mut sorted: Vec<&FileDigest> = files.iter().collect();
    sorted.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    let mut out = String::new();
    for f in sorted {
        out.push_str(&hex::encode(f.sha256));
        out.push_str("  ");
        out.push_str(&f.name);
        out.push('\n');
    }
    out
}

/// `sha256:` + hex of the RFC 6962 root over the file digests, in the given (line) order.
pub fn root_hash(lines: &[FileDigest]) -> String {
    let leaves: Vec<Digest32> = lines.iter().map(|f| merkle::leaf_hash(&f.sha256)).collect();
    format!("sha256:{}", hex::encode(merkle::root(&leaves)))
}

/// Why a `checksums.txt` is not well formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("checksums.txt line {line}: {message}")]
pub struct ChecksumsError {
    pub line: usize,
    pub message: String,
}

/// Parses `checksums.txt` strictly: exact format, lowercase hex, names sorted and unique.
pub fn parse_checksums(text: &str) -> Result<Vec<FileDigest>, ChecksumsError> {
    let mut out: Vec<FileDigest> = Vec::new();
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(ChecksumsError {
            line: text.lines().count(),
            message: "the last line does not end with a newline".into(),
        });
    }
    for (i, line) in text.split_terminator('\n').enumerate() {
        let err = |message: &str| ChecksumsError {
            line: i + 1,
            message: message.to_string(),
        };
        let (digest, name) = line
            .split_once("  ")
            .ok_or_else(|| err("expected `<sha256 hex>  <name>` (two spaces)"))?;
        if digest.len() != 64
            || !digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(err("the digest is not 64 lowercase hex digits"));
        }
        if name.is_empty() || name.contains(['/', '\\']) || name.chars().any(|c| c.is_control()) {
            return Err(err("the name is not a flat file name"));
        }
        if let Some(prev) = out.last() {
            if prev.name.as_bytes() >= name.as_bytes() {
                return Err(err("names are not sorted bytewise and unique"));
            }
        }
        let mut sha256 = [0u8; 32];
        hex::decode_to_slice(digest, &mut sha256).map_err(|_| err("bad hex"))?;
        out.push(FileDigest {
            name: name.to_string(),
            sha256,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vectors() -> serde_json::Value {
        let text = std::fs::read_to_string("../shared/vectors/notify/expected.json")
            .expect("vectors/notify/expected.json (../shared symlink)");
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn checksums_and_root_match_the_vector() {
        let v = vectors();
        let files: Vec<FileDigest> = v["checksums"]["files"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(n, c)| FileDigest::of(n, c.as_str().unwrap().as_bytes()))
            .collect();
        let text = checksums_txt(&files);
        assert_eq!(text, v["checksums"]["checksumsTxt"].as_str().unwrap());
        let lines = parse_checksums(&text).unwrap();
        assert_eq!(
            root_hash(&lines),
            v["checksums"]["rootHash"].as_str().unwrap()
        );
    }

    #[test]
    fn malformed_checksums_are_refused_with_the_line() {
        let ok = format!("{}  a\n{}  b\n", "0".repeat(64), "1".repeat(64));
        assert_eq!(parse_checksums(&ok).unwrap().len(), 2);
        for (bad, line) in [
            (format!("{}  b\n{}  a\n", "0".repeat(64), "1".repeat(64)), 2),
            (format!("{} a\n", "0".repeat(64)), 1),
            (format!("{}  a\n", "A".repeat(64)), 1),
            (format!("{}  ../a\n", "0".repeat(64)), 1),
            (format!("{}  a", "0".repeat(64)), 1),
        ] {
            assert_eq!(parse_checksums(&bad).unwrap_err().line, line, "{bad:?}");
        }
    }
}
