//! [`Verifier`]: a [`BundleVisitor`] that verifies as the reader streams a bundle, keeping per entry
//! only what the chain diagnosis needs. Entry checks are in `entry`, the end of a log in
//! `log_checks`, the bundle as a whole in `bundle_checks`.

use super::bundle_checks::{bundle_findings, checks, signature};
use super::entry::{check_entry, CheckedEntry, LogState};
use super::finding::Finding;
use super::log_checks::end_log;
use super::options::VerifyOptions;
use super::report::{Report, Stats};
use crate::core::bundle::{BundleVisitor, EntryView, LogFields, ReadSummary};
use crate::core::trust::SignatureCheck;
use std::ops::Range;

/// A [`BundleVisitor`] that verifies as it reads. Wrap it to also index or collect entries
/// ([`Verifier::check_entry`] hands back each entry it parsed).
pub struct Verifier<'a> {
    opts: VerifyOptions<'a>,
    findings: Vec<Finding>,
    current: Option<LogState>,
    log_nodes: Vec<String>,
    log_entries: Vec<usize>,
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

    /// Verifies one entry: its verdict flags and, when every field is valid, the entry decoded.
    pub fn check_entry(&mut self, log: usize, index: usize, view: &EntryView<'_>) -> CheckedEntry {
        if self.current.as_ref().map(|s| s.log) != Some(log) {
            self.current = Some(LogState::new(log));
        }
        let st = self.current.as_mut().expect("just set");
        check_entry(st, &self.opts, index, view, true)
    }

    /// Verifies one entry for its verdict flags alone ([`Verifier::check_entry`] without decoding
    /// the entry for a collector).
    pub fn check_entry_flags(&mut self, log: usize, index: usize, view: &EntryView<'_>) -> u8 {
        if self.current.as_ref().map(|s| s.log) != Some(log) {
            self.current = Some(LogState::new(log));
        }
        let st = self.current.as_mut().expect("just set");
        check_entry(st, &self.opts, index, view, false).flags
    }

    /// Called when a log's entries start (the log's nodeId, when it came first, names its node).
    pub fn entries_begin(&mut self, log: usize, fields: &LogFields) {
        self.state(log).node = fields.node_id.clone();
    }

    /// Called when a log ends: its findings join the report's.
    pub fn log_end(&mut self, log: usize, fields: &LogFields) {
        let st = match self.current.take() {
            Some(s) if s.log == log => s,
            other => {
                self.current = other;
                LogState::new(log)
            }
        };
        let found = end_log(st, fields);
        if self.findings.is_empty() {
            self.findings = found;
        } else {
            self.findings.extend(found);
        }
        self.log_nodes
            .push(fields.node_id.clone().unwrap_or_default());
        self.log_entries.push(fields.entry_count);
    }

    /// Completes verification after the reader finished.
    pub fn finish(mut self, summary: &ReadSummary) -> Report {
        let h = &summary.header;
        let mut first = bundle_findings(summary);
        let (sig_state, sig_finding, sig) = signature(h, &self.opts);
        first.extend(sig_finding);
        // The bundle's own findings go in front of the logs' (the larger vector grows in place
        // rather than being copied next to itself).
        let mut findings = std::mem::take(&mut self.findings);
        findings.splice(0..0, first);
        let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Report {
            bundle_id: nonempty(&h.bundle_id),
            tenant_id: nonempty(&h.tenant_id),
            ok: findings.is_empty(),
            checks: checks(&findings, sig_state),
            stats: Stats {
                nodes: summary.logs.len(),
                entries: summary.entries,
                bytes: summary.bytes,
                signed_by: h.signed_by.clone(),
                signer: match sig {
                    SignatureCheck::Valid { signer, .. } => Some(signer),
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
        self.check_entry_flags(log, index, &entry);
    }

    fn entries_begin(&mut self, log: usize, fields: &LogFields) {
        Verifier::entries_begin(self, log, fields);
    }

    fn log_end(&mut self, log: usize, fields: &LogFields) {
        Verifier::log_end(self, log, fields);
    }
}
