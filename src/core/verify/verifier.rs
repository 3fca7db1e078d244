//! [`Verifier`]: a [`BundleVisitor`] that verifies as the reader streams a bundle, keeping per entry
//! only what the chain diagnosis needs. Entry checks are in `entry`, the end of a log in
//! `log_checks`, the bundle as a whole in `bundle_checks`.

use super::bounded::BoundedReport;
use super::bundle_checks::{bundle_findings, checks, signature};
use super::entry::{check_entry, CheckedEntry, LogState};
use super::finding::Check;
use super::log_checks::end_log;
use super::options::VerifyOptions;
use super::report::{Report, Stats};
use super::spill::{FindingLog, SpillError};
use crate::core::bundle::{BundleVisitor, EntryView, LogFields, ReadSummary};
use crate::core::trust::SignatureCheck;
use std::ops::Range;

/// A [`BundleVisitor`] that verifies as it reads. Wrap it to also index or collect entries
/// ([`Verifier::check_entry`] hands back each entry it parsed).
pub struct Verifier<'a> {
    opts: VerifyOptions<'a>,
    /// The findings of the logs read so far, in report order.
    findings: FindingLog,
    /// The first failure to read findings back from their temporary file.
    read_failed: Option<std::io::Error>,
    current: Option<LogState>,
    log_nodes: Vec<String>,
    log_entries: Vec<usize>,
}

impl<'a> Verifier<'a> {
    /// A verifier that keeps every finding in memory (its [`Verifier::finish`] gives them all).
    pub fn new(opts: VerifyOptions<'a>) -> Self {
        Self::with_findings_memory(opts, usize::MAX)
    }

    /// A verifier that keeps about `bytes` of findings in memory (twice: the log being read's and
    /// the report's) and the rest in temporary files; finish it with [`Verifier::finish_bounded`].
    pub(super) fn with_findings_memory(opts: VerifyOptions<'a>, bytes: usize) -> Self {
        Verifier {
            opts,
            findings: FindingLog::new(bytes),
            read_failed: None,
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
        self.check(log, index, view, true)
    }

    /// Verifies one entry for its verdict flags alone ([`Verifier::check_entry`] without decoding
    /// the entry for a collector).
    pub fn check_entry_flags(&mut self, log: usize, index: usize, view: &EntryView<'_>) -> u8 {
        self.check(log, index, view, false).flags
    }

    fn check(
        &mut self,
        log: usize,
        index: usize,
        view: &EntryView<'_>,
        want_parsed: bool,
    ) -> CheckedEntry {
        if self.current.as_ref().map(|s| s.log) != Some(log) {
            self.current = Some(LogState::new(log));
        }
        let st = self.current.as_mut().expect("just set");
        let checked = check_entry(st, &self.opts, index, view, want_parsed);
        self.findings.after_entry(&mut st.findings);
        checked
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
        if let Err(e) = end_log(st, fields, &mut self.findings) {
            self.read_failed.get_or_insert(e);
        }
        self.log_nodes
            .push(fields.node_id.clone().unwrap_or_default());
        self.log_entries.push(fields.entry_count);
    }

    /// Completes verification after the reader finished (a verifier from [`Verifier::new`]).
    pub fn finish(mut self, summary: &ReadSummary) -> Report {
        if let Err(e) = self.findings.check() {
            tracing::error!(error = %e, "verify: findings were lost");
        }
        let (mut report, mut logs) = self.parts(summary);
        // The bundle's own findings go in front of the logs' (the larger vector grows in place
        // rather than being copied next to itself).
        let front = std::mem::take(&mut report.findings);
        report.findings = match logs.take_memory() {
            Some(all) => all,
            // Only a verifier with a memory budget uses the file (`finish_bounded`).
            None => logs
                .iter()
                .filter_map(|f| {
                    f.map_err(|e| tracing::error!(error = %e, "verify: a finding was lost"))
                        .ok()
                        .map(|f| f.into_owned())
                })
                .collect(),
        };
        report.findings.splice(0..0, front);
        report
    }

    /// Completes verification after the reader finished, the logs' findings staying where they
    /// are (in memory, past the budget in a temporary file). Fails when that file could not be
    /// written or read back.
    pub fn finish_bounded(mut self, summary: &ReadSummary) -> Result<BoundedReport, SpillError> {
        self.findings.check()?;
        if let Some(e) = self.read_failed.take() {
            return Err(SpillError::reading(e));
        }
        let (report, logs) = self.parts(summary);
        Ok(BoundedReport::new(report, logs))
    }

    /// The report with the bundle's own findings (`ok` and `checks` count the logs' too), and the
    /// logs' findings.
    fn parts(self, summary: &ReadSummary) -> (Report, FindingLog) {
        let h = &summary.header;
        let mut front = bundle_findings(summary);
        let (sig_state, sig_finding, sig) = signature(h, &self.opts);
        front.extend(sig_finding);
        let logs = self.findings;
        let fails = |c: Check| logs.fails(c) || front.iter().any(|f| f.kind.check() == c);
        let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let report = Report {
            bundle_id: nonempty(&h.bundle_id),
            tenant_id: nonempty(&h.tenant_id),
            ok: front.is_empty() && logs.len() == 0,
            checks: checks(fails, sig_state),
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
            findings: front,
            log_nodes: self.log_nodes,
            log_entries: self.log_entries,
        };
        (report, logs)
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
