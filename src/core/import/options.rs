//! What every import stage takes and may fail with: the options, the live progress counters and
//! the error of an import that could not run.

use crate::core::bundle::BundleFileError;
use crate::core::hlc::DEFAULT_MAX_CLOCK_SKEW;
use crate::core::store::scheduler::{SchedulerError, SnapshotSigner, DEFAULT_BATCH_SIZE};
use crate::core::store::StoreError;
use crate::core::trust::TrustSet;
use std::sync::atomic::{AtomicU64, AtomicU8};
use std::sync::Arc;
use std::time::Duration;

/// Bytes of dropped entries kept in memory per call (shared by its inputs) before the rest go to
/// a temporary file (some 20,000 entries).
pub const DROPPED_MEMORY: usize = 4 << 20;

/// How to import.
#[derive(Clone)]
pub struct ImportOptions<'a> {
    /// Import the verified prefix of broken logs instead of refusing (conflicts still refuse).
    pub force: bool,
    /// Report unsigned bundles as `signature-missing`.
    pub require_signature: bool,
    /// Trusted keys for the bundles' signatures (`None`: no key is trusted).
    pub trust: Option<&'a TrustSet>,
    /// Entries further ahead of `now_ms` are `clock-skew` findings.
    pub max_clock_skew: Duration,
    /// The verifying machine's clock, Unix ms.
    pub now_ms: u64,
    /// This machine's node id: its clock witnesses the largest imported HLC.
    pub node_id: String,
    /// Entries per automatic batch snapshot.
    pub batch_size: u64,
    /// Signs automatic snapshots when set.
    pub snapshot_signer: Option<SnapshotSigner<'a>>,
    /// Progress counters for displays.
    pub progress: Option<Arc<ImportProgress>>,
    /// Inputs of at least this many bytes in all are written with a rollback journal when no other
    /// connection has the store open ([`Store::with_bulk_journal`](crate::core::store::Store::with_bulk_journal)); smaller imports stay in WAL.
    pub bulk_journal_min_bytes: u64,
    /// The names the report and the `imports` table give the inputs, in the order of the paths,
    /// instead of the paths themselves (`airlock serve` spools uploads under temporary names and
    /// reports them by the name the client gave).
    pub input_names: Option<&'a [String]>,
    /// A dry run lists at most this many of the entries to append (every link is still computed)
    /// and this many entries per swimlane, so a preview of any size stays bounded (the console
    /// sets [`PREVIEW_WINDOW`]); `None` lists everything (`jobs import --dry-run --json`).
    pub preview_window: Option<usize>,
    /// The report's `dropped` list is left empty and its entries are read back (from memory, the
    /// rest from a temporary file) as the report is written: its JSON and
    /// `report_text::import_lines` list every one, as
    /// [`ImportReport::dropped_entries`](crate::core::import::ImportReport::dropped_entries) does
    /// (`jobs import` sets it, so a
    /// bundle dropping millions of entries imports in bounded memory). Otherwise (the default)
    /// `dropped` holds every one.
    pub stream_dropped: bool,
    /// Bytes of dropped entries held in memory, shared by the inputs, before the rest go to a
    /// temporary file (default [`DROPPED_MEMORY`]; tests set it small).
    pub dropped_memory: usize,
}

/// The console's [`ImportOptions::preview_window`].
pub const PREVIEW_WINDOW: usize = 10_000;

impl ImportOptions<'_> {
    pub fn new(node_id: impl Into<String>) -> Self {
        ImportOptions {
            force: false,
            require_signature: false,
            trust: None,
            max_clock_skew: DEFAULT_MAX_CLOCK_SKEW,
            now_ms: crate::core::hlc::unix_ms_now(),
            node_id: node_id.into(),
            batch_size: DEFAULT_BATCH_SIZE,
            snapshot_signer: None,
            progress: None,
            bulk_journal_min_bytes: BULK_JOURNAL_BYTES,
            input_names: None,
            preview_window: None,
            stream_dropped: false,
            dropped_memory: DROPPED_MEMORY,
        }
    }
}

/// Live counters of a running import (read them from another thread).
#[derive(Debug, Default)]
pub struct ImportProgress {
    /// Total bytes of all inputs.
    pub bytes_total: AtomicU64,
    /// Bytes read so far.
    pub bytes_read: AtomicU64,
    /// Entries to write (known once the plan is made).
    pub entries_total: AtomicU64,
    /// Entries written so far.
    pub entries_written: AtomicU64,
    /// 0 verifying, 1 planning, 2 writing, 3 done.
    pub stage: AtomicU8,
}

pub const STAGE_VERIFYING: u8 = 0;
pub const STAGE_PLANNING: u8 = 1;
pub const STAGE_WRITING: u8 = 2;
pub const STAGE_DONE: u8 = 3;

/// Why an import could not run at all (exit status 2; nothing in the store changed).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("no bundle files given")]
    NoInputs,
    #[error("{file}: {error}")]
    Unreadable {
        file: String,
        error: BundleFileError,
    },
    #[error("{file}: no tenantId, so it cannot be imported into a tenant chain (is it a bundle? `airlock jobs verify` lists what is wrong with it)")]
    NoTenant { file: String },
    #[error("the bundles belong to different tenants ({0}); import each tenant's bundles in a separate call")]
    MixedTenants(String),
    #[error("{file}: the entry at byte {offset} is not what was verified: the file changed during the import; nothing was imported (import it again once nothing writes to it)")]
    InputChanged { file: String, offset: u64 },
    #[error("invalid node id for this machine: {0}")]
    NodeId(String),
    #[error("the local clock refused the largest imported timestamp: {0}")]
    Clock(#[from] crate::core::hlc::ClockSkewError),
    #[error("cannot sort the imported job rows in the temporary directory ({0}); nothing was imported (free space there, or point TMPDIR at a directory with room, and import again)")]
    JobOrder(std::io::Error),
    #[error("cannot keep the list of dropped entries in a temporary file in the temporary directory ({0}); nothing was imported (free space there, or point TMPDIR at a directory with room, and import again)")]
    DroppedList(std::io::Error),
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ImportError {
    /// Whether the fault lies with this machine rather than with the bundles given: its temporary
    /// directory, its node id, or a file it holds changing under it. A service answers these as its
    /// own failure (5xx), the rest as the caller's (4xx); store errors are the store's.
    pub fn is_local_fault(&self) -> bool {
        matches!(
            self,
            ImportError::InputChanged { .. }
                | ImportError::NodeId(_)
                | ImportError::JobOrder(_)
                | ImportError::DroppedList(_)
        )
    }
}

impl From<rusqlite::Error> for ImportError {
    fn from(e: rusqlite::Error) -> Self {
        ImportError::Store(StoreError::Sql(e))
    }
}

/// Default [`ImportOptions::bulk_journal_min_bytes`]: 32 MiB of bundles (some 60,000 entries).
pub const BULK_JOURNAL_BYTES: u64 = 32 << 20;
