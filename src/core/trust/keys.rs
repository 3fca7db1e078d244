//! ed25519 key files (SPEC section 5): PKCS#8 PEM private keys, SPKI PEM public keys, key ids.
//! The files are the ones `openssl genpkey -algorithm ed25519` writes, and `openssl` reads ours.

use super::TrustError;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::pkcs8::spki::{EncodePublicKey, SubjectPublicKeyInfoRef};
use ed25519_dalek::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, KeypairBytes, PrivateKeyInfo,
};
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Key files larger than this are certainly not a single key.
const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

const OID_ED25519: &str = "1.3.101.112";

/// Which half of a key pair a PEM file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFileKind {
    Private,
    Public,
}

/// The key id of a public key: lowercase hex SHA-256 of its 32 raw bytes.
pub fn key_id(public: &VerifyingKey) -> String {
    hex::encode(Sha256::digest(public.as_bytes()))
}

/// A key id in groups of four for reading out over a second channel (phone, paper):
/// `1a2b 3c4d …`.
pub fn fingerprint(key_id: &str) -> String {
    key_id
        .as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A key file after decoding.
pub(crate) enum KeyFile {
    Private(Box<SigningKey>),
    Public(VerifyingKey),
}

/// Reads and decodes a PEM key file, classifying everything that is not an ed25519 key.
pub(crate) fn read_key_file(path: &Path) -> Result<KeyFile, TrustError> {
    let read_err = |source| TrustError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = Vec::new();
    crate::core::file_input::open_regular(path)
        .map_err(read_err)?
        .take(MAX_KEY_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(TrustError::NotPem {
            path: path.to_path_buf(),
            detail: "the file is larger than 64 KiB".into(),
        });
    }
    decode_key_pem(path, &bytes)
}

/// Decodes the bytes of a PEM key file (`path` is only used in messages).
pub(crate) fn decode_key_pem(path: &Path, bytes: &[u8]) -> Result<KeyFile, TrustError> {
    let p = || path.to_path_buf();
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Err(TrustError::NotPem {
            path: p(),
            detail: "the file is binary, not text (a DER key? convert it with `openssl pkey -inform DER -in FILE -out KEY.pem`)".into(),
        });
    };
    let (label, der) = pem_block(text).map_err(|e| match e {
        PemProblem::NoBlock => TrustError::NotPem {
            path: p(),
            detail: "no -----BEGIN line".into(),
        },
        PemProblem::Corrupt(detail) => TrustError::CorruptPem { path: p(), detail },
    })?;
    match label.as_str() {
        "PRIVATE KEY" => {
            let info =
                PrivateKeyInfo::try_from(der.as_slice()).map_err(|e| TrustError::CorruptPem {
                    path: p(),
                    detail: format!("the PKCS#8 structure does not decode ({e})"),
                })?;
            check_algorithm(path, &info.algorithm.oid.to_string())?;
            let key = SigningKey::from_pkcs8_der(&der).map_err(|e| TrustError::MalformedKey {
                path: p(),
                detail: e.to_string(),
            })?;
            Ok(KeyFile::Private(Box::new(key)))
        }
        "PUBLIC KEY" => {
            let info = SubjectPublicKeyInfoRef::try_from(der.as_slice()).map_err(|e| {
                TrustError::CorruptPem {
                    path: p(),
                    detail: format!("the public key structure does not decode ({e})"),
                }
            })?;
            check_algorithm(path, &info.algorithm.oid.to_string())?;
            let key =
                VerifyingKey::from_public_key_der(&der).map_err(|e| TrustError::MalformedKey {
                    path: p(),
                    detail: format!("{e} (not a point on the ed25519 curve?)"),
                })?;
            if key.is_weak() {
                // No signature verifies under it with `verify_strict`: not a real signer's key.
                return Err(TrustError::MalformedKey {
                    path: p(),
                    detail: "it is a small-order (weak) point, under which no signature can verify; ask the signer for the public key of their real key (`airlock keys public KEY.pem`)".into(),
                });
            }
            Ok(KeyFile::Public(key))
        }
        "ENCRYPTED PRIVATE KEY" => Err(TrustError::EncryptedKey { path: p() }),
        "RSA PRIVATE KEY" | "RSA PUBLIC KEY" => Err(TrustError::WrongAlgorithm {
            path: p(),
            algorithm: "an RSA".into(),
        }),
        "EC PRIVATE KEY" | "EC PARAMETERS" => Err(TrustError::WrongAlgorithm {
            path: p(),
            algorithm: "an EC (ECDSA)".into(),
        }),
        "DSA PRIVATE KEY" => Err(TrustError::WrongAlgorithm {
            path: p(),
            algorithm: "a DSA".into(),
        }),
        _ => Err(TrustError::UnsupportedPem {
            path: p(),
            label: label.clone(),
        }),
    }
}

fn check_algorithm(path: &Path, oid: &str) -> Result<(), TrustError> {
    let algorithm = match oid {
        OID_ED25519 => return Ok(()),
        "1.2.840.113549.1.1.1" => "an RSA".to_string(),
        "1.2.840.113549.1.1.10" => "an RSA-PSS".to_string(),
        "1.2.840.10045.2.1" => "an EC (ECDSA)".to_string(),
        "1.2.840.10040.4.1" => "a DSA".to_string(),
        "1.3.101.113" => "an Ed448".to_string(),
        "1.3.101.110" => "an X25519 (key agreement, not signing)".to_string(),
        "1.3.101.111" => "an X448 (key agreement, not signing)".to_string(),
        other => format!("an unsupported (algorithm OID {other})"),
    };
    Err(TrustError::WrongAlgorithm {
        path: path.to_path_buf(),
        algorithm,
    })
}

enum PemProblem {
    NoBlock,
    Corrupt(String),
}

/// The first PEM block of `text`: its label and decoded bytes. Text before the block (RFC 7468
/// explanatory text) and CRLF line ends are accepted; the base64 body may be wrapped at any width.
fn pem_block(text: &str) -> Result<(String, Vec<u8>), PemProblem> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(begin) = text.find("-----BEGIN ") else {
        return Err(PemProblem::NoBlock);
    };
    let after = &text[begin + "-----BEGIN ".len()..];
    let Some(label_end) = after.find("-----") else {
        return Err(PemProblem::Corrupt(
            "the -----BEGIN line is not closed".into(),
        ));
    };
    let label = &after[..label_end];
    if label.contains('\n') || label.len() > 64 {
        return Err(PemProblem::Corrupt(
            "the -----BEGIN line is not closed".into(),
        ));
    }
    let body_start = label_end + "-----".len();
    let end_marker = format!("-----END {label}-----");
    let Some(end) = after[body_start..].find(&end_marker) else {
        return Err(PemProblem::Corrupt(format!(
            "no \"{end_marker}\" line (is the file truncated?)"
        )));
    };
    let body = &after[body_start..body_start + end];
    let mut b64 = String::with_capacity(body.len());
    for line in body.lines() {
        let line = line.trim();
        if line.contains(':') {
            // RFC 1421 headers (Proc-Type: 4,ENCRYPTED ...): legacy encrypted PEM.
            if label.ends_with("PRIVATE KEY") && line.starts_with("Proc-Type") {
                return Err(PemProblem::Corrupt(
                    "legacy encrypted PEM (Proc-Type header); decrypt it with `openssl pkey`"
                        .into(),
                ));
            }
            return Err(PemProblem::Corrupt(
                "unexpected header line inside the PEM block".into(),
            ));
        }
        b64.push_str(line);
    }
    if b64.is_empty() {
        return Err(PemProblem::Corrupt("the PEM block is empty".into()));
    }
    let der = B64
        .decode(b64.as_bytes())
        .map_err(|e| PemProblem::Corrupt(format!("the base64 body does not decode ({e})")))?;
    Ok((label.to_string(), der))
}

/// Loads an ed25519 private key (PKCS#8 PEM). Returns warnings for the operator, e.g. a key file
/// that other users can read.
pub fn load_signing_key(path: &Path) -> Result<(SigningKey, Vec<String>), TrustError> {
    let key = match read_key_file(path)? {
        KeyFile::Private(k) => *k,
        KeyFile::Public(_) => {
            return Err(TrustError::PublicWherePrivate {
                path: path.to_path_buf(),
            })
        }
    };
    let mut warnings = Vec::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                warnings.push(format!(
                    "private key {} is readable by other users (mode {mode:04o}); restrict it with `chmod 600 {}`",
                    crate::core::text::visible_path(path),
                    crate::core::text::shell_word(path)
                ));
            }
        }
    }
    Ok((key, warnings))
}

/// Loads an ed25519 public key (SPKI PEM, `-----BEGIN PUBLIC KEY-----`).
pub fn load_verifying_key(path: &Path) -> Result<VerifyingKey, TrustError> {
    match read_key_file(path)? {
        KeyFile::Public(k) => Ok(k),
        KeyFile::Private(_) => Err(TrustError::PrivateWherePublic {
            path: path.to_path_buf(),
        }),
    }
}

/// Decodes an SPKI PEM public key held in memory (e.g. in the trust store).
pub fn verifying_key_from_pem(pem: &str) -> Result<VerifyingKey, String> {
    VerifyingKey::from_public_key_pem(pem).map_err(|e| e.to_string())
}

/// The PKCS#8 PEM text of a private key, in the form `openssl genpkey -algorithm ed25519` writes
/// (version 1, no embedded public key).
pub fn private_key_pem(key: &SigningKey) -> String {
    let bytes = KeypairBytes {
        secret_key: key.to_bytes(),
        public_key: None,
    };
    bytes
        .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .map(|z| z.as_str().to_owned())
        .expect("an ed25519 PKCS#8 document always encodes")
}

/// The SPKI PEM text of a public key.
pub fn public_key_pem(key: &VerifyingKey) -> String {
    key.to_public_key_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .expect("an ed25519 public key always encodes")
}

/// A key pair written by [`generate_key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedKey {
    pub name: String,
    pub key_id: String,
    pub private_path: PathBuf,
    pub public_path: PathBuf,
}

/// The file names of a named key pair in `dir`: `NAME.pem` and `NAME.pub.pem`.
pub fn key_pair_paths(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.pub.pem")),
    )
}

/// Generates a new ed25519 key pair and writes `DIR/NAME.pem` (PKCS#8, mode 0600) and
/// `DIR/NAME.pub.pem` (SPKI). Existing files are never overwritten.
pub fn generate_key(name: &str, dir: &Path) -> Result<GeneratedKey, TrustError> {
    super::names::validate_name(name)?;
    let (private_path, public_path) = key_pair_paths(dir, name);
    for p in [&private_path, &public_path] {
        if p.exists() {
            return Err(TrustError::Exists { path: p.clone() });
        }
    }
    create_private_dir(dir)?;
    let key = SigningKey::generate(&mut rand_core::OsRng);
    let public = key.verifying_key();
    write_new(&private_path, private_key_pem(&key).as_bytes(), 0o600)?;
    if let Err(e) = write_new(&public_path, public_key_pem(&public).as_bytes(), 0o644) {
        let _ = std::fs::remove_file(&private_path);
        return Err(e);
    }
    Ok(GeneratedKey {
        name: name.to_string(),
        key_id: key_id(&public),
        private_path,
        public_path,
    })
}

/// Creates `dir` (and parents) with mode 0700 for the last component when it is new.
/// A path that is a file, not a folder (`--out FILE`, or a file where a parent folder should be),
/// is refused as such: creating the folder would fail with a bare "File exists" or "Not a
/// directory".
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), TrustError> {
    if dir.is_dir() {
        return Ok(());
    }
    // The deepest part of the path that exists must be a folder.
    if let Some(file) = dir
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .find(|a| a.exists())
        .filter(|a| !a.is_dir())
    {
        return Err(TrustError::NotAFolder {
            path: file.to_path_buf(),
        });
    }
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir).map_err(|source| TrustError::Write {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes a new file atomically with `mode`, refusing to replace an existing one.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TrustError> {
    use std::io::Write;
    let mut f = crate::core::file_output::AtomicFile::create_with_mode(path, Some(mode))?;
    f.writer()
        .write_all(bytes)
        .map_err(|source| TrustError::Write {
            path: path.to_path_buf(),
            source,
        })?;
    // Taken without replacing: a key file made meanwhile (or a dangling symlink) stays.
    match f.commit_new() {
        Err(e) if e.source.kind() == std::io::ErrorKind::AlreadyExists => Err(TrustError::Exists {
            path: path.to_path_buf(),
        }),
        r => Ok(r?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_ids_match_the_vectors() {
        let ids: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string("../shared/vectors/keys/key-ids.json").unwrap(),
        )
        .unwrap();
        for name in ["test-signer", "untrusted-signer"] {
            let dir = Path::new("../shared/vectors/keys");
            let public = load_verifying_key(&dir.join(format!("{name}.pub.pem"))).unwrap();
            assert_eq!(key_id(&public), ids[name].as_str().unwrap(), "{name}");
            let bytes = std::fs::read(dir.join(format!("{name}.pem"))).unwrap();
            let KeyFile::Private(private) = decode_key_pem(Path::new("k"), &bytes).unwrap() else {
                panic!("{name}.pem is a private key");
            };
            assert_eq!(private.verifying_key(), public);
            // Our encoding is openssl's, byte for byte.
            assert_eq!(private_key_pem(&private).as_bytes(), bytes.as_slice());
            assert_eq!(
                public_key_pem(&public),
                std::fs::read_to_string(dir.join(format!("{name}.pub.pem"))).unwrap()
            );
        }
    }

    #[test]
    fn pem_problems_are_classified() {
        let p = Path::new("k.pem");
        assert!(matches!(
            decode_key_pem(p, b"hello"),
            Err(TrustError::NotPem { .. })
        ));
        assert!(matches!(
            decode_key_pem(p, b"-----BEGIN PRIVATE KEY-----\nMC4CAQAw\n"),
            Err(TrustError::CorruptPem { .. })
        ));
        assert!(matches!(
            decode_key_pem(
                p,
                b"-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n"
            ),
            Err(TrustError::CorruptPem { .. })
        ));
        assert!(matches!(
            decode_key_pem(
                p,
                b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"
            ),
            Err(TrustError::EncryptedKey { .. })
        ));
        assert!(matches!(
            decode_key_pem(p, &[0x30, 0x82, 0xff, 0x00]),
            Err(TrustError::NotPem { .. })
        ));
    }
}
