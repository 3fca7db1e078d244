//! Appending to a tenant chain (SPEC section 8): chain links, the head, and the batch snapshots
//! that become due, over any store.

use crate::core::chain::{scheduler_chain_digest, Action, Digest32};
use crate::core::merkle;
use crate::core::store::backend::{RowBatch, RowProvenance, StoreTx};
use crate::core::store::scheduler::{
    hex32, split_snapshot_rows, ChainHead, SchedulerError, Snapshot, SnapshotSigner,
    SNAPSHOT_PAYLOAD_TYPE,
};
use crate::core::store::StoreError;
use crate::core::time::rfc3339_millis;

/// Rows buffered by [`ChainAppender::append`] before they are written.
const APPEND_BUFFER: usize = 64;

/// Appends to one tenant chain inside the caller's write transaction (which holds the tenant's
/// chain lock), then writes the head and takes the snapshots that became due
/// ([`ChainAppender::finish`]).
pub struct ChainAppender {
    tenant: String,
    next_seq: u64,
    prev: Option<String>,
    head_hlc: Option<String>,
    /// Chain position of the first entry not covered by a snapshot, and the links from there on.
    uncovered_from: u64,
    uncovered: Vec<Digest32>,
    created_at: String,
    appended: u64,
    pending: RowBatch,
    roots: Option<DueRoots>,
    /// Full batches folded early ([`ChainAppender::fold_full_batches`]): (first link, last link,
    /// Merkle root) each, starting at `uncovered_from`, `folded_batch` entries each; `uncovered`
    /// then holds the links after them.
    folded: Vec<(Digest32, Digest32, Digest32)>,
    folded_batch: usize,
}

/// The Merkle roots of the snapshots [`ChainAppender::finish`] will take, computed ahead (pure CPU
/// work another thread can do while the caller writes other rows).
pub struct DueRoots {
    batch: usize,
    roots: Vec<Digest32>,
}

/// What a finished append changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppendSummary {
    pub head_before: Option<String>,
    pub length_before: u64,
    pub head: Option<String>,
    pub head_hlc: Option<String>,
    pub length: u64,
    pub appended: u64,
    pub snapshots: Vec<Snapshot>,
}

/// One entry to append: its chain inputs and, for an imported entry, where it came from.
#[derive(Debug, Clone, Copy)]
pub struct NewRow<'a> {
    pub t_hlc: &'a str,
    pub job_id: &'a str,
    pub action: Action,
    pub payload: &'a str,
    /// SHA-256 of the payload, 64 lowercase hex digits.
    pub payload_digest_hex: &'a str,
    pub provenance: Option<RowProvenance<'a>>,
}

/// Computes the chain links of entries to be appended after a [`ChainAppender`]'s current head
/// (pure CPU work, `Send`): an import runs it on one thread while another writes what it prepared.
pub struct RowPreparer {
    next_seq: u64,
    prev: Option<String>,
}

impl RowPreparer {
    /// Adds one entry to `out`; returns its chain position.
    pub fn push(&mut self, out: &mut RowBatch, row: NewRow<'_>) -> u64 {
        let NewRow {
            t_hlc,
            job_id,
            action,
            payload,
            payload_digest_hex,
            provenance,
        } = row;
        let digest = scheduler_chain_digest(
            t_hlc,
            job_id,
            action,
            self.prev.as_deref(),
            payload_digest_hex,
        );
        let seq = self.next_seq;
        out.push(
            seq,
            t_hlc,
            job_id,
            action,
            self.prev.as_deref(),
            digest,
            payload,
            provenance,
        );
        let mut hex = [0u8; 64];
        let prev = self.prev.get_or_insert_with(String::new);
        prev.clear();
        prev.push_str(hex32(&digest, &mut hex));
        self.next_seq += 1;
        seq
    }
}

/// The tenant's last snapshot, where appending continues covering the chain. A damaged envelope
/// does not matter to that (its positions and root still check); a row whose positions do not
/// read refuses the append, naming the row: where the snapshots end is not known then.
fn last_snapshot(tx: &mut dyn StoreTx, tenant: &str) -> Result<Option<Snapshot>, StoreError> {
    let (mut snaps, damaged) = split_snapshot_rows(tx.snapshot_rows(tenant)?);
    match damaged.into_iter().find(|d| d.rest.is_none()) {
        Some(d) => Err(d.into_error()),
        None => Ok(snaps.pop()),
    }
}

impl ChainAppender {
    /// Starts appending to `tenant`'s chain whose head (read under the chain lock) is `head`.
    /// Refuses a damaged tail ([`super::check_tail`]): appending onto it would bury the damage
    /// under valid-looking entries.
    pub fn begin(
        tx: &mut dyn StoreTx,
        tenant: &str,
        head: Option<&ChainHead>,
        now_ms: u64,
    ) -> Result<Self, SchedulerError> {
        let last = last_snapshot(tx, tenant)?;
        super::check_tail(tx, tenant, head, last.as_ref())?;
        let covered = last
            .map(|s| s.from_seq.saturating_add(s.entry_count))
            .unwrap_or(0);
        let length = head.map(|h| h.length).unwrap_or(0);
        let mut uncovered = Vec::new();
        super::each_chain_row(tx, tenant, covered, length, |r| {
            let link = super::unhex_link(r.chain_link).ok_or_else(|| SchedulerError::Damaged {
                tenant: tenant.into(),
                seq: r.seq,
                message: format!(
                    "chain link {:?} is not 64 lowercase hex digits",
                    r.chain_link
                ),
            })?;
            uncovered.push(link);
            Ok(())
        })?;
        Ok(ChainAppender {
            tenant: tenant.to_string(),
            next_seq: length,
            prev: head.map(|h| h.head_chain_link.clone()),
            head_hlc: head.map(|h| h.head_hlc.clone()),
            uncovered_from: covered,
            uncovered,
            created_at: rfc3339_millis(now_ms),
            appended: 0,
            pending: RowBatch::default(),
            roots: None,
            folded: Vec::new(),
            folded_batch: 0,
        })
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn head(&self) -> Option<&str> {
        self.prev.as_deref()
    }

    /// Entries not yet covered by a snapshot.
    pub fn uncovered(&self) -> usize {
        self.uncovered.len() + self.folded.len() * self.folded_batch
    }

    /// A [`RowPreparer`] continuing from the current head (append nothing else until its rows are
    /// written with [`ChainAppender::write_prepared`]).
    pub fn preparer(&self) -> RowPreparer {
        RowPreparer {
            next_seq: self.next_seq,
            prev: self.prev.clone(),
        }
    }

    /// Writes rows from [`ChainAppender::preparer`] (in the order they were prepared) and empties
    /// `rows` for reuse.
    pub fn write_prepared(
        &mut self,
        tx: &mut dyn StoreTx,
        rows: &mut RowBatch,
    ) -> Result<(), StoreError> {
        self.flush(tx)?;
        let n = rows.len();
        if n == 0 {
            return Ok(());
        }
        let last = rows.get(n - 1);
        debug_assert_eq!(rows.get(0).seq, self.next_seq);
        self.head_hlc = Some(last.t_hlc.to_string());
        self.prev = Some(last.chain_link.to_string());
        self.uncovered.extend_from_slice(rows.digests());
        self.next_seq += n as u64;
        self.appended += n as u64;
        let written = tx.write_rows(&self.tenant, &self.created_at, rows);
        rows.clear();
        written
    }

    /// Appends one entry; returns (position, chain link). The row is written by a later flush (at
    /// the latest by [`ChainAppender::finish`]).
    pub fn append(
        &mut self,
        tx: &mut dyn StoreTx,
        row: NewRow<'_>,
    ) -> Result<(u64, &str), StoreError> {
        if self.pending.len() >= APPEND_BUFFER {
            self.flush(tx)?;
        }
        let mut prep = self.preparer();
        let seq = prep.push(&mut self.pending, row);
        let digest = *self.pending.digests().last().unwrap_or(&[0; 32]);
        self.uncovered.push(digest);
        self.next_seq += 1;
        self.appended += 1;
        self.head_hlc = Some(row.t_hlc.to_string());
        self.prev = prep.prev;
        Ok((seq, self.prev.as_deref().unwrap_or("")))
    }

    fn flush(&mut self, tx: &mut dyn StoreTx) -> Result<(), StoreError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let written = tx.write_rows(&self.tenant, &self.created_at, &self.pending);
        self.pending.clear();
        written
    }

    /// Links held for snapshots not folded yet.
    pub fn links_held(&self) -> usize {
        self.uncovered.len()
    }

    /// Computes the Merkle roots of the full batches of `batch_size` uncovered entries now and keeps
    /// only their first and last links and roots, so a long append does not hold 32 bytes of link
    /// per entry until [`ChainAppender::finish`] (which must then get the same `batch_size`: a
    /// different one leaves the batches folded so far as they are).
    pub fn fold_full_batches(&mut self, batch_size: u64) {
        let batch = batch_size.max(1) as usize;
        if self.folded_batch != 0 && self.folded_batch != batch {
            return;
        }
        let full = self.uncovered.len() / batch;
        if full == 0 {
            return;
        }
        let roots = batch_roots(&self.uncovered, batch, full);
        for (k, root) in roots.into_iter().enumerate() {
            let chunk = &self.uncovered[k * batch..(k + 1) * batch];
            self.folded.push((chunk[0], chunk[batch - 1], root));
        }
        self.uncovered.drain(..full * batch);
        self.folded_batch = batch;
    }

    /// Computes the Merkle roots `finish(batch_size, snapshot_rest, ..)` needs; hand them back with
    /// [`ChainAppender::use_roots`].
    pub fn due_roots(&self, batch_size: u64, snapshot_rest: bool) -> DueRoots {
        let batch = batch_size.max(1) as usize;
        let n = self.uncovered.len();
        let count = n / batch + usize::from(snapshot_rest && !n.is_multiple_of(batch));
        DueRoots {
            batch,
            roots: batch_roots(&self.uncovered, batch, count),
        }
    }

    /// Roots from [`ChainAppender::due_roots`] (ignored if they do not fit the batches).
    pub fn use_roots(&mut self, roots: DueRoots) {
        self.roots = Some(roots);
    }

    /// Writes the head and the snapshots now due: every full batch of `batch_size` uncovered
    /// entries, and with `snapshot_rest` also the remaining partial batch.
    pub fn finish(
        mut self,
        tx: &mut dyn StoreTx,
        batch_size: u64,
        snapshot_rest: bool,
        signer: Option<SnapshotSigner<'_>>,
        head_before: Option<String>,
        length_before: u64,
    ) -> Result<AppendSummary, SchedulerError> {
        self.flush(tx)?;
        if self.appended > 0 {
            tx.write_head(&ChainHead {
                tenant_id: self.tenant.clone(),
                head_chain_link: self.prev.clone().unwrap_or_default(),
                head_hlc: self.head_hlc.clone().unwrap_or_default(),
                length: self.next_seq,
                updated_at: self.created_at.clone(),
            })?;
        }
        let batch = batch_size.max(1) as usize;
        let n = self.uncovered.len();
        let mut ends = Vec::new();
        let mut start = 0;
        while n - start >= batch || (snapshot_rest && start < n) {
            let end = (start + batch).min(n);
            ends.push((start, end));
            start = end;
        }
        let roots = match self.roots.take() {
            Some(r) if r.batch == batch && r.roots.len() == ends.len() => r.roots,
            _ => batch_roots(&self.uncovered, batch, ends.len()),
        };
        let mut taken = Vec::with_capacity(self.folded.len() + ends.len());
        let fb = self.folded_batch as u64;
        for (k, &(from, to, root)) in self.folded.iter().enumerate() {
            let from_seq = self.uncovered_from + k as u64 * fb;
            let span = (from_seq, fb, from, to, root);
            taken.push(self.snapshot(tx, span, signer)?);
        }
        let base = self.uncovered_from + self.folded.len() as u64 * fb;
        for (k, &(start, end)) in ends.iter().enumerate() {
            let links = &self.uncovered[start..end];
            let span = (
                base + start as u64,
                links.len() as u64,
                links[0],
                links[links.len() - 1],
                roots[k],
            );
            taken.push(self.snapshot(tx, span, signer)?);
        }
        Ok(AppendSummary {
            head_before,
            length_before,
            head: self.prev,
            head_hlc: self.head_hlc,
            length: self.next_seq,
            appended: self.appended,
            snapshots: taken,
        })
    }
}

impl ChainAppender {
    /// Writes the snapshot of `(from_seq, entry_count, first link, last link, Merkle root)`.
    fn snapshot(
        &self,
        tx: &mut dyn StoreTx,
        (from_seq, entry_count, from, to, root): (u64, u64, Digest32, Digest32, Digest32),
        signer: Option<SnapshotSigner<'_>>,
    ) -> Result<Snapshot, SchedulerError> {
        let last_seq = from_seq + entry_count - 1;
        let snapshot_hlc =
            tx.t_hlc_at(&self.tenant, last_seq)?
                .ok_or_else(|| SchedulerError::Damaged {
                    tenant: self.tenant.clone(),
                    seq: last_seq,
                    message: "the entry a snapshot ends at is missing".into(),
                })?;
        let mut snap = Snapshot {
            id: 0,
            tenant_id: self.tenant.clone(),
            snapshot_hlc,
            from_chain_link: hex::encode(from),
            to_chain_link: hex::encode(to),
            from_seq,
            entry_count,
            merkle_root: hex::encode(root),
            dsse_envelope: None,
            created_at: self.created_at.clone(),
        };
        if let Some(sign) = signer {
            let env = sign(SNAPSHOT_PAYLOAD_TYPE, snap.statement().as_bytes())
                .map_err(SchedulerError::Sign)?;
            snap.dsse_envelope = Some(env);
        }
        snap.id = tx.insert_snapshot(&snap)?;
        Ok(snap)
    }
}

/// Merkle roots of the first `count` batches of `batch` links (the last may be partial), computed
/// on all cores when there are many.
fn batch_roots(links: &[Digest32], batch: usize, count: usize) -> Vec<Digest32> {
    let root_of = |k: usize| {
        let chunk = &links[k * batch..((k + 1) * batch).min(links.len())];
        merkle::root(&merkle::leaf_hashes_of_links(chunk))
    };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(count / 16)
        .max(1);
    if threads == 1 {
        return (0..count).map(root_of).collect();
    }
    let mut roots = vec![[0u8; 32]; count];
    let per = count.div_ceil(threads);
    std::thread::scope(|s| {
        for (t, out) in roots.chunks_mut(per).enumerate() {
            let root_of = &root_of;
            s.spawn(move || {
                for (i, r) in out.iter_mut().enumerate() {
                    *r = root_of(t * per + i);
                }
            });
        }
    });
    roots
}
