//! Streaming bundle reader: one pass over the file, entries handed to a visitor one at a time,
//! the manifest digest computed on the way. Memory is bounded by the largest single entry.
//!
//! This file reads the bundle object and its header; `logs` reads `jobLogs`, `partial` an entry
//! the strict parse refused, `visitor` holds what the visitor is given, `problems` what can be
//! wrong.

mod logs;
mod partial;
mod problems;
mod visitor;

pub use problems::{type_name, BundleFileError, ReadError, SchemaProblem, SchemaProblemKind};
pub use visitor::{BundleVisitor, EntryView, LogFields, NoVisitor, ReadSummary};

use super::digest::ManifestHasher;
use super::model::BundleHeader;
use super::scan::{json_error, ScanError, Scanner, OBJECT_CLOSE, OBJECT_OPEN};
use logs::read_job_logs;
use problems::{problem, repeats_inside};
use serde_json::Value;
use std::collections::HashSet;
use std::io::Read;
use std::ops::Range;
use std::path::Path;

const HEADER_KEYS: [&str; 7] = [
    "bundleId",
    "tenantId",
    "createdAt",
    "createdByNodeId",
    "manifestDigest",
    "signature",
    "signedBy",
];

/// Opens and reads a bundle file. I/O errors name nothing but the cause; callers add the path.
pub fn read_bundle_file(
    path: &Path,
    visitor: &mut impl BundleVisitor,
) -> Result<ReadSummary, BundleFileError> {
    let file = crate::core::notify::open_bundle_source(path)
        .map_err(|e| BundleFileError::opening(path, e))?;
    read_bundle(file, visitor).map_err(BundleFileError::Syntax)
}

/// Reads a bundle from any byte source in one pass.
pub fn read_bundle<R: Read>(
    reader: R,
    visitor: &mut impl BundleVisitor,
) -> Result<ReadSummary, ReadError> {
    let mut s = Scanner::new(reader);
    let mut summary = ReadSummary::default();
    let mut hasher = ManifestHasher::new();
    let mut seen_keys: HashSet<String> = HashSet::new();
    let mut saw_job_logs = false;

    if s.peek().map_err(|e| ReadError::at("$", e))? == Some(0xEF) && s.offset() == 0 {
        return Err(ReadError::at(
            "$",
            ScanError::new(0, "the file starts with a UTF-8 byte order mark (EF BB BF), which JSON does not allow; it was probably saved by an editor that adds one: remove the first 3 bytes (e.g. `sed -i '1s/^\\xEF\\xBB\\xBF//' FILE`) and retry"),
        ));
    }
    s.expect(OBJECT_OPEN, "'{' (a bundle is a JSON object)")
        .map_err(|e| ReadError::at("$", e))?;
    if !s.eat(OBJECT_CLOSE).map_err(|e| ReadError::at("$", e))? {
        loop {
            let key = s.key().map_err(|e| ReadError::at("$", e))?;
            let path = format!("$.{key}");
            if !seen_keys.insert(key.clone()) {
                summary.problems.push(problem(
                    &path,
                    None,
                    None,
                    SchemaProblemKind::DuplicateKey,
                    "duplicate key (a key may appear once per object)",
                ));
            }
            if key == "jobLogs" {
                saw_job_logs = true;
                read_job_logs(&mut s, visitor, &mut hasher, &mut summary)?;
            } else {
                let (start, raw) = s.capture().map_err(|e| ReadError::at(&path, e))?;
                let value: Value = serde_json::from_slice(raw)
                    .map_err(|e| ReadError::at(&path, json_error(start, raw, &e)))?;
                repeats_inside(raw, &path, None, None, &mut summary.problems);
                if HEADER_KEYS.contains(&key.as_str()) {
                    match value {
                        Value::String(v) => set_header(&mut summary.header, &key, v),
                        other => summary.problems.push(problem(
                            &path,
                            None,
                            None,
                            SchemaProblemKind::WrongType,
                            &format!("must be a string, found {}", type_name(&other)),
                        )),
                    }
                    if key == "signature" {
                        summary.has_signature = true;
                    }
                } else {
                    summary.problems.push(problem(
                        &path,
                        None,
                        None,
                        SchemaProblemKind::Unknown,
                        "unknown field",
                    ));
                }
            }
            if !s
                .next_or_close(OBJECT_CLOSE, "the bundle object")
                .map_err(|e| ReadError::at("$", e))?
            {
                break;
            }
        }
    }
    s.expect_end().map_err(|e| ReadError::at("$", e))?;
    for key in [
        "bundleId",
        "tenantId",
        "createdAt",
        "createdByNodeId",
        "manifestDigest",
    ] {
        if !seen_keys.contains(key) {
            summary.problems.push(problem(
                &format!("$.{key}"),
                None,
                None,
                SchemaProblemKind::Missing,
                "missing required field",
            ));
        }
    }
    if !saw_job_logs {
        summary.problems.push(problem(
            "$.jobLogs",
            None,
            None,
            SchemaProblemKind::Missing,
            "missing required field",
        ));
    }
    let signed_by_present = seen_keys.contains("signedBy");
    if summary.has_signature != signed_by_present {
        summary.problems.push(problem(
            "$.signedBy",
            None,
            None,
            SchemaProblemKind::Unpaired,
            "signature and signedBy must appear together",
        ));
    }
    summary.bytes = s.offset();
    summary.computed_manifest_digest = hasher.finish();
    Ok(summary)
}

fn set_header(h: &mut BundleHeader, key: &str, v: String) {
    match key {
        "bundleId" => h.bundle_id = v,
        "tenantId" => h.tenant_id = v,
        "createdAt" => h.created_at = v,
        "createdByNodeId" => h.created_by_node_id = v,
        "manifestDigest" => h.manifest_digest = v,
        "signature" => h.signature = Some(v),
        "signedBy" => h.signed_by = Some(v),
        _ => {}
    }
}

/// Reads a whole bundle into memory (small bundles: tests, the demo, signing).
pub fn load_bundle(path: &Path) -> Result<super::model::Bundle, BundleFileError> {
    struct Collect(Vec<Vec<super::model::Entry>>);
    impl BundleVisitor for Collect {
        fn entry(&mut self, log: usize, _: usize, _: Range<u64>, e: EntryView<'_>) {
            while self.0.len() <= log {
                self.0.push(Vec::new());
            }
            self.0[log].push(e.entry().to_owned_entry());
        }
        fn log_end(&mut self, log: usize, _: &LogFields) {
            while self.0.len() <= log {
                self.0.push(Vec::new());
            }
        }
    }
    let mut c = Collect(Vec::new());
    let summary = read_bundle_file(path, &mut c)?;
    let job_logs = summary
        .logs
        .iter()
        .zip(c.0)
        .map(|(f, entries)| super::model::JobLog {
            node_id: f.node_id.clone().unwrap_or_default(),
            last_hlc: f.last_hlc.clone().unwrap_or_default(),
            chain_head: f.chain_head.clone().unwrap_or_default(),
            entries,
        })
        .collect();
    Ok(super::model::Bundle {
        header: summary.header,
        job_logs,
    })
}
