//! Bundle verification and break diagnosis (SPEC section 6): every check, every finding, in one
//! streaming pass.

pub mod diagnose;
pub mod finding;

pub use diagnose::{ChainDiagnosis, ChainEntry, HeadClaim, LinkText, Prev};
pub use finding::{Check, Finding, FindingKind};

use crate::core::bundle::{
    read_bundle, BundleFileError, BundleVisitor, EntryView, LogFields, ReadError, ReadSummary,
};
use crate::core::chain::{node_link, sha256};
use crate::core::hlc::{validate_node_id, Hlc, DEFAULT_MAX_CLOCK_SKEW};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::Serialize;
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

pub use crate::core::trust::SignatureCheck;
use crate::core::trust::{check_bundle_signature, TrustSet};

/// How to verify.
#[derive(Clone)]
pub struct VerifyOptions<'a> {
    /// Report `signature-missing` for an unsigned bundle.
    pub require_signature: bool,
    /// Trusted keys for the signature check (`None`: no key is trusted).
    pub trust: Option<&'a TrustSet>,
    /// Report entries more than this far ahead of `now_ms` (`None`: no clock-skew check).
    pub max_clock_skew: Option<Duration>,
    /// The verifying machine's clock, Unix ms.
    pub now_ms: u64,
    /// Bytes read so far (for progress displays).
    pub progress: Option<Arc<AtomicU64>>,
}

impl Default for VerifyOptions<'_> {
    fn default() -> Self {
        VerifyOptions {
            require_signature: false,
            trust: None,
            max_clock_skew: Some(DEFAULT_MAX_CLOCK_SKEW),
            now_ms: crate::core::hlc::unix_ms_now(),
            progress: None,
        }
    }
}

/// The six checks of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checks {
    pub schema: &'static str,
    pub manifest_digest: &'static str,
    pub chain: &'static str,
    pub links: &'static str,
    pub chain_head: &'static str,
    pub signature: &'static str,
}

/// Counts about what was verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub nodes: usize,
    pub entries: usize,
    pub bytes: u64,
    pub signed_by: Option<String>,
    pub signer: Option<String>,
    pub computed_manifest_digest: String,
}

/// The verification report (`airlock jobs verify --json` prints exactly this).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub bundle_id: Option<String>,
    pub tenant_id: Option<String>,
    pub ok: bool,
    pub checks: Checks,
    pub findings: Vec<Finding>,
    pub stats: Stats,
    /// Node ids of the logs in file order (not part of the JSON contract).
    #[serde(skip)]
    pub log_nodes: Vec<String>,
    /// Entry counts of the logs in file order.
    #[serde(skip)]
    pub log_entries: Vec<usize>,
}

impl Report {
    /// Findings of the log at position `log`.
    pub fn log_findings(&self, log: usize) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.log == Some(log))
    }

    /// How many leading entries of log `log` are trustworthy: everything before its first
    /// entry-level break (a head claim pointing at entry j trusts 0..=j).
    pub fn verified_prefix(&self, log: usize) -> usize {
        self.verified_prefixes().get(log).copied().unwrap_or(0)
    }

    /// [`Report::verified_prefix`] of every log, in one pass over the findings.
    pub fn verified_prefixes(&self) -> Vec<usize> {
        let mut prefixes = self.log_entries.clone();
        for f in &self.findings {
            let Some(slot) = f.log.and_then(|l| prefixes.get_mut(l)) else {
                continue;
            };
            let cut = match (f.kind, f.index) {
                (FindingKind::TailTruncated, _) => continue,
                (FindingKind::HeadMismatch, Some(i)) => (i as usize).saturating_add(1),
                (_, Some(i)) => i as usize,
                (_, None) => 0,
            };
            *slot = (*slot).min(cut);
        }
        prefixes
    }

    /// The findings of every log, grouped in one pass (index = log position).
    pub fn findings_by_log(&self) -> Vec<Vec<&Finding>> {
        let mut out: Vec<Vec<&Finding>> = vec![Vec::new(); self.log_entries.len()];
        for f in &self.findings {
            if let Some(v) = f.log.and_then(|l| out.get_mut(l)) {
                v.push(f);
            }
        }
        out
    }

    /// Findings that `--force` never waives (SPEC section 7, docs/decisions.md): a missing, invalid
    /// or untrusted signature, and schema problems of the bundle header (an ambiguous header names
    /// no tenant or bundle that could be trusted). `--force` only cuts broken logs to their
    /// verified prefix.
    pub fn unwaivable(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| {
            matches!(
                f.kind,
                FindingKind::SignatureMissing
                    | FindingKind::SignatureInvalid
                    | FindingKind::SignerUntrusted
            ) || (f.kind == FindingKind::SchemaInvalid && f.log.is_none())
        })
    }

    /// The first finding in file order (the first break), if any.
    pub fn first_break(&self) -> Option<&Finding> {
        self.findings.first()
    }
}

/// Verifies a bundle file.
pub fn verify_file(path: &Path, opts: &VerifyOptions<'_>) -> Result<Report, BundleFileError> {
    let file = crate::core::notify::open_bundle_source(path)
        .map_err(|e| BundleFileError::Io(e.to_string()))?;
    verify_reader(file, opts).map_err(BundleFileError::Syntax)
}

/// Verifies a bundle from any byte source.
pub fn verify_reader<R: Read>(reader: R, opts: &VerifyOptions<'_>) -> Result<Report, ReadError> {
    let mut v = Verifier::new(opts.clone());
    let reader = ProgressReader::new(reader, opts.progress.as_deref());
    let summary = read_bundle(reader, &mut v)?;
    Ok(v.finish(&summary))
}

pub use crate::core::file_input::ProgressReader;

/// Per-entry verdicts for displays (bit flags).
pub mod entry_flags {
    pub const PAYLOAD_MODIFIED: u8 = 1;
    pub const ENTRY_MODIFIED: u8 = 2;
    pub const SCHEMA: u8 = 4;
    pub const NODE: u8 = 8;
    pub const SKEW: u8 = 16;
}

/// A [`BundleVisitor`] that verifies as it reads. Wrap it to also index entries for a display.
pub struct Verifier<'a> {
    opts: VerifyOptions<'a>,
    findings: Vec<Finding>,
    current: Option<LogState>,
    log_nodes: Vec<String>,
    log_entries: Vec<usize>,
}

struct LogState {
    log: usize,
    node: Option<String>,
    diag: ChainDiagnosis,
    findings: Vec<Finding>,
    first_entry_node: Option<String>,
    node_mismatches: Vec<usize>,
}

impl LogState {
    fn new(log: usize) -> Self {
        LogState {
            log,
            node: None,
            diag: ChainDiagnosis::new(Some(log), None, LinkText::Base64),
            findings: Vec::new(),
            first_entry_node: None,
            node_mismatches: Vec::new(),
        }
    }
}

pub use crate::core::chain::decode_digest;
pub use crate::core::ids::parse_job_id;

/// Parses a present field, recording why it is invalid.
fn checked<T>(
    present: bool,
    field: &'static str,
    bad: &mut Vec<(&'static str, String)>,
    parse: impl FnOnce() -> Result<T, String>,
) -> Option<T> {
    if !present {
        return None;
    }
    parse().map_err(|m| bad.push((field, m))).ok()
}

impl<'a> Verifier<'a> {
    pub fn new(opts: VerifyOptions<'a>) -> Self {
        Verifier {
            opts,
            findings: Vec::new(),
            current: None,
            log_nodes: Vec::new(),
            log_entries: Vec::new(),
        }
    }

    fn state(&mut self, log: usize) -> &mut LogState {
        if self.current.as_ref().map(|s| s.log) != Some(log) {
            self.current = Some(LogState::new(log));
        }
        self.current.as_mut().expect("just set")
    }

    /// Verifies one entry; returns its verdict flags (see [`entry_flags`]).
    pub fn check_entry(&mut self, log: usize, index: usize, view: &EntryView<'_>) -> u8 {
        let skew = self.opts.max_clock_skew;
        let now = self.opts.now_ms;
        let st = self.state(log);
        let e = view.entry();
        let mut flags = 0u8;
        let node_for = |st: &LogState| st.node.clone().or_else(|| Some(e.node_id.to_string()));
        let schema = |st: &LogState, field: &str, msg: String| {
            Finding::new(
                FindingKind::SchemaInvalid,
                format!("entry {index}: {field}: {msg}"),
            )
            .at(Some(log), node_for(st).as_deref(), Some(index as u64))
        };
        let mut problems: Vec<Finding> = Vec::new();
        if let EntryView::Invalid { problems: p, .. } = view {
            for pr in p.iter() {
                problems.push(
                    Finding::new(
                        FindingKind::SchemaInvalid,
                        format!("{}: {}", pr.path, pr.message),
                    )
                    .at(Some(log), node_for(st).as_deref(), Some(index as u64)),
                );
            }
        }
        let present = |name: &str| !matches!(view, EntryView::Invalid { problems, .. } if problems.iter().any(|p| p.path.ends_with(&format!(".{name}"))));

        let mut bad: Vec<(&'static str, String)> = Vec::new();
        let hlc = checked(present("tHlc"), "tHlc", &mut bad, || {
            Hlc::parse(&e.t_hlc).map_err(|err| err.to_string())
        });
        let job = checked(present("jobId"), "jobId", &mut bad, || {
            parse_job_id(&e.job_id)
        });
        let stored_hash = checked(present("payloadHash"), "payloadHash", &mut bad, || {
            decode_digest(&e.payload_hash)
        });
        let prev = match &e.prev_link {
            None if present("prevLink") => Prev::Genesis,
            None => Prev::Unknown,
            Some(p) => checked(true, "prevLink", &mut bad, || decode_digest(p))
                .map_or(Prev::Unknown, Prev::Link),
        };
        let link = checked(present("link"), "link", &mut bad, || decode_digest(&e.link));
        checked(present("nodeId"), "nodeId", &mut bad, || {
            validate_node_id(&e.node_id).map_err(|err| err.to_string())
        });
        checked(present("enqueuedAt"), "enqueuedAt", &mut bad, || {
            crate::core::time::parse_rfc3339_ms(&e.enqueued_at)
                .map(|_| ())
                .ok_or_else(|| format!("{:?} is not an RFC 3339 timestamp", e.enqueued_at))
        });
        for (field, message) in bad {
            problems.push(schema(st, field, message));
        }
        // Payload hash; a payload that still matches its hash must be canonical text (an edited
        // one is `payload-modified` alone: one tampering, one finding).
        if present("payload") {
            if let Some(stored) = stored_hash {
                let actual = sha256(e.payload.as_bytes());
                if actual == stored {
                    if let Err(m) = crate::core::canonical::check_canonical(&e.payload) {
                        problems.push(schema(st, "payload", m));
                    }
                } else {
                    flags |= entry_flags::PAYLOAD_MODIFIED;
                    st.findings.push(
                        Finding::new(
                            FindingKind::PayloadModified,
                            format!(
                                "entry {index}'s payload was changed after it was written: its SHA-256 no longer matches the stored payloadHash"
                            ),
                        )
                        .at(Some(log), node_for(st).as_deref(), Some(index as u64))
                        .job(job.map(|u| u.to_string()))
                        .values(Some(B64.encode(stored)), Some(B64.encode(actual))),
                    );
                }
            }
        }
        let recomputed = match (&job, &hlc, &stored_hash, prev) {
            (Some(j), Some(_), Some(h), Prev::Genesis) => Some(node_link(None, j, &e.t_hlc, h)),
            (Some(j), Some(_), Some(h), Prev::Link(p)) => Some(node_link(Some(&p), j, &e.t_hlc, h)),
            _ => None,
        };
        // Node: the entry's nodeId and its tHlc's node must be the log's.
        if st.first_entry_node.is_none() {
            st.first_entry_node = Some(e.node_id.to_string());
        }
        let expected_node = st
            .node
            .clone()
            .or_else(|| st.first_entry_node.clone())
            .unwrap_or_default();
        let modified = matches!((link, recomputed), (Some(l), Some(r)) if l != r);
        let hlc_node_bad = hlc
            .as_ref()
            .map(|h| h.node != expected_node)
            .unwrap_or(false)
            && !modified;
        if e.node_id != expected_node.as_str() || hlc_node_bad {
            flags |= entry_flags::NODE;
            st.node_mismatches.push(index);
            let claimed = if e.node_id != expected_node.as_str() {
                e.node_id.to_string()
            } else {
                hlc.as_ref().map(|h| h.node.clone()).unwrap_or_default()
            };
            st.findings.push(
                Finding::new(
                    FindingKind::NodeMismatch,
                    format!("entry {index} claims node {claimed:?} but sits in the log of node {expected_node:?}"),
                )
                .at(Some(log), Some(&expected_node), Some(index as u64))
                .job(job.map(|u| u.to_string()))
                .values(Some(expected_node.clone()), Some(claimed)),
            );
        }
        // Clock skew.
        if let (Some(max), Some(h)) = (skew, &hlc) {
            if crate::core::hlc::check_skew(h, now, max).is_err() {
                flags |= entry_flags::SKEW;
                st.findings.push(
                    Finding::new(
                        FindingKind::ClockSkew,
                        format!(
                            "entry {index}'s physical time is {} ms ahead of this machine's clock (more than the {} ms tolerated)",
                            h.physical - now,
                            max.as_millis()
                        ),
                    )
                    .at(Some(log), Some(&expected_node), Some(index as u64))
                    .job(job.map(|u| u.to_string()))
                    .values(Some(format!("at most {}", now + max.as_millis() as u64)), Some(h.physical.to_string())),
                );
            }
        }
        if !problems.is_empty() {
            flags |= entry_flags::SCHEMA;
            st.findings.extend(problems);
        }
        let chain_entry = ChainEntry {
            link,
            prev,
            recomputed,
            hlc: hlc.as_ref().map(|h| (h.physical, h.logical)),
            job_id: job.map(|u| *u.as_bytes()),
        };
        if let Some(f) = st.diag.push(chain_entry, Some(&e.t_hlc)) {
            flags |= entry_flags::ENTRY_MODIFIED;
            let f = Finding {
                node_id: Some(expected_node),
                ..f
            };
            st.findings.push(f);
        }
        flags
    }

    fn end_log(&mut self, log: usize, fields: &LogFields) {
        let mut st = match self.current.take() {
            Some(s) if s.log == log => s,
            other => {
                self.current = other;
                LogState::new(log)
            }
        };
        let node = fields.node_id.clone().unwrap_or_default();
        let node_ref = fields.node_id.as_deref();
        let mut log_findings = Vec::new();
        let schema = |msg: String| {
            Finding::new(FindingKind::SchemaInvalid, msg).at(Some(log), node_ref, None)
        };
        if let Some(n) = &fields.node_id {
            if let Err(e) = validate_node_id(n) {
                log_findings.push(schema(format!("$.jobLogs[{log}].nodeId: {e}")));
            }
            // Entries were compared with the first entry's node when the log's nodeId came late.
            if st.node.is_none() {
                if let Some(first) = &st.first_entry_node {
                    if first != n && st.node_mismatches.len() < st.diag.len() {
                        log_findings.push(
                            Finding::new(
                                FindingKind::NodeMismatch,
                                format!("the log claims node {n:?} but its entries belong to node {first:?}"),
                            )
                            .at(Some(log), Some(n), None)
                            .values(Some(first.clone()), Some(n.clone())),
                        );
                    }
                }
            }
        }
        if fields.entry_count == 0 {
            log_findings.push(schema(format!(
                "$.jobLogs[{log}].entries: a log with no entries must not be written"
            )));
        }
        let head = match &fields.chain_head {
            Some(h) => match decode_digest(h) {
                Ok(d) => Some(d),
                Err(m) => {
                    log_findings.push(schema(format!("$.jobLogs[{log}].chainHead: {m}")));
                    None
                }
            },
            None => None,
        };
        let last_hlc = match &fields.last_hlc {
            Some(t) => match Hlc::parse(t) {
                Ok(h) => Some(((h.physical, h.logical), t.clone())),
                Err(e) => {
                    log_findings.push(schema(format!("$.jobLogs[{log}].lastHlc: {e}")));
                    None
                }
            },
            None => None,
        };
        st.diag.set_node(Some(log), fields.node_id.clone());
        let chain_findings = st.diag.finish(Some(HeadClaim { head, last_hlc }));
        let mut all = st.findings;
        all.extend(chain_findings);
        for f in &mut all {
            if f.node_id.is_none() {
                f.node_id = fields.node_id.clone();
            }
        }
        all.extend(log_findings);
        all.sort_by_key(|f| (f.index.unwrap_or(u64::MAX), f.kind));
        self.findings.extend(all);
        self.log_nodes.push(node);
        self.log_entries.push(fields.entry_count);
    }

    /// Completes verification after the reader finished.
    pub fn finish(mut self, summary: &ReadSummary) -> Report {
        let mut bundle_level: Vec<Finding> = Vec::new();
        let h = &summary.header;
        for p in summary
            .problems
            .iter()
            .filter(|p| p.index.is_none() && p.log.is_none())
        {
            bundle_level.push(Finding::new(
                FindingKind::SchemaInvalid,
                format!("{}: {}", p.path, p.message),
            ));
        }
        for p in summary
            .problems
            .iter()
            .filter(|p| p.index.is_none() && p.log.is_some())
        {
            bundle_level.push(
                Finding::new(
                    FindingKind::SchemaInvalid,
                    format!("{}: {}", p.path, p.message),
                )
                .at(
                    p.log,
                    p.log
                        .and_then(|l| summary.logs.get(l))
                        .and_then(|l| l.node_id.as_deref()),
                    None,
                ),
            );
        }
        let header_schema =
            |field: &str, value: &str, ok: bool, what: &str, out: &mut Vec<Finding>| {
                if !value.is_empty() && !ok {
                    out.push(Finding::new(
                        FindingKind::SchemaInvalid,
                        format!("$.{field}: {value:?} is not {what}"),
                    ));
                }
            };
        header_schema(
            "bundleId",
            &h.bundle_id,
            parse_job_id(&h.bundle_id).is_ok(),
            "a lowercase hyphenated UUID",
            &mut bundle_level,
        );
        header_schema(
            "createdAt",
            &h.created_at,
            crate::core::time::parse_rfc3339_ms(&h.created_at).is_some(),
            "an RFC 3339 timestamp",
            &mut bundle_level,
        );
        header_schema(
            "createdByNodeId",
            &h.created_by_node_id,
            validate_node_id(&h.created_by_node_id).is_ok(),
            "a node id (1 to 128 characters of [A-Za-z0-9._-])",
            &mut bundle_level,
        );
        let digest_ok = h
            .manifest_digest
            .strip_prefix("sha256:")
            .map(|x| x.len() == 64 && x.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .unwrap_or(false);
        header_schema(
            "manifestDigest",
            &h.manifest_digest,
            digest_ok,
            "sha256: followed by 64 lowercase hex digits",
            &mut bundle_level,
        );
        if summary.problems.iter().all(|p| p.path != "$.tenantId") && h.tenant_id.is_empty() {
            bundle_level.push(Finding::new(
                FindingKind::SchemaInvalid,
                "$.tenantId: must not be empty",
            ));
        } else if let (false, Err(e)) = (
            h.tenant_id.is_empty(),
            crate::core::tenant::validate_tenant_id(&h.tenant_id),
        ) {
            bundle_level.push(Finding::new(
                FindingKind::SchemaInvalid,
                format!("$.tenantId: {e}"),
            ));
        }
        // jobLogs sorted by nodeId, no duplicates.
        for w in summary.logs.windows(2).enumerate() {
            let (i, pair) = w;
            if let (Some(a), Some(b)) = (&pair[0].node_id, &pair[1].node_id) {
                if a >= b {
                    bundle_level.push(
                        Finding::new(
                            FindingKind::SchemaInvalid,
                            format!(
                                "$.jobLogs[{}]: logs must be sorted by nodeId without repeats, but {b:?} follows {a:?}",
                                i + 1
                            ),
                        )
                        .at(Some(i + 1), Some(b), None),
                    );
                }
            }
        }
        if !h.manifest_digest.is_empty() && h.manifest_digest != summary.computed_manifest_digest {
            bundle_level.push(
                Finding::new(
                    FindingKind::ManifestMismatch,
                    "the manifestDigest does not match the job logs: the logs or the digest were changed after export",
                )
                .values(Some(summary.computed_manifest_digest.clone()), Some(h.manifest_digest.clone())),
            );
        }
        // Signature.
        let empty = TrustSet::empty();
        let sig = check_bundle_signature(h, self.opts.trust.unwrap_or(&empty));
        let sig_state = match &sig {
            SignatureCheck::Absent => {
                if self.opts.require_signature {
                    bundle_level.push(Finding::new(
                        FindingKind::SignatureMissing,
                        "the bundle is not signed, and this verification requires a signature",
                    ));
                }
                "absent"
            }
            SignatureCheck::Valid { .. } => "pass",
            SignatureCheck::Invalid { key_id, reason } => {
                bundle_level.push(
                    Finding::new(
                        FindingKind::SignatureInvalid,
                        format!(
                            "the signature does not verify for the bundle's statement: {reason}"
                        ),
                    )
                    .values(
                        Some(format!("a valid signature by {key_id}")),
                        h.signature.clone(),
                    ),
                );
                "fail"
            }
            SignatureCheck::Untrusted { key_id } => {
                bundle_level.push(
                    Finding::new(
                        FindingKind::SignerUntrusted,
                        format!(
                            "the bundle is signed by key {key_id}, which is not in the trust store"
                        ),
                    )
                    .values(Some("a trusted key id".into()), Some(key_id.clone())),
                );
                "untrusted"
            }
        };
        bundle_level.append(&mut self.findings);
        let findings = bundle_level;
        let state = |c: Check| {
            if findings.iter().any(|f| f.kind.check() == c) {
                "fail"
            } else {
                "pass"
            }
        };
        let checks = Checks {
            schema: state(Check::Schema),
            manifest_digest: state(Check::ManifestDigest),
            chain: state(Check::Chain),
            links: state(Check::Links),
            chain_head: state(Check::ChainHead),
            signature: sig_state,
        };
        let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Report {
            bundle_id: nonempty(&h.bundle_id),
            tenant_id: nonempty(&h.tenant_id),
            ok: findings.is_empty(),
            checks,
            stats: Stats {
                nodes: summary.logs.len(),
                entries: summary.entries,
                bytes: summary.bytes,
                signed_by: h.signed_by.clone(),
                signer: match &sig {
                    SignatureCheck::Valid { signer, .. } => Some(signer.clone()),
                    _ => None,
                },
                computed_manifest_digest: summary.computed_manifest_digest.clone(),
            },
            findings,
            log_nodes: self.log_nodes,
            log_entries: self.log_entries,
        }
    }
}

impl BundleVisitor for Verifier<'_> {
    fn entry(&mut self, log: usize, index: usize, _span: Range<u64>, entry: EntryView<'_>) {
        self.check_entry(log, index, &entry);
    }

    fn entries_begin(&mut self, log: usize, fields: &LogFields) {
        let st = self.state(log);
        st.node = fields.node_id.clone();
    }

    fn log_end(&mut self, log: usize, fields: &LogFields) {
        self.end_log(log, fields);
    }
}
