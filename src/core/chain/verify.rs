//! Verifying a stored tenant chain and its snapshots ([`verify_chain`]), over either store: the
//! findings of SPEC section 6 at chain positions, the stored head, every snapshot's Merkle root.

use crate::core::chain::{scheduler_chain_digest_of, Digest32};
use crate::core::merkle::{self, RootBuilder};
use crate::core::store::backend::{Backend, ChainPage, ChainRow, StoreTx, TxKind};
use crate::core::store::rules::unhex_link as decode;
use crate::core::store::scheduler::{
    check_snapshot_signature, split_snapshot_rows, ChainHead, DamagedSnapshot, SchedulerError,
    Snapshot,
};
use crate::core::trust::{DsseEnvelope, SignatureCheck, TrustSet};
use crate::core::verify::chain_rows::{PageChecks, RowCheck};
use crate::core::verify::{ChainDiagnosis, ChainEntry, Finding, FindingKind, HeadClaim, LinkText};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// The snapshot's signature against the trusted keys (`pass`, `fail`, `absent` or
    /// `untrusted`, as `jobs verify`'s `checks.signature`), when the verification was given trusted
    /// keys ([`verify_existing_chain_trusting`]); not in the JSON otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<&'static str>,
    /// The key id the snapshot's envelope names (its first signature's), when checked and signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
    /// For a `batch_snapshot` row whose positions do not read (a negative `from_seq`, an
    /// `entry_count` below 1): the damaged column. Such a row covers nothing known, so its
    /// `fromSeq` and `entryCount` are 0 here and its roots empty; its check fails and a
    /// `schema-invalid` finding names it. Not in the JSON for a row that reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<&'static str>,
}

/// How `chain verify` judges the signatures of a tenant's snapshots: the keys it trusts and
/// whether every snapshot must be signed by one of them (the policy of `--require-signature`, the
/// environment and the trust store).
#[derive(Debug, Clone, Copy)]
pub struct SnapshotTrust<'a> {
    pub trust: &'a TrustSet,
    pub require_signature: bool,
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

impl ChainReport {
    /// The snapshots whose signature verified under a trusted key (`signature: pass`, the word
    /// of [`SignatureCheck::status_word`] for a valid one).
    pub fn signed_by_trusted_key(&self) -> usize {
        self.snapshots
            .iter()
            .filter(|s| s.signature == Some("pass"))
            .count()
    }
}

/// Recomputes every link of a tenant chain and its head (findings of SPEC section 6, positions are
/// chain positions) and every snapshot's Merkle root. `progress` counts entries checked. Reads one
/// consistent view of the store.
///
/// The scheduler chain is in append order; HLC order is not checked across it because a later
/// import may carry earlier offline timestamps.
///
/// Two threads: this one only reads pages of rows from the store (and answers the rare job lookup
/// of a changed payload); a second one runs each page's row checks and hashing ([`PageChecks`]),
/// then applies them in chain order (break diagnosis, snapshot roots).
pub fn verify_chain(
    store: &dyn Backend,
    tenant: &str,
    progress: Option<Arc<AtomicU64>>,
) -> Result<ChainReport, SchedulerError> {
    completed(verify_chain_inner(store, tenant, progress, None, None)?)
}

/// The report of a pass that was not asked to stop (so it reached the end of the chain).
fn completed(report: Option<ChainReport>) -> Result<ChainReport, SchedulerError> {
    report.ok_or_else(|| SchedulerError::Invalid {
        what: "chain verify",
        message: "the verification stopped before the end of the chain".into(),
    })
}

/// [`verify_chain`] that gives up once `cancel` is set: the flag is looked at before each page of
/// rows is read and before each page is checked, so the pass ends within one page of it (a
/// service shutting down). `None` when it stopped before the end; nothing is counted then.
pub fn verify_chain_until(
    store: &dyn Backend,
    tenant: &str,
    progress: Option<Arc<AtomicU64>>,
    cancel: &AtomicBool,
) -> Result<Option<ChainReport>, SchedulerError> {
    verify_chain_inner(store, tenant, progress, Some(cancel), None)
}

/// [`verify_chain_until`] that also judges every snapshot's signature under `policy`, exactly as
/// [`verify_existing_chain_trusting`] does (`signature-invalid`, `signer-untrusted`,
/// `signature-missing`; `signature` and `signedBy` per snapshot): serve's periodic verification
/// (`core::service::verify_all`), so that a chain whose snapshot signature fails is a failing chain
/// there as it is for `chain verify`.
pub fn verify_chain_until_trusting(
    store: &dyn Backend,
    tenant: &str,
    progress: Option<Arc<AtomicU64>>,
    cancel: &AtomicBool,
    policy: SnapshotTrust<'_>,
) -> Result<Option<ChainReport>, SchedulerError> {
    verify_chain_inner(store, tenant, progress, Some(cancel), Some(policy))
}

fn verify_chain_inner(
    store: &dyn Backend,
    tenant: &str,
    progress: Option<Arc<AtomicU64>>,
    cancel: Option<&AtomicBool>,
    signatures: Option<SnapshotTrust<'_>>,
) -> Result<Option<ChainReport>, SchedulerError> {
    if cancelled(cancel) {
        return Ok(None);
    }
    let mut read = store.begin(TxKind::Read)?;
    let tx = &mut *read;
    let head = tx.chain_head(tenant)?;
    let (snaps, damaged) = split_snapshot_rows(tx.snapshot_rows(tenant)?);
    let Some(v) = check_pages(tx, tenant, &snaps, progress.as_deref(), cancel)? else {
        return Ok(None);
    };
    let outside = tx.log_rows_outside_chain(tenant, v.n, OUTSIDE_SHOWN)?;
    if let Some(p) = &progress {
        p.store(v.n, Ordering::Relaxed);
    }
    drop(read);
    let counted = head.is_some() || v.n > 0;
    let mut report = v.finish(head);
    if let Some(policy) = signatures {
        // A row whose envelope does not read is judged below, never as unsigned.
        let signable = snaps
            .iter()
            .filter(|s| !damaged.iter().any(|d| d.id == s.id));
        check_signatures(&mut report, signable, policy);
    }
    damaged_snapshot_findings(&mut report, &damaged);
    outside_chain_finding(&mut report, &outside);
    if counted {
        crate::core::metrics::record_quietly(
            store,
            &[crate::core::metrics::Event::ChainVerified { ok: report.ok }],
        );
    }
    Ok(Some(report))
}

/// How many of the log rows outside the chain a finding names.
const OUTSIDE_SHOWN: u64 = 20;

/// An `entry-inserted` finding (at no position) for the tenant's scheduler log rows that are in
/// no chain position (PostgreSQL: written into `scheduler.scheduler_log` directly, so no chain
/// read saw them and the chain verified without them).
fn outside_chain_finding(report: &mut ChainReport, ids: &[i64]) {
    if ids.is_empty() {
        return;
    }
    let shown: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let more = if ids.len() as u64 >= OUTSIDE_SHOWN {
        " and maybe more"
    } else {
        ""
    };
    report.findings.push(
        Finding::new(
            FindingKind::EntryInserted,
            format!(
                "scheduler.scheduler_log holds row(s) of tenant {} that are in no chain position (no airlock.chain_entry): id {}{more}: written into the log directly, or their chain positions were deleted",
                crate::core::verify::finding::quoted(&report.tenant_id),
                shown.join(", ")
            ),
        )
        .values(Some("no log row outside the chain".into()), Some(shown.join(", "))),
    );
    settle(report);
}

/// Whether the pass was asked to stop.
fn cancelled(cancel: Option<&AtomicBool>) -> bool {
    cancel.is_some_and(|c| c.load(Ordering::Acquire))
}

/// [`verify_chain`] of a tenant that must have a chain: a tenant with neither a head nor an entry
/// (a mistyped tenant id) is [`SchedulerError::NoChain`], not a chain that verifies.
pub fn verify_existing_chain(
    store: &dyn Backend,
    tenant: &str,
    progress: Option<Arc<AtomicU64>>,
) -> Result<ChainReport, SchedulerError> {
    existing(tenant, verify_chain(store, tenant, progress)?)
}

/// `report`, unless its tenant has neither a head nor an entry: [`SchedulerError::NoChain`].
fn existing(tenant: &str, report: ChainReport) -> Result<ChainReport, SchedulerError> {
    if report.head.is_none() && report.length == 0 {
        return Err(SchedulerError::NoChain(tenant.to_string()));
    }
    Ok(report)
}

/// [`verify_existing_chain`] that also checks every snapshot's signature against `policy.trust`,
/// with the function `chain verify-proof` uses ([`check_snapshot_signature`]): what `chain verify`
/// runs. A snapshot whose envelope does not verify (or is malformed) is a `signature-invalid`
/// finding, one signed by a key not in the trust set `signer-untrusted`, and with
/// `policy.require_signature` an unsigned one `signature-missing` (SPEC section 6's kinds). Each
/// such finding names the tenant, the snapshot id and the chain positions it covers in its message
/// (its `index` is null: it is not an entry's), and the snapshot's check fails with `signature`
/// and `signedBy` saying what was found.
pub fn verify_existing_chain_trusting(
    store: &dyn Backend,
    tenant: &str,
    progress: Option<Arc<AtomicU64>>,
    policy: SnapshotTrust<'_>,
) -> Result<ChainReport, SchedulerError> {
    let report = verify_chain_inner(store, tenant, progress, None, Some(policy))?;
    existing(tenant, completed(report)?)
}

/// Checks each snapshot's signature ([`check_snapshot_signature`]) into `report`: a finding per
/// snapshot that fails `policy`, its check failed, and `ok` recomputed.
fn check_signatures<'s>(
    report: &mut ChainReport,
    snaps: impl Iterator<Item = &'s Snapshot>,
    policy: SnapshotTrust<'_>,
) {
    use crate::core::verify::finding::{clip, quoted};
    // Each snapshot's check by id, found once (a store may hold many snapshots).
    let at: std::collections::HashMap<i64, usize> = report
        .snapshots
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id, i))
        .collect();
    for s in snaps {
        let check = check_snapshot_signature(s, policy.trust);
        let signed_by = match &check {
            SignatureCheck::Valid { key_id, .. }
            | SignatureCheck::Invalid { key_id, .. }
            | SignatureCheck::Untrusted { key_id } => {
                Some(key_id.clone()).filter(|k| !k.is_empty())
            }
            SignatureCheck::Absent => None,
        };
        let problem = match &check {
            SignatureCheck::Valid { .. } => None,
            SignatureCheck::Absent => policy.require_signature.then(|| {
                (
                    FindingKind::SignatureMissing,
                    "it is not signed, and this verification requires a signature by a trusted key (sign snapshots with `airlock chain snapshot --sign`)".to_string(),
                    (Some("a signature by a trusted key".to_string()), None),
                    "it is not signed",
                )
            }),
            SignatureCheck::Invalid { key_id, reason } => Some((
                FindingKind::SignatureInvalid,
                format!("its DSSE envelope does not verify: {reason}"),
                (
                    Some(if key_id.is_empty() {
                        "a well-formed envelope with a valid signature".to_string()
                    } else {
                        format!("a valid signature by {}", clip(key_id))
                    }),
                    first_signature(s),
                ),
                "its signature does not verify",
            )),
            SignatureCheck::Untrusted { key_id } => Some((
                FindingKind::SignerUntrusted,
                format!(
                    "it is signed by key {}, which is not in the trust store (trust its public key with `airlock keys trust add`, or pass --trusted-key PUB.pem)",
                    clip(key_id)
                ),
                (Some("a trusted key id".to_string()), Some(key_id.clone())),
                "its signer is not trusted",
            )),
        };
        let Some(c) = at.get(&s.id).map(|&i| &mut report.snapshots[i]) else {
            continue;
        };
        c.signature = Some(check.status_word());
        c.signed_by = signed_by;
        let Some((kind, detail, (expected, actual), short)) = problem else {
            continue;
        };
        report.findings.push(
            Finding::new(
                kind,
                format!(
                    "snapshot #{} (entries {}..{}) of tenant {}: {detail}",
                    s.id,
                    s.from_seq,
                    s.from_seq.saturating_add(s.entry_count),
                    quoted(&s.tenant_id)
                ),
            )
            .values(expected, actual),
        );
        c.ok = false;
        // The finding says why; the snapshot's own message only points at it.
        c.message.get_or_insert(refer_to(short, kind));
    }
    settle(report);
}

/// Findings in order (by position, then kind) and `ok` recomputed.
fn settle(report: &mut ChainReport) {
    report
        .findings
        .sort_by_key(|f| (f.index.unwrap_or(u64::MAX), f.kind));
    report.ok = report.findings.is_empty() && report.snapshots.iter().all(|c| c.ok);
}

/// A snapshot check's message that points at the finding saying why (`chain verify` prints both:
/// the reason is said once, in the finding).
fn refer_to(short: &str, kind: FindingKind) -> String {
    format!("{short} (see the {} finding)", kind.as_str())
}

/// A finding per `batch_snapshot` row that does not read, naming the row and the column, and a
/// failed check pointing at it: a damaged envelope is `signature-invalid` (its signature cannot be
/// checked; the snapshot's own check fails with `signature: fail`, its root is still checked), a
/// damaged position `schema-invalid` (the row covers nothing known: its check is one of its own,
/// `unreadable` naming the column, so that every row is counted among the snapshots).
fn damaged_snapshot_findings(report: &mut ChainReport, damaged: &[DamagedSnapshot]) {
    if damaged.is_empty() {
        return;
    }
    for d in damaged {
        let kind = match d.rest {
            Some(_) => FindingKind::SignatureInvalid,
            None => FindingKind::SchemaInvalid,
        };
        let span = d
            .rest
            .as_ref()
            .map(|s| {
                let end = s.from_seq.saturating_add(s.entry_count);
                format!(" (entries {}..{end})", s.from_seq)
            })
            .unwrap_or_default();
        let message = format!("{}{span}", d.describe());
        let refer = refer_to(&format!("its {} does not read", d.column), kind);
        match report.snapshots.iter_mut().find(|c| c.id == d.id) {
            Some(c) => {
                c.ok = false;
                c.signature = Some("fail");
                c.message = Some(match c.message.take() {
                    Some(m) => format!("{refer}; {m}"),
                    None => refer,
                });
            }
            None => report.snapshots.push(SnapshotCheck {
                id: d.id,
                from_seq: 0,
                entry_count: 0,
                ok: false,
                expected_root: String::new(),
                computed_root: String::new(),
                message: Some(refer),
                signature: None,
                signed_by: None,
                unreadable: Some(d.column),
            }),
        }
        report.findings.push(
            Finding::new(kind, message)
                .values(Some(d.expected.to_string()), Some(d.actual.clone())),
        );
    }
    report.snapshots.sort_by_key(|c| c.id);
    settle(report);
}

/// The first signature (base64) of a snapshot's envelope, as stored, for a finding's `actual`.
fn first_signature(s: &Snapshot) -> Option<String> {
    let sig = s
        .dsse_envelope
        .as_ref()?
        .get("signatures")?
        .get(0)?
        .get("sig")?;
    sig.as_str().map(str::to_string)
}

/// Reads every page on this thread and checks and applies them on a `chain-check` thread (or here,
/// page by page, when no thread could be started); returns the applied state, `None` when
/// `cancel` was set before the end.
fn check_pages<'a>(
    tx: &mut dyn StoreTx,
    tenant: &'a str,
    snaps: &'a [Snapshot],
    progress: Option<&AtomicU64>,
    cancel: Option<&AtomicBool>,
) -> Result<Option<ChainVerifier<'a>>, SchedulerError> {
    let v = check_all_pages(tx, tenant, snaps, progress, cancel);
    // Both threads stop at the first page after the flag is set (the flag is never cleared); a
    // lookup the checking thread asked of the stopped store thread fails, and is no error then.
    if cancelled(cancel) {
        return Ok(None);
    }
    v.map(Some)
}

fn check_all_pages<'a>(
    tx: &mut dyn StoreTx,
    tenant: &'a str,
    snaps: &'a [Snapshot],
    progress: Option<&AtomicU64>,
    cancel: Option<&AtomicBool>,
) -> Result<ChainVerifier<'a>, SchedulerError> {
    std::thread::scope(|s| {
        let (work_tx, work_rx) = sync_channel::<Batch>(BATCHES);
        // At most BATCHES pages and one lookup are ever in flight: no send below blocks.
        let (back_tx, back_rx) = sync_channel::<Back>(BATCHES + 1);
        let (answer_tx, answer_rx) = sync_channel::<Answer>(1);
        let spawned = std::thread::Builder::new()
            .name("chain-check".into())
            .spawn_scoped(s, move || {
                let mut v = ChainVerifier::new(tenant, snaps);
                let mut ask = AskStore {
                    back: &back_tx,
                    answers: &answer_rx,
                };
                for mut b in work_rx {
                    if cancelled(cancel) {
                        break;
                    }
                    let rows = b.checked..b.page.len();
                    b.checks.check_rows(&b.page, b.first, b.leaves, rows);
                    v.apply(&b, &mut ask, progress)?;
                    if back_tx.send(Back::Done(b)).is_err() {
                        break;
                    }
                }
                Ok(v)
            });
        let Ok(checker) = spawned else {
            return check_inline(tx, tenant, snaps, progress, cancel);
        };
        let channels = (work_tx, back_rx, answer_tx);
        let read = serve_pages(tx, tenant, snaps, channels, cancel);
        let checked = match checker.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        // A store error stops both threads; it is the one to report.
        read?;
        checked
    })
}

/// Pages in rotation between the reading and the checking thread.
const BATCHES: usize = 4;

/// A page of rows, its first chain position, whether a snapshot covers any of it (its Merkle
/// leaves are wanted), and its row checks once made (`checked`: the rows the store thread checked
/// already, from the first).
#[derive(Default)]
struct Batch {
    page: ChainPage,
    first: u64,
    leaves: bool,
    checks: PageChecks,
    checked: usize,
}

/// What the checking thread sends back to the store thread.
enum Back {
    /// A page applied: free to read the next one into.
    Done(Batch),
    /// The payloadHash recorded for this job, please (a changed payload's diagnosis).
    Lookup([u8; 16]),
}

type Answer = Result<Option<Digest32>, SchedulerError>;

/// Where the payloadHash recorded at a job's enqueue is looked up, in the read transaction.
trait Recorded {
    fn payload_hash(&mut self, job: &[u8; 16]) -> Answer;
}

/// The read transaction itself (on its own thread).
struct TxRecorded<'a, 't> {
    tx: &'a mut (dyn StoreTx + 't),
    tenant: &'a str,
}

impl Recorded for TxRecorded<'_, '_> {
    fn payload_hash(&mut self, job: &[u8; 16]) -> Answer {
        Ok(self.tx.job(self.tenant, job)?.map(|j| j.payload_hash))
    }
}

/// The store thread, asked over the channels (it answers between pages).
struct AskStore<'a> {
    back: &'a SyncSender<Back>,
    answers: &'a Receiver<Answer>,
}

impl Recorded for AskStore<'_> {
    fn payload_hash(&mut self, job: &[u8; 16]) -> Answer {
        let gone = || SchedulerError::Invalid {
            what: "chain verify",
            message: "the store's reading thread stopped".into(),
        };
        self.back.send(Back::Lookup(*job)).map_err(|_| gone())?;
        self.answers.recv().unwrap_or_else(|_| Err(gone()))
    }
}

/// Reads the chain a page at a time, in order.
struct PageReader<'a> {
    snaps: &'a [Snapshot],
    /// The next seq to read from, the chain position of the next row, whether rows may remain.
    from: u64,
    next_pos: u64,
    more: bool,
}

impl<'a> PageReader<'a> {
    fn new(snaps: &'a [Snapshot]) -> Self {
        PageReader {
            snaps,
            from: 0,
            next_pos: 0,
            more: true,
        }
    }

    /// Reads the next page into `b`; false when the chain has no more rows.
    fn read(
        &mut self,
        tx: &mut dyn StoreTx,
        tenant: &str,
        b: &mut Batch,
    ) -> Result<bool, SchedulerError> {
        if !self.more {
            return Ok(false);
        }
        tx.chain_page(tenant, self.from, i64::MAX as u64, &mut b.page)?;
        let Some(last) = b.page.last_seq() else {
            self.more = false;
            return Ok(false);
        };
        b.checked = 0;
        b.first = self.next_pos;
        self.next_pos += b.page.len() as u64;
        let (first, end) = (b.first, self.next_pos);
        b.leaves = self
            .snaps
            .iter()
            .any(|s| s.from_seq < end && first < s.from_seq.saturating_add(s.entry_count));
        match last.checked_add(1) {
            Some(next) => self.from = next,
            None => self.more = false,
        }
        Ok(true)
    }
}

/// The store thread's loop: reads pages while a batch is free and hands them to the checking
/// thread, takes back applied ones, answers its lookups. Returns when every page is applied, when
/// the checking thread stopped (its result says why), when `cancel` is set, or on a store error.
///
/// Balance: reading a page costs less than checking and applying one, so this thread would wait.
/// When the checking thread has a page queued behind the one it is on, the first half of the page
/// just read is checked here (that thread would not reach it before this one is done; the whole
/// page made this thread the longer one).
fn serve_pages(
    tx: &mut dyn StoreTx,
    tenant: &str,
    snaps: &[Snapshot],
    (work, back, answers): (SyncSender<Batch>, Receiver<Back>, SyncSender<Answer>),
    cancel: Option<&AtomicBool>,
) -> Result<(), SchedulerError> {
    let mut free: Vec<Batch> = (0..BATCHES).map(|_| Batch::default()).collect();
    let mut reader = PageReader::new(snaps);
    let mut pending = 0usize;
    loop {
        // Returning closes `work`: the checking thread stops at its next page too.
        if cancelled(cancel) {
            return Ok(());
        }
        // Take back what is already answered, without waiting: `pending` is then the number of
        // pages the checking thread has yet to finish.
        while let Ok(m) = back.try_recv() {
            if !take_back(m, &mut free, &mut pending, tx, tenant, &answers) {
                return Ok(());
            }
        }
        if reader.more {
            if let Some(mut b) = free.pop() {
                if !reader.read(tx, tenant, &mut b)? {
                    free.push(b);
                    continue;
                }
                if pending >= 2 {
                    b.checked = b.page.len() / 2;
                    b.checks
                        .check_rows(&b.page, b.first, b.leaves, 0..b.checked);
                }
                if work.send(b).is_err() {
                    return Ok(());
                }
                pending += 1;
                continue;
            }
        }
        if pending == 0 {
            return Ok(());
        }
        let Ok(m) = back.recv() else { return Ok(()) };
        if !take_back(m, &mut free, &mut pending, tx, tenant, &answers) {
            return Ok(());
        }
    }
}

/// A message of the checking thread, on the store thread: a page back in `free`, or a lookup
/// answered. False when the checking thread is gone.
fn take_back(
    m: Back,
    free: &mut Vec<Batch>,
    pending: &mut usize,
    tx: &mut dyn StoreTx,
    tenant: &str,
    answers: &SyncSender<Answer>,
) -> bool {
    match m {
        Back::Done(b) => {
            *pending -= 1;
            free.push(b);
            true
        }
        Back::Lookup(job) => answers
            .send(TxRecorded { tx, tenant }.payload_hash(&job))
            .is_ok(),
    }
}

/// Reads, checks and applies page after page on this thread.
fn check_inline<'a>(
    tx: &mut dyn StoreTx,
    tenant: &'a str,
    snaps: &'a [Snapshot],
    progress: Option<&AtomicU64>,
    cancel: Option<&AtomicBool>,
) -> Result<ChainVerifier<'a>, SchedulerError> {
    let mut v = ChainVerifier::new(tenant, snaps);
    let (mut reader, mut b) = (PageReader::new(snaps), Batch::default());
    while !cancelled(cancel) && reader.read(tx, tenant, &mut b)? {
        b.checks.check(&b.page, b.first, b.leaves);
        v.apply(&b, &mut TxRecorded { tx, tenant }, progress)?;
    }
    Ok(v)
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
    /// The stored chain link of the row before (position `n - 1`), as text.
    pred_link: String,
}

impl<'a> ChainVerifier<'a> {
    fn new(tenant: &'a str, snaps: &'a [Snapshot]) -> Self {
        ChainVerifier {
            tenant,
            snaps,
            diag: ChainDiagnosis::new(None, None, LinkText::Hex),
            findings: Vec::new(),
            snap_idx: 0,
            builder: None,
            snap_checks: Vec::with_capacity(snaps.len()),
            n: 0,
            last_hlc: None,
            pred_link: String::new(),
        }
    }

    /// Applies the rows of a checked page, in order.
    fn apply(
        &mut self,
        b: &Batch,
        rec: &mut dyn Recorded,
        progress: Option<&AtomicU64>,
    ) -> Result<(), SchedulerError> {
        for k in 0..b.page.len() {
            self.row(rec, b.page.get(k), &b.checks, k)?;
            if let Some(p) = progress {
                if self.n.is_multiple_of(4096) {
                    p.store(self.n, Ordering::Relaxed);
                }
            }
        }
        Ok(())
    }

    /// Applies the next stored row (chain position `self.n`), row `k` of a page checked into `c`.
    fn row(
        &mut self,
        rec: &mut dyn Recorded,
        r: ChainRow<'_>,
        c: &PageChecks,
        k: usize,
    ) -> Result<(), SchedulerError> {
        let i = self.n;
        let check = c.rows[k];
        self.findings.extend_from_slice(c.findings_of(k));
        let recomputed = match check.recomputed {
            Some((payload, l)) => self.recompute(rec, &r, &check, (payload, l))?,
            None => None,
        };
        let prev_edited = self.only_prev_link_edited(&r, &check, recomputed);
        if let Some(f) = self.diag.push_entry(
            ChainEntry {
                link: check.link,
                prev: check.prev,
                recomputed,
                hlc: None,
                job_id: check.job,
            },
            Some(r.t_hlc),
            prev_edited,
        ) {
            self.findings.push(f);
        }
        self.pred_link.clear();
        self.pred_link.push_str(r.chain_link);
        self.snapshot_leaf(i, r.chain_link, &check);
        let last_hlc = self.last_hlc.get_or_insert_with(String::new);
        last_hlc.clear();
        last_hlc.push_str(r.t_hlc);
        self.n += 1;
        Ok(())
    }

    /// Whether a row whose link does not recompute had only its prevChainLink edited: its stored
    /// link recomputes with the previous row's stored link (genesis for the first row) in place of
    /// the stored prevChainLink. That is one `entry-modified` here (SPEC section 6), not a break.
    fn only_prev_link_edited(
        &self,
        r: &ChainRow<'_>,
        c: &RowCheck,
        recomputed: Option<Digest32>,
    ) -> bool {
        let (Some((payload, _)), Some(link)) = (c.recomputed, c.link) else {
            return false;
        };
        if recomputed == Some(link) {
            return false;
        }
        let pred = (self.n > 0).then_some(self.pred_link.as_str());
        pred != r.prev_chain_link
            && scheduler_chain_digest_of(r.t_hlc, r.job_id, r.action, pred, &hex::encode(payload))
                == link
    }

    /// The link recomputed from the row's fields (`l`, with the payload's SHA-256 `payload`). When
    /// it differs from the stored link but the stored link holds with the payloadHash recorded at
    /// enqueue, only the payload changed: a `payload-modified` finding, and the stored link counts
    /// as recomputed.
    fn recompute(
        &mut self,
        rec: &mut dyn Recorded,
        r: &ChainRow<'_>,
        c: &RowCheck,
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
                Some(j) => rec.payload_hash(&j)?,
                None => None,
            };
            if let Some(h) = recorded {
                let l2 = scheduler_chain_digest_of(
                    r.t_hlc,
                    r.job_id,
                    r.action,
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
                signature: None,
                signed_by: None,
                unreadable: None,
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
            Some(h) if n > 0 => {
                head_findings(&mut findings, h, n, self.last_hlc);
                unreadable_head_link(&mut findings, h, n, &self.pred_link);
            }
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

/// A stored head link that is not a chain link (64 hex digits) names no entry, so the link
/// diagnosis had no head to compare and the chain passed as one whose head verifies: a
/// `head-mismatch` of its own, at the last entry (`last_link`, its stored link, is expected).
fn unreadable_head_link(findings: &mut Vec<Finding>, h: &ChainHead, n: u64, last_link: &str) {
    if decode(&h.head_chain_link).is_some() {
        return;
    }
    let stored = crate::core::verify::finding::clip(&h.head_chain_link).into_owned();
    findings.push(
        Finding::new(
            FindingKind::HeadMismatch,
            "the stored head link is not a chain link (64 hex digits), so it names no entry: the head row was damaged or edited",
        )
        .at(None, None, Some(n - 1))
        .values(Some(last_link.to_string()), Some(stored)),
    );
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

/// A snapshot's check: its bounds (`problem`, from the rows), else its Merkle root and whether its
/// envelope signs its statement, every one that fails stated (an edited root of a signed snapshot
/// is both).
fn check_snapshot(s: &Snapshot, b: &RootBuilder, problem: String) -> SnapshotCheck {
    let computed = hex::encode(b.finish());
    let mut problems = Vec::new();
    if !problem.is_empty() {
        problems.push(problem);
    } else {
        if computed != s.merkle_root {
            problems.push(format!(
                "the Merkle root of entries {}..{} is {computed}, not the stored {}",
                s.from_seq,
                s.from_seq + s.entry_count,
                s.merkle_root
            ));
        }
        if let Some(env) = &s.dsse_envelope {
            match DsseEnvelope::from_signed_json(env) {
                Err(reason) => problems.push(format!("the DSSE envelope is malformed: {reason}")),
                Ok(e) if e.statement().ok().as_deref() != Some(s.statement().as_str()) => problems
                    .push("the DSSE envelope does not sign this snapshot's statement".into()),
                Ok(_) => {}
            }
        }
    }
    let message = (!problems.is_empty()).then(|| problems.join("; "));
    SnapshotCheck {
        id: s.id,
        from_seq: s.from_seq,
        entry_count: s.entry_count,
        ok: message.is_none(),
        expected_root: s.merkle_root.clone(),
        computed_root: computed,
        message,
        signature: None,
        signed_by: None,
        unreadable: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
    use crate::core::import::{import, ImportOptions};
    use crate::core::store::Store;

    /// The two-thread pass (lookups asked of the store thread, pages checked on either thread)
    /// and the one-thread pass give the same report over a damaged chain of two pages.
    #[test]
    fn both_threads_and_one_thread_agree_on_a_damaged_chain_of_two_pages() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("b.json");
        let spec = SynthSpec::acme(2, 4500, 3);
        write_synthetic_bundle(&spec, std::fs::File::create(&path).unwrap()).unwrap();
        let db = tmp.path().join("airlock.db");
        let mut store = Store::open(&db).unwrap();
        import(&mut store, &[path], &ImportOptions::new("relay-01")).unwrap();
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "UPDATE scheduler_log SET payload = '{\"kind\":\"evil\"}' WHERE seq IN (4, 8800);
             UPDATE scheduler_log SET chain_link = '00' || substr(chain_link, 3) WHERE seq = 8500;
             DELETE FROM scheduler_log WHERE seq = 100;",
        )
        .unwrap();
        let both = {
            let mut read = store.begin(TxKind::Read).unwrap();
            let snaps = read.snapshots("acme").unwrap();
            let head = read.chain_head("acme").unwrap();
            let v = check_pages(&mut *read, "acme", &snaps, None, None).unwrap();
            v.unwrap().finish(head)
        };
        let one = {
            let mut read = store.begin(TxKind::Read).unwrap();
            let snaps = read.snapshots("acme").unwrap();
            let head = read.chain_head("acme").unwrap();
            let v = check_inline(&mut *read, "acme", &snaps, None, None).unwrap();
            v.finish(head)
        };
        assert_eq!(both, one);
        assert_eq!(both.length, 8999);
        let at = |kind: FindingKind| {
            let at = both.findings.iter().filter(|f| f.kind == kind);
            at.map(|f| f.index).collect::<Vec<_>>()
        };
        // Positions after the deleted seq 100 are one lower than their seq.
        assert_eq!(at(FindingKind::PayloadModified), [Some(4), Some(8799)]);
        assert_eq!(at(FindingKind::EntryModified), [Some(8499)]);
        assert_eq!(at(FindingKind::EntriesDeleted), [Some(100)]);
    }

    /// A pass asked to stop gives up without a report (and counts nothing); one never asked gives
    /// the report of [`verify_chain`].
    #[test]
    fn a_cancelled_pass_has_no_report() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("b.json");
        let spec = SynthSpec::acme(1, 50, 4);
        write_synthetic_bundle(&spec, std::fs::File::create(&path).unwrap()).unwrap();
        let mut store = Store::open(&tmp.path().join("airlock.db")).unwrap();
        import(&mut store, &[path], &ImportOptions::new("relay-01")).unwrap();
        let stop = AtomicBool::new(false);
        let full = verify_chain_until(&store, "acme", None, &stop).unwrap();
        assert_eq!(full, Some(verify_chain(&store, "acme", None).unwrap()));
        stop.store(true, Ordering::Release);
        assert_eq!(
            verify_chain_until(&store, "acme", None, &stop).unwrap(),
            None
        );
        let mut read = store.begin(TxKind::Read).unwrap();
        let snaps = read.snapshots("acme").unwrap();
        let v = check_pages(&mut *read, "acme", &snaps, None, Some(&stop)).unwrap();
        assert!(v.is_none());
    }
}
