//! Verifying a stored tenant chain and its snapshots ([`verify_chain`]), over either store: the
//! findings of SPEC section 6 at chain positions, the stored head, every snapshot's Merkle root.

use crate::core::chain::{scheduler_chain_digest, Action, Digest32};
use crate::core::merkle::{self, RootBuilder};
use crate::core::store::backend::{Backend, ChainPage, ChainRow, StoreTx, TxKind};
use crate::core::store::rules::unhex_link as decode;
use crate::core::store::scheduler::{ChainHead, SchedulerError, Snapshot};
use crate::core::verify::chain_rows::{PageChecks, RowCheck};
use crate::core::verify::{ChainDiagnosis, ChainEntry, Finding, FindingKind, HeadClaim, LinkText};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

/// The result of checking one stored snapshot.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotCheck {
    pub id: i64,
    pub from_seq: u64,
    pub entry_count: u64,
    pub ok: bool,
    pub expected_root: String,
    pub computed_root: String,
    pub message: Option<String>,
}

/// `chain verify`: every link, the stored head, every snapshot root.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainReport {
    pub tenant_id: String,
    pub ok: bool,
    pub length: u64,
    pub stored_length: Option<u64>,
    pub head: Option<String>,
    pub findings: Vec<Finding>,
    pub snapshots: Vec<SnapshotCheck>,
}

/// Recomputes every link of a tenant chain and its head (findings of SPEC section 6, positions are
/// chain positions) and every snapshot's Merkle root. `progress` counts entries checked. Reads one
/// consistent view of the store.
///
/// The scheduler chain is in append order; HLC order is not checked across it because a later
/// import may carry earlier offline timestamps.
///
/// Two threads: this one reads pages of rows from the store and applies what depends on earlier
/// rows, in chain order; a second one runs each page's own row checks and hashing
/// ([`PageChecks`]) meanwhile.
pub fn verify_chain(
    store: &dyn Backend,
    tenant: &str,
    progress: Option<Arc<AtomicU64>>,
) -> Result<ChainReport, SchedulerError> {
    let mut read = store.begin(TxKind::Read)?;
    let tx = &mut *read;
    let head = tx.chain_head(tenant)?;
    let snaps = tx.snapshots(tenant)?;
    let mut v = ChainVerifier {
        tenant,
        snaps: &snaps,
        diag: ChainDiagnosis::new(None, None, LinkText::Hex),
        findings: Vec::new(),
        snap_idx: 0,
        builder: None,
        snap_checks: Vec::with_capacity(snaps.len()),
        n: 0,
        last_hlc: None,
    };
    std::thread::scope(|s| {
        let (work_tx, work_rx) = sync_channel::<Batch>(BATCHES);
        let (done_tx, done_rx) = sync_channel::<Batch>(BATCHES);
        let spawned = std::thread::Builder::new()
            .name("chain-check".into())
            .spawn_scoped(s, move || {
                for mut b in work_rx {
                    b.checks.check(&b.page, b.first, b.leaves);
                    if done_tx.send(b).is_err() {
                        break;
                    }
                }
            });
        let mut checker = match spawned {
            Ok(_) => Checker::Thread(work_tx, done_rx),
            // No second thread: check each page on this one.
            Err(_) => Checker::Inline(VecDeque::new()),
        };
        read_and_apply(tx, tenant, &mut v, &mut checker, progress.as_deref())
    })?;
    if let Some(p) = &progress {
        p.store(v.n, Ordering::Relaxed);
    }
    drop(read);
    let counted = head.is_some() || v.n > 0;
    let report = v.finish(head);
    if counted {
        crate::core::metrics::record_quietly(
            store,
            &[crate::core::metrics::Event::ChainVerified { ok: report.ok }],
        );
    }
    Ok(report)
}

/// Pages in rotation between the reading and the checking thread.
const BATCHES: usize = 3;

/// A page of rows, its first chain position, whether a snapshot covers any of it (its Merkle
/// leaves are wanted), and its row checks once made.
#[derive(Default)]
struct Batch {
    page: ChainPage,
    first: u64,
    leaves: bool,
    checks: PageChecks,
}

/// Where pages are checked: on the second thread, or (when it could not be started) here.
enum Checker {
    Thread(SyncSender<Batch>, Receiver<Batch>),
    Inline(VecDeque<Batch>),
}

impl Checker {
    /// Hands a page over; false when the checking thread is gone (it panicked: the scope reports
    /// it).
    fn send(&mut self, mut b: Batch) -> bool {
        match self {
            Checker::Thread(work, _) => work.send(b).is_ok(),
            Checker::Inline(done) => {
                b.checks.check(&b.page, b.first, b.leaves);
                done.push_back(b);
                true
            }
        }
    }

    /// The oldest page handed over, checked.
    fn recv(&mut self) -> Option<Batch> {
        match self {
            Checker::Thread(_, done) => done.recv().ok(),
            Checker::Inline(done) => done.pop_front(),
        }
    }
}

/// The reading thread's loop: reads pages while a batch is free, hands them to the checker, and
/// applies checked pages in order. Returns when every page is applied (or on a store error).
fn read_and_apply(
    tx: &mut dyn StoreTx,
    tenant: &str,
    v: &mut ChainVerifier<'_>,
    checker: &mut Checker,
    progress: Option<&AtomicU64>,
) -> Result<(), SchedulerError> {
    let mut free: Vec<Batch> = (0..BATCHES).map(|_| Batch::default()).collect();
    let (mut pending, mut from, mut next_pos, mut more) = (0usize, 0u64, 0u64, true);
    while more || pending > 0 {
        if more {
            if let Some(mut b) = free.pop() {
                tx.chain_page(tenant, from, i64::MAX as u64, &mut b.page)?;
                let Some(last) = b.page.last_seq() else {
                    more = false;
                    continue;
                };
                b.first = next_pos;
                next_pos += b.page.len() as u64;
                b.leaves = v.snaps.iter().any(|s| {
                    s.from_seq < next_pos && b.first < s.from_seq.saturating_add(s.entry_count)
                });
                match last.checked_add(1) {
                    Some(next) => from = next,
                    None => more = false,
                }
                if !checker.send(b) {
                    break;
                }
                pending += 1;
                continue;
            }
        }
        let Some(b) = checker.recv() else { break };
        pending -= 1;
        for k in 0..b.page.len() {
            v.row(tx, b.page.get(k), &b.checks, k)?;
            if let Some(p) = progress {
                if v.n.is_multiple_of(4096) {
                    p.store(v.n, Ordering::Relaxed);
                }
            }
        }
        free.push(b);
    }
    Ok(())
}

/// The state of one verification pass over a chain, row by row.
struct ChainVerifier<'a> {
    tenant: &'a str,
    snaps: &'a [Snapshot],
    diag: ChainDiagnosis,
    findings: Vec<Finding>,
    snap_idx: usize,
    /// The Merkle root so far of the snapshot being checked, and the problem found with it.
    builder: Option<(RootBuilder, String)>,
    snap_checks: Vec<SnapshotCheck>,
    n: u64,
    last_hlc: Option<String>,
}

impl ChainVerifier<'_> {
    /// Applies the next stored row (chain position `self.n`), row `k` of a page checked into `c`.
    fn row(
        &mut self,
        tx: &mut dyn StoreTx,
        r: ChainRow<'_>,
        c: &PageChecks,
        k: usize,
    ) -> Result<(), SchedulerError> {
        let i = self.n;
        let check = c.rows[k];
        self.findings.extend_from_slice(c.findings_of(k));
        let recomputed = match check.recomputed {
            Some((a, payload, l)) => self.recompute(tx, &r, &check, a, (payload, l))?,
            None => None,
        };
        if let Some(f) = self.diag.push(
            ChainEntry {
                link: check.link,
                prev: check.prev,
                recomputed,
                hlc: None,
                job_id: check.job,
            },
            Some(r.t_hlc),
        ) {
            self.findings.push(f);
        }
        self.snapshot_leaf(i, r.chain_link, &check);
        let last_hlc = self.last_hlc.get_or_insert_with(String::new);
        last_hlc.clear();
        last_hlc.push_str(r.t_hlc);
        self.n += 1;
        Ok(())
    }

    /// The link recomputed from the row's fields (`l`, with action `a` and the payload's SHA-256
    /// `payload`). When
    /// it differs from the stored link but the stored link holds with the payloadHash recorded at
    /// enqueue, only the payload changed: a `payload-modified` finding, and the stored link counts
    /// as recomputed.
    fn recompute(
        &mut self,
        tx: &mut dyn StoreTx,
        r: &ChainRow<'_>,
        c: &RowCheck,
        a: Action,
        (payload, l): (Digest32, Digest32),
    ) -> Result<Option<Digest32>, SchedulerError> {
        let i = self.n;
        let (link, mut d) = (c.link, Some(l));
        let modified = |what: String, expected: String, actual: String| {
            Finding::new(FindingKind::PayloadModified, what)
                .at(None, None, Some(i))
                .job(Some(r.job_id.to_string()))
                .values(Some(expected), Some(actual))
        };
        if d != link && link.is_some() {
            let recorded = match c.job {
                Some(j) => tx.job(self.tenant, &j)?.map(|j| j.payload_hash),
                None => None,
            };
            if let Some(h) = recorded {
                let l2 = scheduler_chain_digest(
                    r.t_hlc,
                    r.job_id,
                    a,
                    r.prev_chain_link,
                    &hex::encode(h),
                );
                if Some(l2) == link {
                    self.findings.push(modified(
                        format!("chain entry {i}'s payload was changed after it was written: its SHA-256 no longer matches the digest its link was computed with"),
                        hex::encode(h),
                        hex::encode(payload),
                    ));
                    d = link;
                }
            }
        } else if d == link && !r.payload_agrees {
            self.findings.push(modified(
                format!("chain entry {i}'s stored JSONB payload no longer holds the value of its canonical payload text (the link still holds for the text)"),
                r.payload.to_string(),
                "a different JSONB value".into(),
            ));
        }
        Ok(d)
    }

    /// Feeds position `i` into the snapshot covering it (snapshots are disjoint, in chain order).
    fn snapshot_leaf(&mut self, i: u64, link_text: &str, c: &RowCheck) {
        let Some(s) = self.snaps.get(self.snap_idx) else {
            return;
        };
        if !s.covers(i) {
            return;
        }
        let last = s.from_seq + s.entry_count - 1;
        let (b, problem) = self
            .builder
            .get_or_insert_with(|| (RootBuilder::default(), String::new()));
        if i == s.from_seq && link_text != s.from_chain_link && problem.is_empty() {
            *problem = format!(
                "fromChainLink {} is not the link of entry {i} ({link_text})",
                s.from_chain_link
            );
        }
        if i == last && link_text != s.to_chain_link && problem.is_empty() {
            *problem = format!(
                "toChainLink {} is not the link of entry {i} ({link_text})",
                s.to_chain_link
            );
        }
        b.push(
            c.leaf
                .unwrap_or_else(|| merkle::leaf_hash(&c.link.unwrap_or_default())),
        );
        if i == last {
            if let Some((b, problem)) = self.builder.take() {
                self.snap_checks.push(check_snapshot(s, &b, problem));
            }
            self.snap_idx += 1;
        }
    }

    /// Snapshots not completed by the rows, then the head.
    fn finish(mut self, head: Option<ChainHead>) -> ChainReport {
        let n = self.n;
        if let Some((b, problem)) = self.builder.take() {
            let s = &self.snaps[self.snap_idx];
            let problem = if problem.is_empty() {
                format!(
                    "the snapshot covers entries {}..{} but the chain has only {n}",
                    s.from_seq,
                    s.from_seq + s.entry_count
                )
            } else {
                problem
            };
            self.snap_checks.push(check_snapshot(s, &b, problem));
            self.snap_idx += 1;
        }
        for s in self.snaps.iter().skip(self.snap_idx) {
            if self.snap_checks.iter().any(|c| c.id == s.id) {
                continue;
            }
            self.snap_checks.push(SnapshotCheck {
                id: s.id,
                from_seq: s.from_seq,
                entry_count: s.entry_count,
                ok: false,
                expected_root: s.merkle_root.clone(),
                computed_root: String::new(),
                message: Some(format!("the snapshot of entries {}..{} could not be checked: it overlaps an earlier snapshot or reaches past the end of the chain ({n} entries)", s.from_seq, s.from_seq + s.entry_count)),
            });
        }
        let mut findings = self.findings;
        // The head's HLC is compared as text below (chain entries carry no HLC order here).
        let claim = head.as_ref().map(|h| HeadClaim {
            head: decode(&h.head_chain_link),
            last_hlc: None,
        });
        if head.is_some() && n == 0 {
            findings.push(
                Finding::new(
                    FindingKind::TailTruncated,
                    "the chain head is stored but the chain has no entries: every entry was removed",
                )
                .values(head.as_ref().map(|h| h.head_chain_link.clone()), None),
            );
        }
        findings.extend(self.diag.finish(claim));
        match &head {
            Some(h) if n > 0 => head_findings(&mut findings, h, n, self.last_hlc),
            Some(_) => {}
            None if n > 0 => findings.push(
                Finding::new(
                    FindingKind::TailTruncated,
                    "the chain has entries but no stored head",
                )
                .at(None, None, Some(n - 1)),
            ),
            None => {}
        }
        findings.sort_by_key(|f| (f.index.unwrap_or(u64::MAX), f.kind));
        let ok = findings.is_empty() && self.snap_checks.iter().all(|c| c.ok);
        ChainReport {
            tenant_id: self.tenant.to_string(),
            ok,
            length: n,
            stored_length: head.as_ref().map(|h| h.length),
            head: head.map(|h| h.head_chain_link),
            findings,
            snapshots: self.snap_checks,
        }
    }
}

/// The stored length and head HLC against a chain of `n > 0` entries whose last tHlc is
/// `last_hlc`.
fn head_findings(findings: &mut Vec<Finding>, h: &ChainHead, n: u64, last_hlc: Option<String>) {
    // Deleted or truncated entries already explain a wrong length.
    if h.length != n && findings.is_empty() {
        findings.push(
            Finding::new(
                FindingKind::HeadMismatch,
                format!(
                    "the stored chain length is {} but the chain has {n} entries",
                    h.length
                ),
            )
            .at(None, None, Some(n - 1))
            .values(Some(n.to_string()), Some(h.length.to_string())),
        );
    }
    let already = findings.iter().any(|f| {
        matches!(
            f.kind,
            FindingKind::TailTruncated | FindingKind::HeadMismatch
        )
    });
    if last_hlc.as_deref() != Some(h.head_hlc.as_str()) && !already {
        findings.push(
            Finding::new(
                FindingKind::HeadMismatch,
                format!(
                    "the stored head HLC does not match the last entry ({})",
                    n - 1
                ),
            )
            .at(None, None, Some(n - 1))
            .values(last_hlc, Some(h.head_hlc.clone())),
        );
    }
}

fn check_snapshot(s: &Snapshot, b: &RootBuilder, problem: String) -> SnapshotCheck {
    let computed = hex::encode(b.finish());
    let mut message = (!problem.is_empty()).then_some(problem);
    if message.is_none() {
        if let Some(env) = &s.dsse_envelope {
            let signed = serde_json::from_value::<crate::core::trust::DsseEnvelope>(env.clone())
                .ok()
                .and_then(|e| e.statement().ok());
            if signed.as_deref() != Some(s.statement().as_str()) {
                message = Some("the DSSE envelope does not sign this snapshot's statement".into());
            }
        }
    }
    if message.is_none() && computed != s.merkle_root {
        message = Some(format!(
            "the Merkle root of entries {}..{} is {computed}, not the stored {}",
            s.from_seq,
            s.from_seq + s.entry_count,
            s.merkle_root
        ));
    }
    SnapshotCheck {
        id: s.id,
        from_seq: s.from_seq,
        entry_count: s.entry_count,
        ok: message.is_none(),
        expected_root: s.merkle_root.clone(),
        computed_root: computed,
        message,
    }
}
