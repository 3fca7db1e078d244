//! Deciding a job's status from its fold state (SPEC 12 conflict priority), and explaining it.
//!
//! 1. A cancellation request beats every completed, failed and timed-out event (rule `cancel-wins`);
//!    the job is `cancelling`, and `cancelled` once every assigned DC has acknowledged.
//! 2. Between events of the same kind (two creations, two cancellations, two acceptances by one
//!    DC) the greater fence token wins (`fence`), then the greater HLC (`hlc`).
//! 3. Between completed, failed and timed-out events the greater HLC wins (`hlc`).
//! 4. An acceptance whose fence token is below the job's (the winning creation's) is stale and does
//!    not count (`fence`).
//!
//! Two distinct events with equal fence token and HLC cannot come from a correct node (an HLC names
//! one event); they are ordered by their payload bytes so the result stays deterministic
//! (`tie-break`). Every decision keeps the events that lost.

use super::contest::{Candidate, Contest};
use super::event::{Event, EventType};
use super::fold::{Fold, JobFold};
use serde::Serialize;
use std::collections::BTreeMap;

/// A job's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Created,
    Accepted,
    Running,
    Completed,
    Failed,
    TimedOut,
    Cancelling,
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Created => "created",
            Status::Accepted => "accepted",
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::TimedOut => "timed_out",
            Status::Cancelling => "cancelling",
            Status::Cancelled => "cancelled",
        }
    }
}

/// One DC's latest progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgressView {
    pub completed: u64,
    pub failed: u64,
}

/// A job's view (SPEC 12), field order as in `vectors/ledger/expected.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub status: Status,
    /// The winning creation's fence token; null while no creation has been seen.
    pub fence_token: Option<u64>,
    pub assigned_dcs: Vec<String>,
    pub accepted_dcs: Vec<String>,
    pub cancel_acked_dcs: Vec<String>,
    pub decided_by: Option<String>,
    pub progress: BTreeMap<String, ProgressView>,
}

/// The rule that decided between two events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    TieBreak,
    Hlc,
    Fence,
    CancelWins,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::TieBreak => "tie-break",
            Rule::Hlc => "hlc",
            Rule::Fence => "fence",
            Rule::CancelWins => "cancel-wins",
        }
    }
}

/// A reference to one event: what, when, and where it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRef {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub hlc: String,
    pub fence_token: Option<u64>,
    pub source: String,
    pub lsn: u64,
}

impl EventRef {
    pub fn of(c: &Candidate) -> EventRef {
        EventRef {
            kind: c.event_type().name(),
            hlc: c.hlc().to_string(),
            fence_token: c.fence_token().map(|f| f.0),
            source: c.at.source.to_string(),
            lsn: c.at.lsn,
        }
    }
}

/// A losing event and the rule it lost by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Loser {
    pub event: EventRef,
    pub rule: Rule,
}

/// One decided conflict: the winner, every loser, and the rule that decided (against the
/// strongest loser).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub job_id: String,
    /// `creation`, `acceptance DC`, `cancellation` or `outcome`.
    pub subject: String,
    pub rule: Rule,
    pub winner: EventRef,
    pub losers: Vec<Loser>,
}

/// A job's view with the event that decided it and every conflict on the way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolution {
    pub job_id: String,
    pub view: JobView,
    pub deciding: Option<EventRef>,
    pub decisions: Vec<Decision>,
}

fn rule_between(winner: &Candidate, loser: &Candidate) -> Rule {
    if winner.fence_token() != loser.fence_token() {
        Rule::Fence
    } else if winner.hlc() != loser.hlc() {
        Rule::Hlc
    } else {
        Rule::TieBreak
    }
}

/// The decision of a contest with more than one candidate.
fn contest_decision(job_id: &str, subject: String, contest: &Contest) -> Option<Decision> {
    let winner = contest.winner()?;
    let losers: Vec<Loser> = contest
        .losers()
        .map(|l| Loser {
            event: EventRef::of(l),
            rule: rule_between(winner, l),
        })
        .collect();
    let rule = losers.first()?.rule;
    Some(Decision {
        job_id: job_id.to_string(),
        subject,
        rule,
        winner: EventRef::of(winner),
        losers,
    })
}

/// Everything decided about one job.
pub fn resolve(job_id: &str, job: &JobFold) -> Resolution {
    let mut decisions = Vec::new();
    let created = job.created.winner();
    let job_fence = created.and_then(|c| c.fence_token()).map(|f| f.0);
    decisions.extend(contest_decision(job_id, "creation".into(), &job.created));
    // The winning creation's payload was decoded when it was folded (or checked against its
    // event when a checkpoint was read), so it decodes again here.
    let mut assigned: Vec<String> = match created.map(Candidate::event) {
        Some(Ok(Event::JobCreated(c))) => c.assigned_dcs.into_iter().map(|d| d.0).collect(),
        _ => Vec::new(),
    };
    assigned.sort();
    let accepted = accepted_dcs(job_id, job, created, job_fence, &mut decisions);
    decisions.extend(contest_decision(
        job_id,
        "cancellation".into(),
        &job.cancellation,
    ));
    let acked: Vec<String> = job.cancel_acks.keys().map(String::from).collect();
    let (status, deciding) = match job.cancellation.winner() {
        Some(cancel) => {
            if let Some(d) = cancel_wins(job_id, cancel, &job.outcome) {
                decisions.push(d);
            }
            let all_acked =
                !assigned.is_empty() && assigned.iter().all(|dc| job.cancel_acks.contains_key(dc));
            let status = if all_acked {
                Status::Cancelled
            } else {
                Status::Cancelling
            };
            (status, Some(cancel))
        }
        None => match job.outcome.winner() {
            Some(outcome) => {
                decisions.extend(contest_decision(job_id, "outcome".into(), &job.outcome));
                (outcome_status(outcome.event_type()), Some(outcome))
            }
            None if !job.progress.is_empty() => (Status::Running, None),
            None if !accepted.is_empty() => (Status::Accepted, None),
            None => (Status::Created, None),
        },
    };
    let view = JobView {
        status,
        fence_token: job_fence,
        assigned_dcs: assigned,
        accepted_dcs: accepted,
        cancel_acked_dcs: acked,
        decided_by: deciding.map(|c| c.hlc().to_string()),
        progress: job
            .progress
            .iter()
            .map(|(dc, p)| {
                let v = ProgressView {
                    completed: p.completed,
                    failed: p.failed,
                };
                (dc.to_string(), v)
            })
            .collect(),
    };
    Resolution {
        job_id: job_id.to_string(),
        view,
        deciding: deciding.map(EventRef::of),
        decisions,
    }
}

/// DCs with a current acceptance; records acceptance conflicts and stale acceptances.
fn accepted_dcs(
    job_id: &str,
    job: &JobFold,
    created: Option<&Candidate>,
    job_fence: Option<u64>,
    decisions: &mut Vec<Decision>,
) -> Vec<String> {
    let mut accepted = Vec::new();
    for (dc, contest) in job.accepted.iter() {
        let subject = format!("acceptance {dc}");
        let fence = |c: &Candidate| c.fence_token().map_or(0, |f| f.0);
        let stale = |c: &Candidate| job_fence.is_some_and(|jf| fence(c) < jf);
        match (contest.winner(), created) {
            (Some(w), Some(creation)) if stale(w) => {
                let losers = contest
                    .all()
                    .rev()
                    .map(|l| Loser {
                        event: EventRef::of(l),
                        rule: Rule::Fence,
                    })
                    .collect();
                decisions.push(Decision {
                    job_id: job_id.to_string(),
                    subject,
                    rule: Rule::Fence,
                    winner: EventRef::of(creation),
                    losers,
                });
            }
            (Some(_), _) => {
                decisions.extend(contest_decision(job_id, subject, contest));
                accepted.push(dc.to_string());
            }
            (None, _) => {}
        }
    }
    accepted
}

fn cancel_wins(job_id: &str, cancel: &Candidate, outcome: &Contest) -> Option<Decision> {
    if outcome.is_empty() {
        return None;
    }
    let losers = outcome
        .all()
        .rev()
        .map(|l| Loser {
            event: EventRef::of(l),
            rule: Rule::CancelWins,
        })
        .collect();
    Some(Decision {
        job_id: job_id.to_string(),
        subject: "outcome".into(),
        rule: Rule::CancelWins,
        winner: EventRef::of(cancel),
        losers,
    })
}

fn outcome_status(kind: EventType) -> Status {
    match kind {
        EventType::JobFailed => Status::Failed,
        EventType::JobTimedOut => Status::TimedOut,
        _ => Status::Completed,
    }
}

/// The `{"jobs": {...}}` document of `ledger fold --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Views {
    pub jobs: BTreeMap<String, JobView>,
}

impl Fold {
    /// Every job's resolution, in job-id order.
    pub fn resolutions(&self) -> Vec<Resolution> {
        self.job_ids()
            .into_iter()
            .filter_map(|id| self.job(id.as_str()).map(|j| resolve(id.as_str(), j)))
            .collect()
    }

    pub fn resolution(&self, job_id: &str) -> Option<Resolution> {
        self.job(job_id).map(|j| resolve(job_id, j))
    }

    /// The views of SPEC 12.
    pub fn views(&self) -> Views {
        Views {
            jobs: self
                .resolutions()
                .into_iter()
                .map(|r| (r.job_id, r.view))
                .collect(),
        }
    }

    /// Every decided conflict, in job-id order.
    pub fn decisions(&self) -> Vec<Decision> {
        self.resolutions()
            .into_iter()
            .flat_map(|r| r.decisions)
            .collect()
    }
}
