//! Triage reports: what an operator looked at (a bundle, a merge plan, a tenant chain), what the
//! engine found (verdict, findings with expected and actual, the plan, each conflict's sides with
//! their provenance) and what the operator decided. Written as a DSSE envelope (JSON; signed with
//! the local key when there is one) and a Markdown rendering of the same report; `verify` checks
//! both (`airlock triage verify FILE`).
//!
//! The report is built here from the engine's own results (`verify::Report`, `ImportPlan`,
//! `ChainReport`); the console only picks which and adds the operator's decision.

mod markdown;
mod sign;

pub use markdown::to_markdown;
pub use sign::{read_envelope, verify_file, write_report, TriageVerdict, Written};

use crate::core::chain::verify::ChainReport;
use crate::core::import::{ConflictReport, ImportPlan};
use crate::core::verify::{Finding, Report};
use serde::{Deserialize, Serialize};

/// The DSSE payload type of a triage report.
pub const TRIAGE_PAYLOAD_TYPE: &str = "application/vnd.airlock.triage.v1+json";
/// The `format` field of every report.
pub const TRIAGE_FORMAT: &str = "airlock-triage/1";
/// The largest report file `verify` reads.
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// Errors reading, writing or checking a report.
#[derive(Debug, thiserror::Error)]
pub enum TriageError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: larger than {MAX_REPORT_BYTES} bytes; not a triage report")]
    TooLarge { path: String },
    #[error("{path}: not a triage report ({detail})")]
    Malformed { path: String, detail: String },
    #[error("signing key {path}: {detail}")]
    Key { path: String, detail: String },
}

/// What the report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Subject {
    /// One bundle (the Chain screen).
    Bundle,
    /// A merge plan of bundles against the store (the Merge preview).
    MergePlan,
    /// A tenant chain in the store (the Scheduler screen).
    TenantChain,
}

/// One finding as the report keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriageFinding {
    pub kind: String,
    pub message: String,
    pub node_id: Option<String>,
    pub index: Option<u64>,
    pub job_id: Option<String>,
    pub expected: Option<String>,
    pub actual: Option<String>,
}

impl From<&Finding> for TriageFinding {
    fn from(f: &Finding) -> Self {
        TriageFinding {
            kind: f.kind.as_str().to_string(),
            message: f.message.clone(),
            node_id: f.node_id.clone(),
            index: f.index,
            job_id: f.job_id.clone(),
            expected: f.expected.clone(),
            actual: f.actual.clone(),
        }
    }
}

/// One side of a conflict with its provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriageSide {
    /// `input` or `chain`.
    pub source: String,
    pub payload_hash: String,
    pub bundle_id: Option<String>,
    pub file: Option<String>,
    pub node_id: Option<String>,
    pub index: Option<u64>,
    pub t_hlc: Option<String>,
    pub chain_seq: Option<u64>,
}

/// A jobId with more than one payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriageConflict {
    pub job_id: String,
    pub sides: Vec<TriageSide>,
}

impl From<&ConflictReport> for TriageConflict {
    fn from(c: &ConflictReport) -> Self {
        TriageConflict {
            job_id: c.job_id.clone(),
            sides: c
                .sides
                .iter()
                .map(|s| TriageSide {
                    source: s.source.to_string(),
                    payload_hash: s.payload_hash.clone(),
                    bundle_id: s.origin.as_ref().map(|o| o.bundle_id.clone()),
                    file: s.origin.as_ref().map(|o| o.file.clone()),
                    node_id: s.origin.as_ref().map(|o| o.node_id.clone()),
                    index: s.origin.as_ref().map(|o| o.index),
                    t_hlc: s.origin.as_ref().map(|o| o.t_hlc.clone()),
                    chain_seq: s.chain_seq,
                })
                .collect(),
        }
    }
}

/// The operator's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// What was decided: `import`, `reject`, `quarantine`, `escalate`, ...
    pub action: String,
    /// Why, in the operator's words (may be empty).
    pub note: String,
}

/// A triage report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriageReport {
    pub format: String,
    pub created_at: String,
    pub operator: String,
    pub subject: Subject,
    /// The files (bundles) or the tenant the report is about.
    pub inputs: Vec<String>,
    /// The engine's verdict in one word (`ok`, `findings`, `conflicts`, `refused`, `planned`,
    /// `intact`, `broken`, ...).
    pub verdict: String,
    pub findings: Vec<TriageFinding>,
    /// The plan's summary lines (`report_text::import_lines`), for a merge plan.
    pub plan: Vec<String>,
    pub conflicts: Vec<TriageConflict>,
    pub decision: Decision,
}

impl TriageReport {
    fn new(subject: Subject, inputs: Vec<String>, verdict: &str, decision: Decision) -> Self {
        TriageReport {
            format: TRIAGE_FORMAT.to_string(),
            created_at: crate::core::time::now_rfc3339(),
            operator: crate::core::audit::operator(),
            subject,
            inputs,
            verdict: verdict.to_string(),
            findings: Vec::new(),
            plan: Vec::new(),
            conflicts: Vec::new(),
            decision,
        }
    }

    /// A bundle's verification report.
    pub fn for_bundle(file: &str, report: &Report, decision: Decision) -> Self {
        let verdict = if report.ok { "ok" } else { "findings" };
        let mut r = TriageReport::new(Subject::Bundle, vec![file.to_string()], verdict, decision);
        r.findings = report.findings.iter().map(TriageFinding::from).collect();
        r
    }

    /// A file that could not be verified as a bundle (not one, truncated or unreadable): verdict
    /// `not-a-bundle` and the reason as its one finding.
    pub fn for_unreadable(file: &str, reason: &str, decision: Decision) -> Self {
        let mut r = TriageReport::new(
            Subject::Bundle,
            vec![file.to_string()],
            "not-a-bundle",
            decision,
        );
        r.findings.push(TriageFinding {
            kind: "not-a-bundle".into(),
            message: reason.to_string(),
            node_id: None,
            index: None,
            job_id: None,
            expected: None,
            actual: None,
        });
        r
    }

    /// A merge plan: its status word, each input's findings, the summary lines and the conflicts.
    pub fn for_plan(plan: &ImportPlan, lines: Vec<String>, decision: Decision) -> Self {
        let verdict = if !plan.conflicts.is_empty() {
            "conflicts"
        } else {
            plan_status_word(plan)
        };
        let inputs = plan.bundles.iter().map(|b| b.file.clone()).collect();
        let mut r = TriageReport::new(Subject::MergePlan, inputs, verdict, decision);
        r.findings = plan
            .bundles
            .iter()
            .flat_map(|b| b.verification.findings.iter())
            .map(TriageFinding::from)
            .collect();
        r.plan = lines;
        r.conflicts = plan.conflicts.iter().map(TriageConflict::from).collect();
        r
    }

    /// A tenant chain's verification.
    pub fn for_chain(report: &ChainReport, decision: Decision) -> Self {
        let verdict = if report.ok { "intact" } else { "broken" };
        let mut r = TriageReport::new(
            Subject::TenantChain,
            vec![report.tenant_id.clone()],
            verdict,
            decision,
        );
        r.findings = report.findings.iter().map(TriageFinding::from).collect();
        r
    }
}

fn plan_status_word(plan: &ImportPlan) -> &'static str {
    use crate::core::import::ImportStatus;
    match plan.status {
        ImportStatus::Imported => "imported",
        ImportStatus::NothingToDo => "nothing-to-do",
        ImportStatus::Refused => "refused",
        ImportStatus::Verified => "verified",
        ImportStatus::Planned => "planned",
    }
}
