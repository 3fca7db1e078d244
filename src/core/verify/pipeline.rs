//! Reading and checking on two threads: the reading thread scans the bundle and writes the manifest
//! digest's canonical text (hashed on the digest's own thread), and hands each entry's fields, in
//! batches, to a second thread that makes the visitor's calls: the [`Verifier`] for `jobs verify`,
//! the import's collector (a verifier that also keeps each entry's key). The visitor sees exactly
//! the calls, in the same order, that it would see as the reader's visitor, so the report is the
//! same.

use super::{BoundedReport, Report, Verifier, VerifyOptions};
use crate::core::bundle::{
    read_bundle, BundleFileError, BundleVisitor, EntryRef, EntryView, LogFields, ReadError,
    ReadSummary, SchemaProblem,
};
use std::borrow::Cow;
use std::io::Read;
use std::ops::Range;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

/// Entries per batch: about 340 KB of member values for the common entry, small enough to be read
/// back from the cache it was written through, large enough that the two threads hand batches over
/// (and wake each other) a thousand times per million entries, not four thousand (256 measured 5%
/// slower on 1 M entries; 4,096 no faster).
const BATCH_ENTRIES: usize = 1024;
/// Batches on their way to the checker (bounds memory whatever the bundle's size).
const IN_FLIGHT: usize = 4;

/// One call the second thread makes on the visitor.
enum Item {
    Entry {
        log: usize,
        index: usize,
        /// Where the entry is in the file.
        span: Range<u64>,
        /// nodeId, tHlc, jobId, partitionKey, payload, payloadHash, prevLink, link, enqueuedAt as
        /// ranges of the batch's text.
        fields: [Range<usize>; 9],
        has_partition_key: bool,
        has_prev_link: bool,
        /// `Some` for an entry the reader could not parse strictly (its problems).
        problems: Option<Vec<SchemaProblem>>,
    },
    EntriesBegin(usize, LogFields),
    LogEnd(usize, LogFields),
}

#[derive(Default)]
struct Batch {
    text: String,
    items: Vec<Item>,
    entries: usize,
}

/// The reader's visitor: copies what it is given into batches for the checker.
struct Feeder {
    tx: SyncSender<Batch>,
    recycled: Receiver<Batch>,
    batch: Batch,
}

impl Feeder {
    fn flush(&mut self) {
        let next = self.recycled.try_recv().unwrap_or_default();
        let full = std::mem::replace(&mut self.batch, next);
        // A send fails only when the second thread is gone (it panicked); the join reports that.
        let _ = self.tx.send(full);
    }

    fn pushed(&mut self) {
        self.batch.entries += 1;
        if self.batch.entries >= BATCH_ENTRIES {
            self.flush();
        }
    }
}

impl BundleVisitor for Feeder {
    /// Copies the entry's member values (not its raw text: a pretty-printed bundle's indentation
    /// is most of that) into the batch; the reader has unescaped the payload.
    fn entry(&mut self, log: usize, index: usize, span: Range<u64>, view: EntryView<'_>) {
        let e = view.entry();
        let problems = match view {
            EntryView::Parsed(_) => None,
            EntryView::Invalid { problems, .. } => Some(problems.to_vec()),
        };
        let text = &mut self.batch.text;
        let mut put = |s: &str| {
            let start = text.len();
            text.push_str(s);
            start..text.len()
        };
        let fields = [
            put(&e.node_id),
            put(&e.t_hlc),
            put(&e.job_id),
            put(e.partition_key.as_deref().unwrap_or_default()),
            put(&e.payload),
            put(&e.payload_hash),
            put(e.prev_link.as_deref().unwrap_or_default()),
            put(&e.link),
            put(&e.enqueued_at),
        ];
        self.batch.items.push(Item::Entry {
            log,
            index,
            span,
            fields,
            has_partition_key: e.partition_key.is_some(),
            has_prev_link: e.prev_link.is_some(),
            problems,
        });
        self.pushed();
    }

    fn entries_begin(&mut self, log: usize, fields_so_far: &LogFields) {
        let item = Item::EntriesBegin(log, fields_so_far.clone());
        self.batch.items.push(item);
    }

    fn log_end(&mut self, log: usize, fields: &LogFields) {
        self.batch.items.push(Item::LogEnd(log, fields.clone()));
    }
}

/// The second thread: replays each batch's calls on the visitor and sends the batch back.
fn replay_batches<V: BundleVisitor>(v: &mut V, rx: Receiver<Batch>, back: Sender<Batch>) {
    for mut batch in rx {
        let Batch { text, items, .. } = &mut batch;
        for item in items.drain(..) {
            match item {
                Item::EntriesBegin(log, fields) => v.entries_begin(log, &fields),
                Item::LogEnd(log, fields) => v.log_end(log, &fields),
                Item::Entry {
                    log,
                    index,
                    span,
                    fields,
                    has_partition_key,
                    has_prev_link,
                    problems,
                } => {
                    let field = |k: usize| Cow::Borrowed(&text[fields[k].clone()]);
                    let e = EntryRef {
                        node_id: field(0),
                        t_hlc: field(1),
                        job_id: field(2),
                        partition_key: has_partition_key.then(|| field(3)),
                        payload: field(4),
                        payload_hash: field(5),
                        prev_link: has_prev_link.then(|| field(6)),
                        link: field(7),
                        enqueued_at: field(8),
                    };
                    let view = match &problems {
                        None => EntryView::Parsed(&e),
                        Some(problems) => EntryView::Invalid {
                            partial: &e,
                            problems,
                        },
                    };
                    v.entry(log, index, span, view);
                }
            }
        }
        batch.text.clear();
        batch.entries = 0;
        let _ = back.send(batch);
    }
}

/// Verifies the bundle `reader` streams, reading on this thread and checking entries on another.
pub(super) fn verify_two_threads<R: Read>(
    reader: R,
    opts: &VerifyOptions<'_>,
) -> Result<Report, ReadError> {
    let mut v = Verifier::new(opts.clone());
    let summary = read_two_threads(reader, &mut v)?;
    Ok(v.finish(&summary))
}

/// [`verify_two_threads`] keeping about `findings_memory` bytes of findings in memory, the rest in
/// a temporary file.
pub(super) fn verify_two_threads_bounded<R: Read>(
    reader: R,
    opts: &VerifyOptions<'_>,
    findings_memory: usize,
) -> Result<BoundedReport, BundleFileError> {
    let mut v = Verifier::with_findings_memory(opts.clone(), findings_memory);
    let summary = read_two_threads(reader, &mut v).map_err(BundleFileError::Syntax)?;
    v.finish_bounded(&summary)
        .map_err(|e| BundleFileError::Io(e.to_string()))
}

/// Reads the bundle `reader` streams on this thread and makes every visitor call, in the same
/// order and with the same values, on `visitor` on a second thread (the visitor's work, checking
/// entries, is then beside the reading); on this thread alone when no thread can be started.
pub fn read_two_threads<R: Read, V: BundleVisitor + Send>(
    reader: R,
    visitor: &mut V,
) -> Result<ReadSummary, ReadError> {
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel::<Batch>(IN_FLIGHT);
        let (back, recycled) = channel::<Batch>();
        // The visitor goes to the thread only once it runs: otherwise it stays here.
        let (lend, borrowed) = sync_channel::<&mut V>(1);
        let spawned = std::thread::Builder::new()
            .name("verify-entries".into())
            .spawn_scoped(scope, move || {
                if let Ok(v) = borrowed.recv() {
                    replay_batches(v, rx, back);
                }
            });
        let Ok(handle) = spawned else {
            return read_bundle(reader, visitor);
        };
        // The thread waits for it first thing, so this send is taken; were it not, everything
        // runs here.
        if let Err(std::sync::mpsc::SendError(visitor)) = lend.send(visitor) {
            return read_bundle(reader, visitor);
        }
        let mut feeder = Feeder {
            tx,
            recycled,
            batch: Batch::default(),
        };
        let summary = read_bundle(reader, &mut feeder);
        feeder.flush();
        // Closing the channel lets the second thread finish.
        drop(feeder);
        if let Err(panic) = handle.join() {
            std::panic::resume_unwind(panic);
        }
        summary
    })
}
