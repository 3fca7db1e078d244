//! Background work: engine calls run on tokio's blocking pool and report back as [`TaskMsg`]s on a
//! channel the app loop selects over. The loop never blocks on them.

use crate::core::bundle::catalog::Listing;
use crate::core::bundle::index::ChainIndex;
use crate::core::outbox::{Envelope, ReplaySummary, StatusCounts};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// The run's trusted keys (trust store), shared with background verifications.
pub type SharedTrustSet = Arc<crate::core::trust::TrustSet>;

/// What a file looked like when it was listed (the engine's, shared with the inbox).
pub use crate::core::inbox::{stamp_of, FileStamp};

/// A result coming back from background work.
pub enum TaskMsg {
    /// The directory's listing (names + stamps only; cheap).
    Polled(Result<Vec<(PathBuf, FileStamp)>, String>),
    /// One file examined in one pass: its listing and, for a bundle, its index (which holds
    /// the verification report).
    Examined {
        path: PathBuf,
        stamp: FileStamp,
        listing: Listing,
        index: Option<Box<ChainIndex>>,
    },
    /// The outbox's counts and (filtered) envelope list.
    OutboxLoaded(Result<(StatusCounts, Vec<Envelope>), String>),
    /// An outbox operation (retry, cancel, export) finished.
    OutboxOpDone(Result<String, String>),
    /// A replay run finished.
    ReplayDone(Result<ReplaySummary, String>),
    /// A keys-and-trust operation finished: its message, whether the trust store changed and the
    /// engine's warnings, or the error.
    KeyOpDone(Result<crate::tui::screens::keys::KeyOpDone, String>),
    /// A merge plan of the Merge preview finished (`token`: the shown plan's when it was asked
    /// for; `force`: the `F` request's number, for a plan made with `--force`).
    Planned {
        token: u64,
        force: Option<u64>,
        result: Result<Box<crate::core::import::ImportPlan>, String>,
    },
    Imported(Result<Box<crate::core::import::ImportResult>, String>),
    /// The Scheduler chain screen's background work.
    Scheduler(crate::tui::screens::scheduler::SchedMsg),
    /// The audit log for the Activity screen.
    Activity(crate::tui::screens::activity::ActivityLoad),
    /// Where a jump's source entry is in the opened bundle: (node log, entry).
    Located {
        token: u64,
        at: Option<(usize, usize)>,
    },
    /// Imported / partly / not, per listed bundle, from the store.
    ImportStates(Result<Vec<(PathBuf, crate::core::import::ImportState)>, String>),
    /// A triage report written (its files), or why not; `warnings`: the engine's about the
    /// signing key (readable by other users, not used and why), shown with the result.
    TriageWritten {
        result: Result<crate::core::triage::Written, String>,
        warnings: Vec<String>,
    },
    /// The inbox's files with their settle state and its refused entries (`console --inbox`),
    /// from its watcher thread.
    InboxScanned(Result<crate::core::inbox::Picture, String>),
    /// An inbox decision carried out: the file filed (and what the import did), or why not.
    /// `warnings`: the engine's about the report's signing key, shown with the result.
    InboxFiled {
        path: PathBuf,
        result: Result<(crate::core::inbox::Filed, String), String>,
        warnings: Vec<String>,
    },
    /// The selected Ledger job's lanes, read from the WALs (`token`: the request's).
    LedgerLanes {
        token: u64,
        lanes: Vec<crate::core::ledger::timeline::TimelineLane>,
    },
    /// The Notifications screen's emissions and deliveries, read from the store (`token`: the
    /// read's).
    NotificationsLoaded {
        token: u64,
        loaded: crate::tui::screens::notifications::Loaded,
    },
    /// A dead letter put back in the queue (`id`), or why not.
    NotifyRetried {
        id: i64,
        result: Result<(), String>,
    },
    /// A node WAL of the Bundles directory examined (what recovery would do), or why not.
    WalExamined {
        path: PathBuf,
        stamp: FileStamp,
        result: Result<Box<crate::core::wal::Recovery>, String>,
    },
    /// A WAL recovered from the WAL screen (`core::wal::recover`), or why not.
    WalRecovered {
        path: PathBuf,
        result: Result<crate::core::wal::Recovery, String>,
    },
    /// The Ledger screen's fold of the workspace's WALs (`token`: the request's).
    LedgerFolded {
        token: u64,
        folded: crate::tui::screens::ledger::Folded,
    },
    /// The diff of the first two ledgers (`token`: the request's).
    LedgerDiffed {
        token: u64,
        report: Result<crate::core::ledger::antientropy::SyncReport, String>,
    },
    /// A Chain `/` search step or `:goto job` lookup: its progress, then its result (`token`:
    /// the scan's; a cancelled scan sends no result).
    Scanned {
        token: u64,
        event: crate::tui::search::ScanEvent,
    },
    /// A bundle indexed for the chain view.
    Indexed {
        token: u64,
        result: Result<Box<ChainIndex>, String>,
    },
}

/// Spawns background work and counts what is still running.
#[derive(Clone)]
pub struct Tasks {
    tx: UnboundedSender<TaskMsg>,
    handle: tokio::runtime::Handle,
    in_flight: Arc<AtomicUsize>,
}

/// Where finished work arrives.
pub struct TaskInbox {
    pub rx: UnboundedReceiver<TaskMsg>,
    in_flight: Arc<AtomicUsize>,
}

/// The console's async runtime: one worker for the UI's tasks and a few blocking threads for the
/// engine work they start (verification, indexing, store reads).
pub fn console_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(4)
        .enable_all()
        .build()
}

impl Tasks {
    /// A spawner on `handle` and its inbox.
    pub fn new(handle: tokio::runtime::Handle) -> (Tasks, TaskInbox) {
        let (tx, rx) = unbounded_channel();
        let in_flight = Arc::new(AtomicUsize::new(0));
        (
            Tasks {
                tx,
                handle,
                in_flight: in_flight.clone(),
            },
            TaskInbox { rx, in_flight },
        )
    }

    /// A sender on the app's channel, for a thread of its own (the inbox watcher).
    pub fn sender(&self) -> UnboundedSender<TaskMsg> {
        self.tx.clone()
    }

    /// Runs `work` on the blocking pool; it sends its results through the sender it is given.
    pub fn spawn(&self, work: impl FnOnce(&UnboundedSender<TaskMsg>) + Send + 'static) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let tx = self.tx.clone();
        let in_flight = self.in_flight.clone();
        self.handle.spawn_blocking(move || {
            struct Done(Arc<AtomicUsize>);
            impl Drop for Done {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let _done = Done(in_flight);
            lower_thread_priority();
            work(&tx);
        });
    }
}

impl Tasks {
    /// Runs `work` in the background and sends the one message it makes.
    pub fn run(&self, work: impl FnOnce() -> TaskMsg + Send + 'static) {
        self.spawn(move |tx| {
            let _ = tx.send(work());
        });
    }

    /// Runs async work (e.g. a replay) on the runtime; it sends its results itself.
    pub fn spawn_async<F>(&self, work: impl FnOnce(UnboundedSender<TaskMsg>) -> F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let fut = work(self.tx.clone());
        let in_flight = self.in_flight.clone();
        self.handle.spawn(async move {
            fut.await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

impl TaskInbox {
    /// Background jobs not finished yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

/// Background work (verification, indexing, planning) runs at a lower CPU priority than the
/// thread that reads keys and draws, so a busy console still answers keys at once on a loaded
/// machine. Only the blocking-pool thread running the work is lowered: the runtime's worker
/// thread, which drives the timers and the signal and I/O events, keeps its priority (lowering
/// every runtime thread, as before, starved the frame timer under load). Linux: `setpriority`
/// on the thread's own id affects that thread only.
fn lower_thread_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid has no preconditions; setpriority on our own thread id only lowers it.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}
