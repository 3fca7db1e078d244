//! The verification report (`airlock jobs verify --json` prints exactly [`Report`]) and the
//! questions its consumers ask of it.

use super::finding::{Finding, FindingKind};
use serde::Serialize;
use std::fmt;

/// The state of one of the five content checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckState {
    Pass,
    Fail,
}

/// The state of the signature check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignatureState {
    /// Signed by a trusted key, and the signature verifies.
    Pass,
    /// The signature does not verify.
    Fail,
    /// Not signed.
    Absent,
    /// Signed by a key not in the trust store.
    Untrusted,
}

impl CheckState {
    /// The contract word (`pass`, `fail`).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckState::Pass => "pass",
            CheckState::Fail => "fail",
        }
    }
}

impl SignatureState {
    /// The contract word (`pass`, `fail`, `absent`, `untrusted`).
    pub fn as_str(self) -> &'static str {
        match self {
            SignatureState::Pass => "pass",
            SignatureState::Fail => "fail",
            SignatureState::Absent => "absent",
            SignatureState::Untrusted => "untrusted",
        }
    }
}

impl fmt::Display for CheckState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for SignatureState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Compares with a contract word (tests and JSON-minded callers).
impl PartialEq<&str> for CheckState {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<&str> for SignatureState {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// The six checks of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checks {
    pub schema: CheckState,
    pub manifest_digest: CheckState,
    pub chain: CheckState,
    pub links: CheckState,
    pub chain_head: CheckState,
    pub signature: SignatureState,
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
            if let Some(cut) = prefix_cut(f) {
                *slot = (*slot).min(cut);
            }
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

    /// What [`Report::unwaivable`] holds, by cause (each needs its own remedy).
    pub fn unwaivable_causes(&self) -> Unwaivable {
        let mut causes = Unwaivable::default();
        for f in self.unwaivable() {
            match f.kind {
                FindingKind::SchemaInvalid => causes.header = true,
                _ => causes.signature = true,
            }
        }
        causes
    }

    /// The first finding in file order (the first break), if any.
    pub fn first_break(&self) -> Option<&Finding> {
        self.findings.first()
    }

    /// The SPEC 6 JSON object of a bundle that could not be verified at all (a refused portable
    /// export: its bundle was never read): every member there, `ok` false, no findings, and what
    /// does not apply null (the ids, each check and each count).
    pub fn unverified_json() -> serde_json::Value {
        let report = Report {
            bundle_id: None,
            tenant_id: None,
            ok: false,
            checks: Checks {
                schema: CheckState::Fail,
                manifest_digest: CheckState::Fail,
                chain: CheckState::Fail,
                links: CheckState::Fail,
                chain_head: CheckState::Fail,
                signature: SignatureState::Absent,
            },
            findings: Vec::new(),
            stats: Stats {
                nodes: 0,
                entries: 0,
                bytes: 0,
                signed_by: None,
                signer: None,
                computed_manifest_digest: String::new(),
            },
            log_nodes: Vec::new(),
            log_entries: Vec::new(),
        };
        // The members come from the report itself, so they cannot drift from its shape.
        let mut json = serde_json::to_value(&report).expect("a report is JSON");
        for group in ["checks", "stats"] {
            if let Some(members) = json.get_mut(group).and_then(|g| g.as_object_mut()) {
                members
                    .values_mut()
                    .for_each(|v| *v = serde_json::Value::Null);
            }
        }
        json
    }
}

/// Why `--force` cannot import a bundle ([`Report::unwaivable`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unwaivable {
    /// A signature is missing, invalid or untrusted: the bundle must be signed by a trusted key.
    pub signature: bool,
    /// The bundle header is damaged (a schema problem outside the logs: a repeated, missing or
    /// ill-typed header field): the bundle must be exported again.
    pub header: bool,
}

impl Unwaivable {
    /// Both causes of both reports.
    pub fn or(self, other: Unwaivable) -> Unwaivable {
        Unwaivable {
            signature: self.signature || other.signature,
            header: self.header || other.header,
        }
    }
}

/// How many leading entries of its log a finding leaves trusted (`None`: it cuts nothing).
fn prefix_cut(f: &Finding) -> Option<usize> {
    match (f.kind, f.index) {
        (FindingKind::TailTruncated, _) => None,
        (FindingKind::HeadMismatch, Some(i)) => Some((i as usize).saturating_add(1)),
        (_, Some(i)) => Some(i as usize),
        (_, None) => Some(0),
    }
}

/// What a report's text says of one log's findings before listing them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogTally {
    /// Findings of the log.
    pub count: usize,
    /// Index and kind of its first finding at an entry.
    pub first_break: Option<(u64, FindingKind)>,
    /// The least [`Report::verified_prefix`] its findings allow (`None`: the whole log).
    pub cut: Option<usize>,
}

impl LogTally {
    /// Counts `f`, the log's next finding in report order.
    pub fn add(&mut self, f: &Finding) {
        self.count += 1;
        if self.first_break.is_none() {
            self.first_break = f.index.map(|i| (i, f.kind));
        }
        if let Some(cut) = prefix_cut(f) {
            self.cut = Some(self.cut.map_or(cut, |c| c.min(cut)));
        }
    }

    /// Counts `f`, one of the log's own findings (sorted by entry: the first break is the least),
    /// in any order.
    pub fn add_any_order(&mut self, f: &Finding) {
        self.count += 1;
        if let Some(i) = f.index {
            let first = self.first_break.get_or_insert((i, f.kind));
            *first = (*first).min((i, f.kind));
        }
        if let Some(cut) = prefix_cut(f) {
            self.cut = Some(self.cut.map_or(cut, |c| c.min(cut)));
        }
    }

    /// This log's tally followed by `later`, the tally of its findings after these.
    pub fn then(&self, later: &LogTally) -> LogTally {
        LogTally {
            count: self.count + later.count,
            first_break: self.first_break.or(later.first_break),
            cut: match (self.cut, later.cut) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    /// The log's verified prefix, for a log of `entries` entries.
    pub fn prefix(&self, entries: usize) -> usize {
        self.cut.map_or(entries, |c| c.min(entries))
    }
}
