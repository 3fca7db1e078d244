//! What the reader hands its visitor, and what one pass found besides the entries.

use super::super::model::{BundleHeader, EntryRef};
use super::problems::SchemaProblem;
use std::ops::Range;

/// An entry as the visitor sees it.
pub enum EntryView<'a> {
    /// Every field present with the right type.
    Parsed(&'a EntryRef<'a>),
    /// Some fields missing or ill-typed; well-typed ones are kept (others are empty strings).
    Invalid {
        partial: &'a EntryRef<'a>,
        problems: &'a [SchemaProblem],
    },
}

impl<'a> EntryView<'a> {
    pub fn entry(&self) -> &'a EntryRef<'a> {
        match self {
            EntryView::Parsed(e) => e,
            EntryView::Invalid { partial, .. } => partial,
        }
    }
}

/// The fields of one log object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFields {
    pub node_id: Option<String>,
    pub last_hlc: Option<String>,
    pub chain_head: Option<String>,
    pub entry_count: usize,
    /// Byte range of the log object in the file.
    pub span: Range<u64>,
}

/// Receives a bundle's contents in file order.
pub trait BundleVisitor {
    fn entry(&mut self, log: usize, index: usize, span: Range<u64>, entry: EntryView<'_>);
    /// Called when a log's `entries` array starts, with the log's fields read so far.
    fn entries_begin(&mut self, _log: usize, _fields_so_far: &LogFields) {}
    fn log_end(&mut self, log: usize, fields: &LogFields);
}

/// A visitor that ignores everything (for summaries).
pub struct NoVisitor;
impl BundleVisitor for NoVisitor {
    fn entry(&mut self, _: usize, _: usize, _: Range<u64>, _: EntryView<'_>) {}
    fn log_end(&mut self, _: usize, _: &LogFields) {}
}

/// What one pass over a bundle found besides the entries.
#[derive(Debug, Clone, Default)]
pub struct ReadSummary {
    /// Header fields (missing or ill-typed ones are empty strings and listed in `problems`).
    pub header: BundleHeader,
    pub has_signature: bool,
    pub logs: Vec<LogFields>,
    pub computed_manifest_digest: String,
    pub problems: Vec<SchemaProblem>,
    pub bytes: u64,
    pub entries: usize,
}
