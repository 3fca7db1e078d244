//! Writing a report (a DSSE envelope around the canonical JSON, and its Markdown beside it) and
//! verifying one: the envelope's payload type, the report's format, the signature against the
//! trust store, and for a Markdown file that it is exactly what the signed payload renders.

use super::TRIAGE_PAYLOAD_TYPE;
use super::{to_markdown, TriageError, TriageReport, MAX_REPORT_BYTES, TRIAGE_FORMAT};
use crate::core::trust::{DsseEnvelope, SignatureCheck, SigningKey, TrustSet};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use std::path::{Path, PathBuf};

/// The two files written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub json: PathBuf,
    pub markdown: PathBuf,
    /// The key id that signed, when one did.
    pub signed_by: Option<String>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TriageError + '_ {
    move |source| TriageError::Io {
        path: crate::core::text::visible_path(path),
        source,
    }
}

/// Writes `STEM.json` (the envelope) and `STEM.md` in `dir`, signed with `key` when given.
pub fn write_report(
    report: &TriageReport,
    dir: &Path,
    stem: &str,
    key: Option<&SigningKey>,
) -> Result<Written, TriageError> {
    let value = serde_json::to_value(report).map_err(|e| TriageError::Malformed {
        path: stem.to_string(),
        detail: e.to_string(),
    })?;
    let statement =
        crate::core::canonical::canonical_text(&value).map_err(|e| TriageError::Malformed {
            path: stem.to_string(),
            detail: e.to_string(),
        })?;
    let envelope = match key {
        Some(k) => DsseEnvelope::sign(k, TRIAGE_PAYLOAD_TYPE, &statement),
        None => DsseEnvelope {
            payload_type: TRIAGE_PAYLOAD_TYPE.to_string(),
            payload: B64.encode(statement.as_bytes()),
            signatures: Vec::new(),
        },
    };
    let json = dir.join(format!("{stem}.json"));
    let markdown = dir.join(format!("{stem}.md"));
    let mut text = serde_json::to_string_pretty(&envelope).map_err(|e| TriageError::Malformed {
        path: crate::core::text::visible_path(&json),
        detail: e.to_string(),
    })?;
    text.push('\n');
    // Names chosen here, in the folder given: a link planted there is replaced, not followed.
    crate::core::file_output::write_atomic_no_follow(&json, text.as_bytes())
        .map_err(|e| io(&json)(std::io::Error::other(e.to_string())))?;
    crate::core::file_output::write_atomic_no_follow(
        &markdown,
        to_markdown(report, &envelope).as_bytes(),
    )
    .map_err(|e| io(&markdown)(std::io::Error::other(e.to_string())))?;
    Ok(Written {
        json,
        markdown,
        signed_by: envelope.signatures.first().map(|s| s.keyid.clone()),
    })
}

/// Reads a report's envelope and the report in it (payload type and format checked).
pub fn read_envelope(path: &Path) -> Result<(DsseEnvelope, TriageReport), TriageError> {
    let shown = crate::core::text::visible_path(path);
    let bytes =
        crate::core::file_input::read_regular_capped(path, MAX_REPORT_BYTES).map_err(|e| {
            // Only the size limit is "too large"; a FIFO, device or read failure says what it is.
            if e.kind() == std::io::ErrorKind::FileTooLarge {
                TriageError::TooLarge {
                    path: shown.clone(),
                }
            } else {
                io(path)(e)
            }
        })?;
    let bad = |detail: String| TriageError::Malformed {
        path: shown.clone(),
        detail,
    };
    let envelope: DsseEnvelope =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("not a DSSE envelope: {e}")))?;
    if envelope.payload_type != TRIAGE_PAYLOAD_TYPE {
        return Err(bad(format!(
            "payloadType is {:?}, expected {TRIAGE_PAYLOAD_TYPE:?}",
            crate::core::text::visible(&envelope.payload_type)
        )));
    }
    let statement = envelope.statement().map_err(bad)?;
    let report: TriageReport = serde_json::from_str(&statement)
        .map_err(|e| bad(format!("the payload is not a triage report: {e}")))?;
    if report.format != TRIAGE_FORMAT {
        return Err(bad(format!(
            "format is \"{}\", expected {TRIAGE_FORMAT:?}",
            crate::core::text::visible(&report.format)
        )));
    }
    Ok((envelope, report))
}

/// What `verify` found.
#[derive(Debug, Clone)]
pub struct TriageVerdict {
    pub report: TriageReport,
    pub signature: SignatureCheck,
    /// For a Markdown file: whether it is exactly what the signed payload renders.
    pub markdown_matches: Option<bool>,
}

impl TriageVerdict {
    /// Signed by a trusted key, and the Markdown (if checked) unaltered.
    pub fn ok(&self) -> bool {
        self.signature.is_valid() && self.markdown_matches != Some(false)
    }
}

/// Verifies a report file: the `.json` envelope, or a `.md` against the envelope beside it.
pub fn verify_file(path: &Path, trust: &TrustSet) -> Result<TriageVerdict, TriageError> {
    let is_md = path.extension().is_some_and(|e| e == "md");
    let json = if is_md {
        path.with_extension("json")
    } else {
        path.to_path_buf()
    };
    let (envelope, report) = read_envelope(&json).map_err(|e| match e {
        // A `.md` is checked against its signed envelope: say that is what is missing.
        TriageError::Io { path, source }
            if is_md && source.kind() == std::io::ErrorKind::NotFound =>
        {
            TriageError::Io {
                path,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!(
                        "{source}: a report's .md is verified against the signed .json envelope written beside it; keep the two together"
                    ),
                ),
            }
        }
        other => other,
    })?;
    let markdown_matches = if is_md {
        let text = crate::core::file_input::read_regular_capped(path, MAX_REPORT_BYTES)
            .map_err(io(path))?;
        Some(text == to_markdown(&report, &envelope).into_bytes())
    } else {
        None
    };
    Ok(TriageVerdict {
        signature: envelope.check(trust),
        report,
        markdown_matches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::triage::{Decision, Subject, TriageFinding};

    fn sample() -> TriageReport {
        TriageReport {
            format: TRIAGE_FORMAT.into(),
            created_at: "2026-11-23T12:00:00Z".into(),
            operator: "ops\u{1b}[31m".into(),
            subject: Subject::Bundle,
            inputs: vec!["b`ad.json".into()],
            verdict: "findings".into(),
            findings: vec![TriageFinding {
                kind: "link-mismatch".into(),
                message: "link differs".into(),
                node_id: Some("node-a".into()),
                index: Some(3),
                job_id: None,
                expected: Some("AAA=".into()),
                actual: Some("BBB=".into()),
            }],
            plan: Vec::new(),
            conflicts: Vec::new(),
            decision: Decision {
                action: "reject".into(),
                note: "tampered".into(),
            },
        }
    }

    #[test]
    fn a_markdown_report_without_its_envelope_says_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("triage-x.md");
        std::fs::write(&md, "# report\n").unwrap();
        let err = verify_file(&md, &TrustSet::empty())
            .unwrap_err()
            .to_string();
        assert!(err.contains("triage-x.json"), "{err}");
        assert!(err.contains("signed .json envelope"), "{err}");
    }

    #[test]
    fn signed_report_verifies_and_edits_are_found() {
        let tmp = tempfile::tempdir().unwrap();
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let mut trust = TrustSet::empty();
        trust.add_key("ops", key.verifying_key(), "test");
        let w = write_report(&sample(), tmp.path(), "t", Some(&key)).unwrap();
        assert!(w.signed_by.is_some());
        let v = verify_file(&w.json, &trust).unwrap();
        assert!(v.ok(), "{:?}", v.signature);
        assert_eq!(v.report, sample());
        let md = std::fs::read_to_string(&w.markdown).unwrap();
        assert!(md.contains("expected `AAA=`, actual `BBB=`"), "{md}");
        assert!(!md.contains('\u{1b}'), "escapes never reach the file");
        assert!(verify_file(&w.markdown, &trust).unwrap().ok());
        // An edited Markdown file no longer matches.
        std::fs::write(&w.markdown, md.replace("reject", "import")).unwrap();
        let v = verify_file(&w.markdown, &trust).unwrap();
        assert_eq!(v.markdown_matches, Some(false));
        assert!(!v.ok());
        // An edited payload breaks the signature.
        let mut env: DsseEnvelope =
            serde_json::from_slice(&std::fs::read(&w.json).unwrap()).unwrap();
        let text = env.statement().unwrap().replace("reject", "import");
        env.payload = B64.encode(text);
        std::fs::write(&w.json, serde_json::to_vec(&env).unwrap()).unwrap();
        let v = verify_file(&w.json, &trust).unwrap();
        assert!(
            matches!(v.signature, SignatureCheck::Invalid { .. }),
            "{:?}",
            v.signature
        );
        // Unknown key: untrusted.
        let w = write_report(&sample(), tmp.path(), "u", Some(&key)).unwrap();
        let v = verify_file(&w.json, &TrustSet::empty()).unwrap();
        assert!(matches!(v.signature, SignatureCheck::Untrusted { .. }));
    }

    /// A report's files are named here, in the folder the operator gave: links planted under
    /// those names were written through (the files they named overwritten); they are replaced.
    #[cfg(unix)]
    #[test]
    fn a_report_never_writes_through_a_planted_link() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        for name in ["p.json", "p.md"] {
            std::os::unix::fs::symlink(&victim, tmp.path().join(name)).unwrap();
        }
        let w = write_report(&sample(), tmp.path(), "p", None).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        for f in [&w.json, &w.markdown] {
            assert!(!std::fs::symlink_metadata(f).unwrap().is_symlink(), "{f:?}");
        }
        assert!(verify_file(&w.markdown, &TrustSet::empty()).is_ok());
    }

    #[test]
    fn unsigned_and_malformed_reports() {
        let tmp = tempfile::tempdir().unwrap();
        let w = write_report(&sample(), tmp.path(), "n", None).unwrap();
        assert_eq!(w.signed_by, None);
        let v = verify_file(&w.json, &TrustSet::empty()).unwrap();
        assert_eq!(v.signature, SignatureCheck::Absent);
        assert!(!v.ok());
        let other = tmp.path().join("other.json");
        std::fs::write(
            &other,
            br#"{"payloadType":"x","payload":"","signatures":[]}"#,
        )
        .unwrap();
        let e = verify_file(&other, &TrustSet::empty()).unwrap_err();
        assert!(e.to_string().contains("payloadType"), "{e}");
        std::fs::write(&other, b"[1,").unwrap();
        assert!(matches!(
            verify_file(&other, &TrustSet::empty()),
            Err(TriageError::Malformed { .. })
        ));
        assert!(matches!(
            verify_file(&tmp.path().join("missing.json"), &TrustSet::empty()),
            Err(TriageError::Io { .. })
        ));
    }
}
