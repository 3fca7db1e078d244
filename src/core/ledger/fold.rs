//! The fold (SPEC 12): job state as a pure function of a *set* of events.
//!
//! Every part of a job's fold state is a join-semilattice (sets of candidates, the latest progress
//! report per DC, the acknowledging DCs), so applying events in any order, from any number of WALs,
//! and merging partial folds built in parallel all give the same state. Deciding the status happens
//! only when a view is asked for (the resolve module). Memory is proportional to jobs (and to the
//! events that compete for a decision), not to events: progress reports keep only the latest per DC.

use super::contest::{Candidate, Contest, Occurrence};
use super::dc_map::DcMap;
use super::event::{Event, JobProgressReported};
use super::job_id::JobId;
use super::progress::ProgressRef;
use super::seeded::SeededState;
use crate::core::hlc::Hlc;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Job states by job id (seeded hashing: job ids are read from WALs).
pub type JobMap = HashMap<JobId, JobFold, SeededState>;

/// One event read from a ledger, with where it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerRecord {
    pub event: Event,
    /// The frame payload the event was decoded from (or, for an event made here, its JCS text):
    /// the fold keeps this text and decodes the event from it again when asked.
    pub payload: Box<str>,
    pub at: Occurrence,
}

impl LedgerRecord {
    /// A record for an event made here (its payload is the event's JCS text).
    pub fn new(event: Event, at: Occurrence) -> LedgerRecord {
        let payload = event.payload_text().into_boxed_str();
        LedgerRecord { event, payload, at }
    }
}

/// A frame that could not be folded: where it is and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Finding {
    pub source: String,
    /// The frame's LSN (for damage that stops reading: the LSN the next frame would have had).
    pub lsn: Option<u64>,
    /// Byte offset of the frame in its file, when known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub offset: Option<u64>,
    pub message: String,
    /// A torn tail: a crash's last, unacknowledged write, left out of the fold. Reported, and
    /// no failure (nothing acknowledged is missing).
    #[serde(skip)]
    pub torn_tail: bool,
}

impl Finding {
    /// Where the frame is: `LSN 4 (byte offset 520)`, or what of it is known.
    pub fn location(&self) -> String {
        match (self.lsn, self.offset) {
            (Some(l), Some(o)) => format!("LSN {l} (byte offset {o})"),
            (Some(l), None) => format!("LSN {l}"),
            (None, Some(o)) => format!("byte offset {o}"),
            (None, None) => "at an unknown place".into(),
        }
    }
}

/// The latest progress report of one DC (greatest HLC; counts break an impossible tie).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LatestProgress {
    #[serde(with = "super::event::hlc_text")]
    pub hlc: Hlc,
    pub completed: u64,
    pub failed: u64,
}

/// One job's fold state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobFold {
    pub created: Contest,
    /// Per DC, the acceptances it sent.
    pub accepted: DcMap<Contest>,
    pub progress: DcMap<LatestProgress>,
    pub cancellation: Contest,
    /// Per DC, the latest HLC of its cancellation acknowledgement.
    pub cancel_acks: DcMap<AckSeen>,
    /// Completed, failed and timed-out events.
    pub outcome: Contest,
}

/// A DC's cancellation acknowledgement (the latest, by HLC).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AckSeen {
    #[serde(with = "super::event::hlc_text")]
    pub hlc: Hlc,
    pub at: Occurrence,
}

impl JobFold {
    pub fn apply(&mut self, rec: LedgerRecord) {
        match &rec.event {
            Event::JobProgressReported(p) => self.progress_report(p),
            Event::JobCancellationAcked(a) => {
                let seen = AckSeen {
                    hlc: a.hlc.clone(),
                    at: rec.at.clone(),
                };
                join_ack(&mut self.cancel_acks, a.dc_id.as_str(), seen);
            }
            Event::JobCreated(_) => self
                .created
                .offer(candidate(&rec.event, rec.payload, rec.at)),
            Event::JobAccepted(a) => {
                let dc = a.dc_id.as_str();
                let c = candidate(&rec.event, rec.payload, rec.at);
                self.accepted
                    .get_or_insert_with(dc, Contest::default)
                    .offer(c);
            }
            Event::JobCancellationRequested(_) => {
                let c = candidate(&rec.event, rec.payload, rec.at);
                self.cancellation.offer(c)
            }
            Event::JobCompleted(_) | Event::JobFailed(_) | Event::JobTimedOut(_) => self
                .outcome
                .offer(candidate(&rec.event, rec.payload, rec.at)),
        }
    }

    fn progress_report(&mut self, p: &JobProgressReported) {
        let report = LatestProgress {
            hlc: p.hlc.clone(),
            completed: p.completed.0,
            failed: p.failed.0,
        };
        join_progress(&mut self.progress, p.dc_id.as_str(), report);
    }

    /// A progress report read by the hot path ([`super::progress`]): the same join as applying
    /// the event, with the kept report updated in place (no allocation once the DC is known).
    pub fn progress_ref(&mut self, p: &ProgressRef<'_>) {
        let Some(cur) = self.progress.get_mut(p.dc_id) else {
            let report = LatestProgress {
                hlc: Hlc::new(p.hlc.physical, p.hlc.logical, p.hlc.node),
                completed: p.completed,
                failed: p.failed,
            };
            self.progress.get_or_insert_with(p.dc_id, || report);
            return;
        };
        let new = (p.hlc.physical, p.hlc.logical, p.hlc.node.as_bytes());
        let newer = (new, p.completed, p.failed) > (cur.hlc.sort_key(), cur.completed, cur.failed);
        if newer {
            cur.hlc.physical = p.hlc.physical;
            cur.hlc.logical = p.hlc.logical;
            if cur.hlc.node != p.hlc.node {
                cur.hlc.node.clear();
                cur.hlc.node.push_str(p.hlc.node);
            }
            cur.completed = p.completed;
            cur.failed = p.failed;
        }
    }

    /// Visits every occurrence the state remembers (to relabel sources).
    pub fn for_each_occurrence(&mut self, mut f: impl FnMut(&mut Occurrence)) {
        let contests = std::iter::once(&mut self.created)
            .chain(self.accepted.values_mut())
            .chain(std::iter::once(&mut self.cancellation))
            .chain(std::iter::once(&mut self.outcome));
        for c in contests {
            c.for_each_occurrence(&mut f);
        }
        for a in self.cancel_acks.values_mut() {
            f(&mut a.at);
        }
    }

    /// Joins another partial fold of the same job into this one.
    pub fn merge(&mut self, other: JobFold) {
        self.created.merge(other.created);
        for (dc, c) in other.accepted.into_entries() {
            self.accepted
                .get_or_insert_with(&dc, Contest::default)
                .merge(c);
        }
        for (dc, p) in other.progress.into_entries() {
            join_progress(&mut self.progress, &dc, p);
        }
        self.cancellation.merge(other.cancellation);
        for (dc, a) in other.cancel_acks.into_entries() {
            join_ack(&mut self.cancel_acks, &dc, a);
        }
        self.outcome.merge(other.outcome);
    }
}

fn candidate(event: &Event, payload: Box<str>, at: Occurrence) -> Candidate {
    Candidate::new(event, payload, at)
}

fn join_progress(map: &mut DcMap<LatestProgress>, dc: &str, p: LatestProgress) {
    match map.get_mut(dc) {
        Some(cur) if *cur >= p => {}
        Some(cur) => *cur = p,
        None => {
            map.get_or_insert_with(dc, || p);
        }
    }
}

fn join_ack(map: &mut DcMap<AckSeen>, dc: &str, a: AckSeen) {
    match map.get_mut(dc) {
        // Same HLC: the same event read twice; keep its smallest occurrence.
        Some(cur) if cur.hlc == a.hlc => {
            if a.at < cur.at {
                cur.at = a.at;
            }
        }
        Some(cur) if cur.hlc > a.hlc => {}
        Some(cur) => *cur = a,
        None => {
            map.get_or_insert_with(dc, || a);
        }
    }
}

/// How many findings a fold keeps: the first ones by (source, LSN), whatever the reading order;
/// the rest are counted. A WAL of millions of frames that cannot be folded (another program's
/// log, a corrupted copy) must not hold millions of messages in memory.
pub const KEPT_FINDINGS: usize = 10_000;

/// The fold of any number of ledgers: per-job state plus the frames that could not be folded.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    pub jobs: JobMap,
    /// The smallest [`KEPT_FINDINGS`] findings (a max-heap: the largest kept is the one to drop).
    findings: std::collections::BinaryHeap<Finding>,
    /// Findings seen past the kept ones.
    findings_not_kept: u64,
    events: u64,
}

impl PartialEq for Fold {
    fn eq(&self, other: &Fold) -> bool {
        self.jobs == other.jobs
            && self.events == other.events
            && self.findings_not_kept == other.findings_not_kept
            && self.findings() == other.findings()
    }
}

impl Fold {
    pub fn apply(&mut self, rec: LedgerRecord) {
        self.events += 1;
        let id = rec.event.job_id();
        if let Some(job) = self.jobs.get_mut(id.as_str()) {
            job.apply(rec);
        } else {
            let id = id.clone();
            self.jobs.entry(id).or_default().apply(rec);
        }
    }

    /// Applies an event without keeping where it was read: progress reports keep no occurrence, so
    /// the hot path of the fold allocates nothing for them.
    pub fn apply_event(&mut self, event: Event, payload: &[u8], at: impl FnOnce() -> Occurrence) {
        if let Event::JobProgressReported(p) = &event {
            self.events += 1;
            let id = p.job_id.as_str();
            match self.jobs.get_mut(id) {
                Some(job) => job.progress_report(p),
                None => self
                    .jobs
                    .entry(p.job_id.clone())
                    .or_default()
                    .progress_report(p),
            }
            return;
        }
        let payload = String::from_utf8_lossy(payload).into();
        self.apply(LedgerRecord {
            event,
            payload,
            at: at(),
        });
    }

    /// Applies a progress report read by the hot path (see [`JobFold::progress_ref`]).
    pub fn apply_progress(&mut self, p: &ProgressRef<'_>) {
        self.events += 1;
        match self.jobs.get_mut(p.job_id) {
            Some(job) => job.progress_ref(p),
            None => self
                .jobs
                .entry(JobId::from_checked(p.job_id))
                .or_default()
                .progress_ref(p),
        }
    }

    /// Keeps `f` if it is among the first [`KEPT_FINDINGS`] by (source, LSN); counts it if not.
    pub fn add_finding(&mut self, f: Finding) {
        if self.findings.len() < KEPT_FINDINGS {
            self.findings.push(f);
            return;
        }
        self.findings_not_kept += 1;
        if self.findings.peek().is_some_and(|largest| f < *largest) {
            self.findings.pop();
            self.findings.push(f);
        }
    }

    /// Findings seen but not kept (past the first [`KEPT_FINDINGS`] by source and LSN).
    pub fn findings_not_kept(&self) -> u64 {
        self.findings_not_kept
    }

    /// Joins another fold (of other WALs, or of another part of the same WAL) into this one.
    pub fn merge(&mut self, other: Fold) {
        self.events += other.events;
        self.findings_not_kept += other.findings_not_kept;
        for f in other.findings {
            self.add_finding(f);
        }
        for (id, job) in other.jobs {
            self.merge_job(id, job);
        }
    }

    /// Joins one job's partial fold into this one.
    pub fn merge_job(&mut self, id: JobId, job: JobFold) {
        match self.jobs.get_mut(id.as_str()) {
            Some(mine) => mine.merge(job),
            None => {
                self.jobs.insert(id, job);
            }
        }
    }

    /// The job states, and this fold without them (its findings and event count).
    pub fn take_jobs(self) -> (JobMap, Fold) {
        let rest = Fold {
            jobs: JobMap::default(),
            findings: self.findings,
            findings_not_kept: self.findings_not_kept,
            events: self.events,
        };
        (self.jobs, rest)
    }

    /// Findings in a stable order (source, LSN), whatever the order of reading.
    pub fn findings(&self) -> Vec<Finding> {
        let mut f = self.findings.clone().into_sorted_vec();
        f.dedup();
        f
    }

    pub(crate) fn relabel_findings(&mut self, from: &str, to: &str) {
        let mut kept = std::mem::take(&mut self.findings).into_vec();
        for f in &mut kept {
            if f.source == from {
                f.source = to.to_string();
            }
        }
        self.findings = kept.into();
    }

    /// How many events were applied (the same event read twice counts twice).
    pub fn events_applied(&self) -> u64 {
        self.events
    }

    /// Job ids in order.
    pub fn job_ids(&self) -> Vec<&JobId> {
        let mut ids: Vec<&JobId> = self.jobs.keys().collect();
        ids.sort();
        ids
    }

    pub fn job(&self, id: &str) -> Option<&JobFold> {
        self.jobs.get(id)
    }

    /// Restores a fold from checkpointed job states and findings (and how many were not kept).
    pub fn from_parts(
        jobs: JobMap,
        findings: Vec<Finding>,
        findings_not_kept: u64,
        events: u64,
    ) -> Fold {
        let mut fold = Fold {
            jobs,
            findings: Default::default(),
            findings_not_kept,
            events,
        };
        for f in findings {
            fold.add_finding(f);
        }
        fold
    }
}

/// Where a ledger reader puts what it folds: a [`Fold`], or one shared by parallel readers
/// (`ledger::parallel`).
pub trait FoldSink {
    /// A progress report read by the hot path.
    fn progress(&mut self, p: &ProgressRef<'_>);
    /// Any other event (see [`Fold::apply_event`]).
    fn event(&mut self, event: Event, payload: &[u8], at: impl FnOnce() -> Occurrence);
    fn finding(&mut self, f: Finding);
    /// Joins a fold restored from a checkpoint.
    fn join(&mut self, other: Fold);
    /// `bytes` more of the log were read (for progress displays; reported every MiB or so).
    fn read(&mut self, _bytes: u64) {}
}

/// A sink that also adds the bytes read to a shared counter (a console's progress).
pub struct Counted<'a, S> {
    pub inner: S,
    pub read: &'a std::sync::atomic::AtomicU64,
}

impl<S: FoldSink> FoldSink for Counted<'_, S> {
    fn progress(&mut self, p: &ProgressRef<'_>) {
        self.inner.progress(p)
    }
    fn event(&mut self, event: Event, payload: &[u8], at: impl FnOnce() -> Occurrence) {
        self.inner.event(event, payload, at)
    }
    fn finding(&mut self, f: Finding) {
        self.inner.finding(f)
    }
    fn join(&mut self, other: Fold) {
        self.inner.join(other)
    }
    fn read(&mut self, bytes: u64) {
        self.read
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}

impl<S: FoldSink> FoldSink for &mut S {
    fn progress(&mut self, p: &ProgressRef<'_>) {
        (**self).progress(p)
    }
    fn event(&mut self, event: Event, payload: &[u8], at: impl FnOnce() -> Occurrence) {
        (**self).event(event, payload, at)
    }
    fn finding(&mut self, f: Finding) {
        (**self).finding(f)
    }
    fn join(&mut self, other: Fold) {
        (**self).join(other)
    }
    fn read(&mut self, bytes: u64) {
        (**self).read(bytes)
    }
}

impl FoldSink for Fold {
    fn progress(&mut self, p: &ProgressRef<'_>) {
        self.apply_progress(p)
    }
    fn event(&mut self, event: Event, payload: &[u8], at: impl FnOnce() -> Occurrence) {
        self.apply_event(event, payload, at)
    }
    fn finding(&mut self, f: Finding) {
        self.add_finding(f)
    }
    fn join(&mut self, other: Fold) {
        self.merge(other)
    }
}
