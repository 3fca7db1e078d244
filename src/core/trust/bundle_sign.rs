//! Signing (or re-signing) an existing bundle file without touching its logs: the `jobLogs` bytes
//! are copied verbatim, only the header's `signature` and `signedBy` change.

use super::dsse::{bundle_statement, sign_header};
use super::TrustError;
use crate::core::bundle::reader::NoVisitor;
use crate::core::bundle::{read_bundle_file, BundleFileError, BundleHeader};
use crate::core::file_output::AtomicFile;
use crate::core::verify::{verify_file, Finding, FindingKind, VerifyOptions};
use ed25519_dalek::SigningKey;
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// What [`sign_bundle_file`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleSignOutcome {
    /// The new header, with `signature` and `signedBy`.
    pub header: BundleHeader,
    /// The signed statement (JCS of the five header fields).
    pub statement: String,
    pub signature: String,
    pub key_id: String,
    /// The `signedBy` of the signature that was replaced, when the bundle was already signed.
    pub replaced: Option<String>,
    pub entries: usize,
    /// Size of the written bundle.
    pub bytes: u64,
}

/// Signs the bundle `input` with `key` and writes the result to `output` atomically (`output` may
/// be `input`: then the file is replaced in place). The bundle must parse without schema problems
/// and its manifestDigest must match its logs: a signature vouches for the logs, so a bundle whose
/// logs no longer match its digest is refused rather than blessed.
pub fn sign_bundle_file(
    input: &Path,
    output: &Path,
    key: &SigningKey,
) -> Result<BundleSignOutcome, TrustError> {
    let unsignable = |detail: String| TrustError::Unsignable {
        path: input.to_path_buf(),
        detail,
    };
    let read_err = |source| TrustError::Read {
        path: input.to_path_buf(),
        source,
    };
    let before = std::fs::metadata(input).map_err(read_err)?;
    let summary = read_bundle_file(input, &mut NoVisitor).map_err(|e| match e {
        BundleFileError::Io(m) => TrustError::Read {
            path: input.to_path_buf(),
            source: std::io::Error::other(m),
        },
        BundleFileError::Syntax(e) => unsignable(format!(
            "it is not a readable bundle: {e}; check that it is the bundle file and that it was copied completely"
        )),
    })?;
    if let Some(p) = summary.problems.first() {
        return Err(unsignable(format!(
            "it has {} schema problem(s), the first at {}: {}; run `airlock jobs verify` on it to see them all",
            summary.problems.len(),
            p.path,
            p.message
        )));
    }
    if let Some(f) = verify_schema_problem(input)? {
        return Err(unsignable(format!(
            "`airlock jobs verify` calls it schema-invalid ({}); a signature would vouch for it. Fix or re-export the bundle",
            f.message
        )));
    }
    if summary.computed_manifest_digest != summary.header.manifest_digest {
        return Err(unsignable(format!(
            "its manifestDigest {} does not match its jobLogs ({}): the logs were changed after export, and a signature would vouch for them; run `airlock jobs verify` on it",
            summary.header.manifest_digest, summary.computed_manifest_digest
        )));
    }
    let logs = locate_job_logs(input).map_err(|e| match e {
        Located::Io(source) => read_err(source),
        Located::Missing => unsignable("no jobLogs array found".into()),
    })?;

    let replaced = summary.header.signed_by.clone();
    let mut header = summary.header.clone();
    header.signature = None;
    header.signed_by = None;
    let (signature, key_id) = sign_header(key, &header);
    header.signature = Some(signature.clone());
    header.signed_by = Some(key_id.clone());

    let write_err = |source| TrustError::Write {
        path: output.to_path_buf(),
        source,
    };
    // A dangling link is refused here; AtomicFile follows a sound one and keeps the
    // permissions of the file it replaces.
    resolve_link(output)?;
    let mut out = AtomicFile::create(output)?;
    let mut src = crate::core::file_input::open_regular(input).map_err(read_err)?;
    src.seek(SeekFrom::Start(logs.start)).map_err(read_err)?;
    let w = out.writer();
    let mut bytes = write_head(w, &header).map_err(write_err)?;
    let want = logs.end - logs.start;
    let copied = std::io::copy(&mut (&mut src).take(want), w).map_err(write_err)?;
    if copied != want {
        return Err(TrustError::ChangedDuringSign {
            path: input.to_path_buf(),
        });
    }
    bytes += copied;
    bytes += write_tail(w, &signature, &key_id).map_err(write_err)?;
    let after = std::fs::metadata(input).map_err(read_err)?;
    if after.len() != before.len() || after.modified().ok() != before.modified().ok() {
        return Err(TrustError::ChangedDuringSign {
            path: input.to_path_buf(),
        });
    }
    out.commit()?;
    Ok(BundleSignOutcome {
        statement: bundle_statement(&header),
        header,
        signature,
        key_id,
        replaced,
        entries: summary.entries,
        bytes,
    })
}

/// The first `schema-invalid` finding verification reports (the rules the reader alone does not
/// apply: the tenant id, canonical payloads, id formats), signature checks aside.
fn verify_schema_problem(input: &Path) -> Result<Option<Finding>, TrustError> {
    let opts = VerifyOptions {
        require_signature: false,
        trust: None,
        max_clock_skew: None,
        ..VerifyOptions::default()
    };
    let report = verify_file(input, &opts).map_err(|e| TrustError::Unsignable {
        path: input.to_path_buf(),
        detail: e.to_string(),
    })?;
    Ok(report
        .findings
        .into_iter()
        .find(|f| f.kind == FindingKind::SchemaInvalid))
}

/// Where to write `output`: a symbolic link is followed to the file it names (replacing the link
/// itself with a file would silently detach whatever else reads through it); a dangling link is
/// refused.
fn resolve_link(output: &Path) -> Result<PathBuf, TrustError> {
    crate::core::file_output::resolve_link(output).map_err(|source| TrustError::Write {
        path: output.to_path_buf(),
        source: std::io::Error::new(
            source.kind(),
            format!("it is a symbolic link whose target cannot be resolved ({source}); write with -o to a regular path"),
        ),
    })
}

fn field(out: &mut impl Write, key: &str, value: &str, comma: bool) -> std::io::Result<u64> {
    let text = format!(
        "  \"{key}\": {}{}\n",
        serde_json::to_string(value).map_err(std::io::Error::other)?,
        if comma { "," } else { "" }
    );
    out.write_all(text.as_bytes())?;
    Ok(text.len() as u64)
}

/// The header lines up to and including `"jobLogs": ` in the writer's layout.
fn write_head(out: &mut impl Write, h: &BundleHeader) -> std::io::Result<u64> {
    out.write_all(b"{\n")?;
    let mut n = 2;
    n += field(out, "bundleId", &h.bundle_id, true)?;
    n += field(out, "tenantId", &h.tenant_id, true)?;
    n += field(out, "createdAt", &h.created_at, true)?;
    n += field(out, "createdByNodeId", &h.created_by_node_id, true)?;
    n += field(out, "manifestDigest", &h.manifest_digest, true)?;
    let k = b"  \"jobLogs\": ";
    out.write_all(k)?;
    Ok(n + k.len() as u64)
}

fn write_tail(out: &mut impl Write, signature: &str, key_id: &str) -> std::io::Result<u64> {
    out.write_all(b",\n")?;
    let mut n = 2;
    n += field(out, "signature", signature, true)?;
    n += field(out, "signedBy", key_id, false)?;
    out.write_all(b"}\n")?;
    Ok(n + 2)
}

enum Located {
    Io(std::io::Error),
    Missing,
}

/// Byte range of the top-level `jobLogs` array in a bundle file that has already parsed cleanly.
/// One streaming pass; memory does not grow with the file.
fn locate_job_logs(path: &Path) -> Result<Range<u64>, Located> {
    const MAX_KEY: usize = 1024;
    let mut f = crate::core::file_input::open_regular(path).map_err(Located::Io)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut off = 0u64;
    let mut depth = 0u32;
    let mut in_string = false;
    let mut escape = false;
    let mut expect_key = false;
    let mut key: Option<Vec<u8>> = None;
    let mut last_key_is_logs = false;
    let mut want_value = false;
    let mut start: Option<u64> = None;
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => return Err(Located::Missing),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Located::Io(e)),
        };
        for (i, &b) in buf[..n].iter().enumerate() {
            let at = off + i as u64;
            if in_string {
                if let Some(k) = key.as_mut() {
                    if k.len() < MAX_KEY {
                        k.push(b);
                    }
                }
                if escape {
                    escape = false;
                } else if b == b'\\' {
                    escape = true;
                } else if b == b'"' {
                    in_string = false;
                    if let Some(k) = key.take() {
                        last_key_is_logs =
                            serde_json::from_slice::<String>(&k).ok().as_deref() == Some("jobLogs");
                    }
                }
                continue;
            }
            match b {
                b'"' => {
                    in_string = true;
                    if depth == 1 && expect_key {
                        key = Some(vec![b'"']);
                        expect_key = false;
                    }
                }
                b':' if depth == 1 => want_value = last_key_is_logs,
                b',' if depth == 1 => {
                    expect_key = true;
                    last_key_is_logs = false;
                    want_value = false;
                }
                b'{' | b'[' => {
                    if depth == 1 && want_value && b == b'[' {
                        start = Some(at);
                        want_value = false;
                    }
                    depth += 1;
                    if depth == 1 {
                        expect_key = true;
                    }
                }
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 1 {
                        if let Some(s) = start {
                            return Ok(s..at + 1);
                        }
                    }
                }
                _ => {}
            }
        }
        off += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_job_logs_whatever_the_layout() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.json");
        let text = r#"{"a":"jobLogs","x\"":{"jobLogs":[1]},"job\u004cogs" : [ {"s":"]"} ] ,"z":1}"#;
        std::fs::write(&p, text).unwrap();
        let Ok(r) = locate_job_logs(&p) else {
            panic!("not found")
        };
        assert_eq!(&text[r.start as usize..r.end as usize], r#"[ {"s":"]"} ]"#);
        std::fs::write(&p, r#"{"a":[]}"#).unwrap();
        assert!(matches!(locate_job_logs(&p), Err(Located::Missing)));
    }
}
