//! [`BoundedReport`]: the verification report with its findings in bounded memory (the logs'
//! findings past a budget are in a temporary file, read back in order as the report is written).
//! `airlock jobs verify` prints it: its JSON is exactly [`Report`]'s, its text
//! `report_text::each_bounded_verify_line`.

use super::finding::Finding;
use super::report::{LogTally, Report};
use super::spill::FindingLog;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use std::borrow::Cow;
use std::io;

/// A verification report whose findings may be partly in a temporary file.
pub struct BoundedReport {
    /// Every field of the report; its `findings` are the bundle's own only (those in front of the
    /// logs'), while `ok` and `checks` count every finding.
    head: Report,
    /// The logs' findings, after the bundle's.
    logs: FindingLog,
    /// Each log's tally over all its findings (the bundle's about it, then its own).
    tallies: Vec<LogTally>,
}

impl BoundedReport {
    pub(super) fn new(head: Report, logs: FindingLog) -> Self {
        let mut front: Vec<LogTally> = Vec::new();
        for f in &head.findings {
            if let Some(log) = f.log {
                if front.len() <= log {
                    front.resize(log + 1, LogTally::default());
                }
                front[log].add(f);
            }
        }
        let own = logs.tallies();
        let tallies = (0..front.len().max(own.len()))
            .map(|l| {
                let none = LogTally::default();
                front
                    .get(l)
                    .unwrap_or(&none)
                    .then(own.get(l).unwrap_or(&none))
            })
            .collect();
        BoundedReport {
            head,
            logs,
            tallies,
        }
    }

    /// The report's fields but its findings: `findings` there holds only the bundle's own findings
    /// (those in front of the logs', [`BoundedReport::front`]); read every finding with
    /// [`BoundedReport::findings`].
    pub fn head(&self) -> &Report {
        &self.head
    }

    /// True exactly when there are no findings.
    pub fn ok(&self) -> bool {
        self.head.ok
    }

    /// How many findings there are.
    pub fn len(&self) -> usize {
        self.head.findings.len() + self.logs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many findings are in the temporary file.
    pub fn spilled(&self) -> usize {
        self.logs.in_file()
    }

    /// The findings about the bundle as a whole, first in the report (some name a log).
    pub fn front(&self) -> &[Finding] {
        &self.head.findings
    }

    /// The findings after [`BoundedReport::front`]: every log's, log after log, in report order
    /// (those in the temporary file read back as they are reached).
    pub fn log_findings(&self) -> impl Iterator<Item = io::Result<Cow<'_, Finding>>> {
        self.logs.iter()
    }

    /// Every finding in report order.
    pub fn findings(&self) -> impl Iterator<Item = io::Result<Cow<'_, Finding>>> {
        let front = self.front().iter().map(|f| Ok(Cow::Borrowed(f)));
        front.chain(self.log_findings())
    }

    /// How many of [`BoundedReport::log_findings`] each log has, in order (those of a log follow
    /// those of the log before it).
    pub fn own_counts(&self) -> impl Iterator<Item = usize> + '_ {
        let own = self.logs.tallies();
        (0..self.head.log_entries.len()).map(|l| own.get(l).map_or(0, |t| t.count))
    }

    /// What the text says of log `log` before its findings: every finding naming it counted.
    pub fn tally(&self, log: usize) -> LogTally {
        self.tallies.get(log).cloned().unwrap_or_default()
    }

    /// [`Report::verified_prefixes`].
    pub fn verified_prefixes(&self) -> Vec<usize> {
        let entries = &self.head.log_entries;
        (0..entries.len())
            .map(|l| self.tally(l).prefix(entries[l]))
            .collect()
    }

    /// The report with every finding in memory (for a consumer that needs them all).
    pub fn into_report(self) -> io::Result<Report> {
        let mut all: Vec<Finding> = Vec::with_capacity(self.len());
        all.extend_from_slice(&self.head.findings);
        for f in self.logs.iter() {
            all.push(f?.into_owned());
        }
        Ok(Report {
            findings: all,
            ..self.head
        })
    }
}

/// Exactly [`Report`]'s JSON, the findings read back as they are written.
impl Serialize for BoundedReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let h = &self.head;
        let mut st = s.serialize_struct("Report", 6)?;
        st.serialize_field("bundleId", &h.bundle_id)?;
        st.serialize_field("tenantId", &h.tenant_id)?;
        st.serialize_field("ok", &h.ok)?;
        st.serialize_field("checks", &h.checks)?;
        st.serialize_field("findings", &AllFindings(self))?;
        st.serialize_field("stats", &h.stats)?;
        st.end()
    }
}

struct AllFindings<'a>(&'a BoundedReport);

impl Serialize for AllFindings<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        super::spill::serialize_read_back(s, self.0.len(), self.0.findings())
    }
}
