//! Signing and trust (SPEC section 5): ed25519 keys on disk (`keys`), key and trusted-key names
//! (`names`), the one-run trust set (`trust_set`), the trust store file (`trust_file`), the default
//! signing key setting (`signing_config`), local key listing (`key_dir`), DSSE
//! statements and signatures over bundle headers (and any other statement, such as batch snapshots).
//!
//! Everything here is engine code: the CLI (`airlock keys ...`, `jobs sign`, `jobs export --sign`)
//! and the console only call these functions.

pub mod bundle_sign;
pub mod dsse;
pub mod envelope;
pub mod key_dir;
pub mod keys;
pub mod names;
pub mod policy;
pub mod signing_config;
pub mod snapshot_signing;
pub mod trust_file;
pub mod trust_set;

use crate::core::text::{shell_word as word, visible_path as shown};
use std::path::PathBuf;

pub use bundle_sign::{sign_bundle_file, BundleSignOutcome};
pub use dsse::{
    bundle_statement, check_bundle_signature, check_statement_signature, dsse_envelope, pae,
    sign_header, sign_statement, DsseEnvelope, DsseSignature, SignatureCheck,
    BATCH_SNAPSHOT_PAYLOAD_TYPE, EMPTY_SIGNATURES,
};
pub use envelope::{bundle_dsse_envelope, check_dsse_target, BundleHeaderSigner, DsseOut};
pub use key_dir::{default_keys_dir, local_keys, LocalKey};
pub use keys::{
    fingerprint, generate_key, key_id, load_signing_key, load_verifying_key, private_key_pem,
    public_key_pem, GeneratedKey, KeyFileKind,
};
pub use names::{looks_like_key_id, validate_name};
pub use signing_config::{
    check_default_key_path, clear_default_signing_key, default_signing_key, report_signer,
    set_default_signing_key, signing_config_path, DefaultKeySource, DefaultSigningKey,
    ReportSigner, SIGNING_KEY_ENV,
};
pub use snapshot_signing::{sign_snapshot_statement, snapshot_signer};
pub use trust_file::{trust_store_path, TrustStore};
pub use trust_set::{TrustSet, TrustedKey};

pub use ed25519_dalek::{SigningKey, VerifyingKey};

/// Why a key, the trust store or a signing operation failed. Every message names the file and says
/// what to do. Paths are shown as [`shown`] shows them (a name that is not UTF-8 keeps its bytes as
/// `\xNN`, never U+FFFD), and a path inside a suggested command as one shell word ([`word`]), so
/// the command can be pasted as it is.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read {}: {source}", shown(.path))]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a PEM key file ({detail}); expected a file starting with -----BEGIN PRIVATE KEY----- or -----BEGIN PUBLIC KEY-----", shown(.path))]
    NotPem { path: PathBuf, detail: String },
    #[error("{} is a corrupt PEM file: {detail}; re-export or re-generate the key", shown(.path))]
    CorruptPem { path: PathBuf, detail: String },
    #[error("{} holds an encrypted private key; airlock reads unencrypted PKCS#8 keys only (store the key on protected media instead): decrypt it with `openssl pkey -in {} -out KEY.pem`", shown(.path), word(.path))]
    EncryptedKey { path: PathBuf },
    #[error("{} holds {algorithm} key; airlock signs with ed25519 only: generate a key with `airlock keys generate --name NAME` or `openssl genpkey -algorithm ed25519`", shown(.path))]
    WrongAlgorithm { path: PathBuf, algorithm: String },
    #[error("{} holds a private key where a public key is expected; never hand out the private key: derive the public key with `airlock keys public {w}` (or `openssl pkey -in {w} -pubout`)", shown(.path), w = word(.path))]
    PrivateWherePublic { path: PathBuf },
    #[error("{} holds a public key where a private (signing) key is expected; give the private key file (PKCS#8 PEM, -----BEGIN PRIVATE KEY-----)", shown(.path))]
    PublicWherePrivate { path: PathBuf },
    #[error("{} holds an unsupported PEM block \"{label}\"; expected PRIVATE KEY (PKCS#8) or PUBLIC KEY (SPKI)", shown(.path))]
    UnsupportedPem { path: PathBuf, label: String },
    #[error("{} is not a valid ed25519 key: {detail}", shown(.path))]
    MalformedKey { path: PathBuf, detail: String },
    #[error("{} already exists; choose another --name or --out directory, or move the old file away", shown(.path))]
    Exists { path: PathBuf },
    #[error("{} is a file, not a folder; give a folder to write into (one that is missing is created), or move the file away", shown(.path))]
    NotAFolder { path: PathBuf },
    #[error("the default signing key setting ({}) stores the key's path as UTF-8 text, and {} is not UTF-8; nothing was written. Use a key file whose path is UTF-8 (rename the file or its folder, or choose another folder), or name the key with ${env} instead", shown(.config), shown(.path))]
    PathNotText {
        path: PathBuf,
        config: PathBuf,
        env: &'static str,
    },
    #[error("invalid name {name:?}: {reason}")]
    InvalidName { name: String, reason: String },
    #[error("the trust store already has key {key_id} under the name {name:?}; remove it first (`airlock keys trust remove {name}`) to rename it")]
    DuplicateKey { key_id: String, name: String },
    #[error(
        "the trust store already has a key named {name:?} (key id {key_id}); choose another --name"
    )]
    DuplicateName { name: String, key_id: String },
    #[error("no trusted key has the name or key id {0:?}; see `airlock keys trust list`")]
    NotTrusted(String),
    #[error("{} is damaged: {detail}; fix or remove the file (it is plain JSON)", shown(.path))]
    StoreDamaged { path: PathBuf, detail: String },
    #[error(
        "{setting}={value:?} is not a switch; use 1/true/yes/on to require signatures or unset it"
    )]
    BadPolicy { setting: String, value: String },
    #[error("cannot write {}: {source}", shown(.path))]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot sign {}: {detail}", shown(.path))]
    Unsignable { path: PathBuf, detail: String },
    #[error(
        "{} changed while it was being signed; nothing was written, run the command again",
        shown(.path)
    )]
    ChangedDuringSign { path: PathBuf },
    #[error("the bundle was not signed; no DSSE envelope to write")]
    Unsigned,
    #[error("--dsse-out {} is the bundle file itself; write the envelope beside it, e.g. BUNDLE.dsse.json", shown(.path))]
    DsseIsBundle { path: PathBuf },
    #[error("no signing key: give --key KEY.pem, set {env}, or configure one with `airlock keys default KEY.pem`")]
    NoSigningKey { env: &'static str },
    #[error("the trust store {} is being changed by another airlock process (it holds {}) and was still locked after {secs} s; nothing was changed. Wait for that process to finish or stop it, then retry", shown(.path), shown(.lock))]
    StoreLocked {
        path: PathBuf,
        lock: PathBuf,
        secs: u64,
    },
    #[error("the default signing key {} now holds key {actual}, not the key {expected} set with `airlock keys default`, so airlock will not sign with it. If the key was replaced on purpose, set it again with `airlock keys default {}` (and have the receiving side trust its public key); otherwise restore the original key file", shown(.path), word(.path))]
    DefaultKeyChanged {
        path: PathBuf,
        expected: String,
        actual: String,
    },
}

impl From<crate::core::file_output::WriteFileError> for TrustError {
    fn from(e: crate::core::file_output::WriteFileError) -> Self {
        TrustError::Write {
            path: e.path,
            source: e.source,
        }
    }
}
