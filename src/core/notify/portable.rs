//! Opening a portable export (`export-portable-bundle-v1.tgz`, SPEC section 10) safely: every
//! checksum and the root are checked, tampered archives are refused naming the file that differs,
//! unsafe entries and oversized expansions are refused, and only then is the bundle handed on.
//!
//! [`open_bundle_source`] is the one dispatch the bundle readers (list, verify, import) call: a plain
//! bundle file opens as itself; a portable export opens, after every check, as its `bundle.json`
//! (extracted to an anonymous temporary file).

use super::archive::{visit_tgz, ArchiveError, EntryInfo, Limits, VisitError};
use super::checksums::{parse_checksums, root_hash, ChecksumsError, FileDigest, CHECKSUMS_NAME};
use crate::core::text::visible_path as shown;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::Path;

/// The outer file's name.
pub const OUTER_NAME: &str = "export-portable-bundle-v1.tgz";
/// The inner archive's name.
pub const INNER_NAME: &str = "portable-bundle-v1.tgz";
/// The sync bundle inside the inner archive.
pub const BUNDLE_NAME: &str = "bundle.json";
/// The DSSE envelope of the bundle's signature (signed exports only).
pub const DSSE_NAME: &str = "bundle.dsse.json";
/// The signer's public key, SPKI PEM (signed exports only; informative, never trusted by itself).
pub const SIGNER_NAME: &str = "signer.pub.pem";

const SMALL_FILE_LIMIT: u64 = 1 << 20;

/// What a checked portable export holds.
#[derive(Debug)]
pub struct PortableContents {
    /// `sha256:` + hex of the RFC 6962 root over `checksums.txt`.
    pub root_hash: String,
    /// The lines of `checksums.txt`.
    pub lines: Vec<FileDigest>,
    /// Lowercase hex SHA-256 of the outer file.
    pub artifact_sha256: String,
    /// Bytes of the outer file.
    pub export_size_bytes: u64,
    /// Bytes of the inner `portable-bundle-v1.tgz`.
    pub portable_size_bytes: u64,
    /// `bundle.json`, extracted to an anonymous temporary file, positioned at its start.
    pub bundle: File,
    pub bundle_size: u64,
    /// `bundle.dsse.json` and `signer.pub.pem` when present.
    pub dsse: Option<Vec<u8>>,
    pub signer_pem: Option<Vec<u8>>,
}

/// One way the files differ from `checksums.txt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChecksumProblem {
    /// The file's SHA-256 is not the one listed.
    Differs {
        name: String,
        listed: String,
        actual: String,
    },
    /// Listed but not in the archive.
    Missing { name: String },
    /// In the archive but not listed.
    Unlisted { name: String },
}

impl std::fmt::Display for ChecksumProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChecksumProblem::Differs {
                name,
                listed,
                actual,
            } => write!(
                f,
                "{name} differs from checksums.txt (listed {listed}, actual {actual})"
            ),
            ChecksumProblem::Missing { name } => {
                write!(f, "{name} is listed in checksums.txt but missing")
            }
            ChecksumProblem::Unlisted { name } => {
                write!(f, "{name} is in the archive but not in checksums.txt")
            }
        }
    }
}

/// Why a portable export was refused.
#[derive(Debug, thiserror::Error)]
pub enum PortableError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("{path}: portable export refused, it was altered: {}", list(.problems))]
    Tampered {
        path: String,
        problems: Vec<ChecksumProblem>,
    },
    #[error("{path}: {what}")]
    Malformed { path: String, what: String },
    #[error("{path}: {source}")]
    Checksums {
        path: String,
        #[source]
        source: ChecksumsError,
    },
}

fn list(problems: &[ChecksumProblem]) -> String {
    problems
        .iter()
        .map(|p| crate::core::text::visible(&p.to_string()).into_owned())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether `path` starts with the gzip magic (a portable export rather than a JSON bundle).
pub fn is_portable_file(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    crate::core::file_input::open_regular(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == [0x1f, 0x8b]
}

/// Opens a bundle for reading: a plain bundle as itself, a portable export (after every check of
/// [`open_portable`]) as its extracted `bundle.json`.
pub fn open_bundle_source(path: &Path) -> Result<File, PortableError> {
    if is_portable_file(path) {
        return Ok(open_portable(path, Limits::default())?.bundle);
    }
    crate::core::file_input::open_regular(path).map_err(|source| PortableError::Io {
        path: shown(path),
        source,
    })
}

/// Hashes and counts what is read through it.
struct Hashing<R> {
    inner: R,
    hash: Sha256,
    bytes: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

/// The files read from the inner archive.
#[derive(Default)]
struct InnerFiles {
    digests: BTreeMap<String, [u8; 32]>,
    checksums: Option<String>,
    bundle: Option<(File, u64)>,
    dsse: Option<Vec<u8>>,
    signer: Option<Vec<u8>>,
}

/// Reads and checks a portable export: the outer archive holds exactly `portable-bundle-v1.tgz`;
/// that holds `bundle.json`, `checksums.txt` and optionally `bundle.dsse.json` and
/// `signer.pub.pem`, nothing else; every listed digest matches, every file is listed.
pub fn open_portable(path: &Path, limits: Limits) -> Result<PortableContents, PortableError> {
    let p = shown(path);
    let io_err = |source| PortableError::Io {
        path: p.clone(),
        source,
    };
    let file = crate::core::file_input::open_regular(path).map_err(io_err)?;
    let mut outer = Hashing {
        inner: io::BufReader::new(file),
        hash: Sha256::new(),
        bytes: 0,
    };
    let mut inner_files: Option<(InnerFiles, u64)> = None;
    let outer_label = format!("{p} ({OUTER_NAME})");
    visit_tgz(&mut outer, &outer_label, limits, |e, r| {
        if e.name != INNER_NAME {
            return Err(unexpected(&outer_label, e, &[INNER_NAME]));
        }
        let mut counted = Hashing {
            inner: r,
            hash: Sha256::new(),
            bytes: 0,
        };
        let label = format!("{p} ({INNER_NAME})");
        let files = read_inner(&mut counted, &label, limits)?;
        io::copy(&mut counted, &mut io::sink())?;
        inner_files = Some((files, counted.bytes));
        Ok(())
    })
    .map_err(|e| visit_error(&p, e))?;
    io::copy(&mut outer, &mut io::sink()).map_err(io_err)?;
    let malformed = |what: String| PortableError::Malformed {
        path: p.clone(),
        what,
    };
    let (files, portable_size_bytes) = inner_files
        .ok_or_else(|| malformed(format!("no {INNER_NAME} inside; not a portable export")))?;
    let checksums_text = files
        .checksums
        .ok_or_else(|| malformed(format!("{INNER_NAME} has no {CHECKSUMS_NAME}")))?;
    let lines = parse_checksums(&checksums_text).map_err(|source| PortableError::Checksums {
        path: p.clone(),
        source,
    })?;
    let problems = compare(&lines, &files.digests);
    if !problems.is_empty() {
        return Err(PortableError::Tampered { path: p, problems });
    }
    let (mut bundle, bundle_size) = files
        .bundle
        .ok_or_else(|| malformed(format!("{INNER_NAME} has no {BUNDLE_NAME}")))?;
    bundle.rewind().map_err(io_err)?;
    Ok(PortableContents {
        root_hash: root_hash(&lines),
        lines,
        artifact_sha256: hex::encode(outer.hash.finalize()),
        export_size_bytes: outer.bytes,
        portable_size_bytes,
        bundle,
        bundle_size,
        dsse: files.dsse,
        signer_pem: files.signer,
    })
}

fn visit_error(path: &str, e: VisitError) -> PortableError {
    match e {
        VisitError::Archive(a) => PortableError::Archive(a),
        VisitError::Io(source) => PortableError::Io {
            path: path.to_string(),
            source,
        },
        VisitError::Refused(what) => PortableError::Malformed {
            path: path.to_string(),
            what,
        },
    }
}

fn unexpected(archive: &str, e: &EntryInfo<'_>, allowed: &[&str]) -> VisitError {
    VisitError::Refused(format!(
        "{archive}: unexpected file {} (entry {}); a portable export holds only {}",
        crate::core::text::visible(e.name),
        e.index,
        allowed.join(", ")
    ))
}

fn read_inner<R: Read>(input: R, label: &str, limits: Limits) -> Result<InnerFiles, VisitError> {
    let mut files = InnerFiles::default();
    visit_tgz(input, label, limits, |e, r| {
        let mut h = Hashing {
            inner: r,
            hash: Sha256::new(),
            bytes: 0,
        };
        match e.name {
            BUNDLE_NAME => {
                let mut tmp = tempfile::tempfile()?;
                io::copy(&mut h, &mut tmp)?;
                tmp.flush()?;
                files.bundle = Some((tmp, h.bytes));
            }
            CHECKSUMS_NAME | DSSE_NAME | SIGNER_NAME => {
                let mut bytes = Vec::new();
                (&mut h)
                    .take(SMALL_FILE_LIMIT + 1)
                    .read_to_end(&mut bytes)?;
                if bytes.len() as u64 > SMALL_FILE_LIMIT {
                    return Err(VisitError::Refused(format!(
                        "{label}: {} is larger than {SMALL_FILE_LIMIT} bytes",
                        e.name
                    )));
                }
                match e.name {
                    CHECKSUMS_NAME => {
                        let text = String::from_utf8(bytes).map_err(|err| {
                            VisitError::Refused(format!(
                                "{label}: {CHECKSUMS_NAME} is not UTF-8 (byte {})",
                                err.utf8_error().valid_up_to()
                            ))
                        })?;
                        files.checksums = Some(text);
                    }
                    DSSE_NAME => files.dsse = Some(bytes),
                    _ => files.signer = Some(bytes),
                }
            }
            _ => {
                return Err(unexpected(
                    label,
                    e,
                    &[BUNDLE_NAME, CHECKSUMS_NAME, DSSE_NAME, SIGNER_NAME],
                ))
            }
        }
        if e.name != CHECKSUMS_NAME {
            files
                .digests
                .insert(e.name.to_string(), h.hash.finalize().into());
        }
        Ok(())
    })?;
    Ok(files)
}

fn compare(lines: &[FileDigest], actual: &BTreeMap<String, [u8; 32]>) -> Vec<ChecksumProblem> {
    let mut problems = Vec::new();
    let mut listed = std::collections::BTreeSet::new();
    for l in lines {
        listed.insert(l.name.as_str());
        match actual.get(&l.name) {
            None => problems.push(ChecksumProblem::Missing {
                name: l.name.clone(),
            }),
            Some(d) if *d != l.sha256 => problems.push(ChecksumProblem::Differs {
                name: l.name.clone(),
                listed: hex::encode(l.sha256),
                actual: hex::encode(d),
            }),
            Some(_) => {}
        }
    }
    for name in actual.keys() {
        if !listed.contains(name.as_str()) {
            problems.push(ChecksumProblem::Unlisted { name: name.clone() });
        }
    }
    problems
}
