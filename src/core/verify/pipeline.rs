//! Verification on two threads: the reading thread scans the bundle and writes the manifest digest's
//! canonical text (hashed on the digest's own thread), and hands each entry's fields, in batches, to
//! a checking thread that owns the [`Verifier`]. The checker sees exactly the calls, in the same
//! order, that it would see as the reader's visitor, so the report is the same.

use super::{Report, Verifier, VerifyOptions};
use crate::core::bundle::fast_entry::{FastEntry, FastLayout};
use crate::core::bundle::{
    read_bundle, BundleVisitor, EntryRef, EntryView, LogFields, ReadError, SchemaProblem,
    SchemaProblemKind,
};
use std::borrow::Cow;
use std::io::Read;
use std::ops::Range;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

/// Entries per batch (about 150 KB of text for the common entry: small enough to be read back
/// from the cache it was written through).
const BATCH_ENTRIES: usize = 256;
/// Batches on their way to the checker (bounds memory whatever the bundle's size).
const IN_FLIGHT: usize = 8;

/// One call the checker makes on the [`Verifier`].
enum Item {
    Entry {
        log: usize,
        index: usize,
        /// nodeId, tHlc, jobId, partitionKey, payload, payloadHash, prevLink, link, enqueuedAt as
        /// ranges of the batch's text.
        fields: [Range<usize>; 9],
        has_partition_key: bool,
        has_prev_link: bool,
        /// `Some` for an entry the reader could not parse strictly (its problems).
        problems: Option<Vec<SchemaProblem>>,
    },
    /// An entry of the reader's fast path: its raw text (a range of the batch's text) and where
    /// its members are; the checker unescapes it.
    Fast {
        log: usize,
        index: usize,
        text: Range<usize>,
        /// The payload unescaped by the reader (a range of the batch's text), when it had escapes.
        payload: Option<Range<usize>>,
        layout: FastLayout,
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
    /// A payload being unescaped.
    scratch: String,
}

impl Feeder {
    fn flush(&mut self) {
        let next = self.recycled.try_recv().unwrap_or_default();
        let full = std::mem::replace(&mut self.batch, next);
        // A send fails only when the checker is gone (it panicked); the join reports that.
        let _ = self.tx.send(full);
    }
}

impl Feeder {
    fn pushed(&mut self) {
        self.batch.entries += 1;
        if self.batch.entries >= BATCH_ENTRIES {
            self.flush();
        }
    }
}

impl BundleVisitor for Feeder {
    /// One copy of the entry's raw text, and of its payload unescaped when it has escapes (done
    /// here: the checking thread has more to do than this one).
    fn fast_entry(
        &mut self,
        log: usize,
        index: usize,
        _span: Range<u64>,
        found: &FastEntry<'_>,
        _payload: &mut String,
    ) {
        let text = &mut self.batch.text;
        let start = text.len();
        text.push_str(found.text());
        let end = text.len();
        let payload = found.unescape_payload(&mut self.scratch).then(|| {
            text.push_str(&self.scratch);
            end..text.len()
        });
        self.batch.items.push(Item::Fast {
            log,
            index,
            text: start..end,
            payload,
            layout: found.layout(),
        });
        self.pushed();
    }

    fn entry(&mut self, log: usize, index: usize, _span: Range<u64>, view: EntryView<'_>) {
        let e = view.entry();
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
        let problems = match view {
            EntryView::Parsed(_) => None,
            EntryView::Invalid { problems, .. } => Some(problems.to_vec()),
        };
        self.batch.items.push(Item::Entry {
            log,
            index,
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

/// The checking thread: replays each batch's calls on the verifier and sends the batch back.
fn check_batches(mut v: Verifier<'_>, rx: Receiver<Batch>, back: Sender<Batch>) -> Verifier<'_> {
    let mut payload = String::new();
    for mut batch in rx {
        let Batch { text, items, .. } = &mut batch;
        for item in items.drain(..) {
            match item {
                Item::Fast {
                    log,
                    index,
                    text: range,
                    payload: unescaped,
                    layout,
                } => {
                    let unescaped = unescaped.map(|r| &text[r]);
                    let entry = (&text[range], unescaped, layout);
                    check_fast(&mut v, (log, index), entry, &mut payload);
                }
                Item::EntriesBegin(log, fields) => v.entries_begin(log, &fields),
                Item::LogEnd(log, fields) => v.log_end(log, &fields),
                Item::Entry {
                    log,
                    index,
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
                    v.check_entry_flags(log, index, &view);
                }
            }
        }
        batch.text.clear();
        batch.entries = 0;
        let _ = back.send(batch);
    }
    v
}

/// Checks an entry of the fast path from its copied text (and its payload, when the reader
/// unescaped it).
fn check_fast(
    v: &mut Verifier<'_>,
    (log, index): (usize, usize),
    (text, unescaped, layout): (&str, Option<&str>, FastLayout),
    payload: &mut String,
) {
    match FastEntry::with_text(text, layout) {
        Some(found) => {
            let entry = match unescaped {
                Some(p) => found.entry_with_payload(p),
                None => found.entry(payload),
            };
            v.check_entry_flags(log, index, &EntryView::Parsed(&entry));
        }
        // The copy is the text the layout was found in; should that ever not hold, the entry is
        // reported, not dropped.
        None => {
            let problems = [SchemaProblem {
                path: format!("$.jobLogs[{log}].entries[{index}]"),
                log: Some(log),
                index: Some(index),
                kind: SchemaProblemKind::Malformed,
                message: "the entry's copy for the checking thread does not match where its members were found (an airlock bug; please report it)".into(),
            }];
            let empty = || Cow::Borrowed("");
            let partial = EntryRef {
                node_id: empty(),
                t_hlc: empty(),
                job_id: empty(),
                partition_key: None,
                payload: empty(),
                payload_hash: empty(),
                prev_link: None,
                link: empty(),
                enqueued_at: empty(),
            };
            v.check_entry_flags(
                log,
                index,
                &EntryView::Invalid {
                    partial: &partial,
                    problems: &problems,
                },
            );
        }
    }
}

/// Verifies the bundle `reader` streams, reading on this thread and checking entries on another
/// (on this one alone when no thread can be started).
pub(super) fn verify_two_threads<R: Read>(
    reader: R,
    opts: &VerifyOptions<'_>,
) -> Result<Report, ReadError> {
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel::<Batch>(IN_FLIGHT);
        let (back, recycled) = channel::<Batch>();
        let checker = Verifier::new(opts.clone());
        let spawned = std::thread::Builder::new()
            .name("verify-entries".into())
            .spawn_scoped(scope, move || check_batches(checker, rx, back));
        let Ok(handle) = spawned else {
            let mut v = Verifier::new(opts.clone());
            let summary = read_bundle(reader, &mut v)?;
            return Ok(v.finish(&summary));
        };
        let mut feeder = Feeder {
            tx,
            recycled,
            batch: Batch::default(),
            scratch: String::new(),
        };
        let summary = read_bundle(reader, &mut feeder);
        feeder.flush();
        // Closing the channel lets the checker finish.
        drop(feeder);
        let v = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        Ok(v.finish(&summary?))
    })
}
