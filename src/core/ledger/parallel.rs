//! Folding several ledgers at once: one reader thread per core takes the next WAL and folds it
//! into one shared fold, split into shards by job id (each behind its own lock), so every job's
//! state exists once whatever the number of readers; at the end the shards (disjoint job sets)
//! are joined into one [`Fold`]. The order in which readers take WALs and events does not matter
//! (the fold is a join of semilattices).

use super::batch::{Batch, BATCH};
use super::contest::Occurrence;
use super::event::Event;
use super::fold::{Counted, Finding, Fold, FoldSink};
use super::progress::ProgressRef;
use super::seeded::SeededState;
use super::source::fold_copy_into;
use super::LedgerError;
use std::hash::BuildHasher;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Shards of the shared fold (many more than readers, so two rarely want the same one).
const SHARDS: usize = 64;

/// A fold split by job id into shards.
struct Shards {
    pick: SeededState,
    shards: Vec<Mutex<Fold>>,
}

impl Shards {
    fn new() -> Shards {
        Shards {
            pick: SeededState::default(),
            shards: (0..SHARDS).map(|_| Mutex::new(Fold::default())).collect(),
        }
    }

    fn index(&self, job_id: &str) -> usize {
        (self.pick.hash_one(job_id) % SHARDS as u64) as usize
    }

    /// The shard of `job_id`, locked. A reader that panicked holding it stopped the fold (its
    /// thread's result is an error), so a poisoned lock is just taken over.
    fn lock(&self, i: usize) -> MutexGuard<'_, Fold> {
        self.shards[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn into_fold(self) -> Fold {
        let folds: Vec<Fold> = self
            .shards
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
            .collect();
        let mut fold = Fold::default();
        fold.jobs.reserve(folds.iter().map(|f| f.jobs.len()).sum());
        for f in folds {
            fold.merge(f);
        }
        fold
    }
}

/// One reader's handle on the shared fold, with the progress reports it holds per shard
/// ([`Batch`]); [`ShardSink::flush`] applies what is held.
struct ShardSink<'a>(&'a Shards, Vec<Batch>);

impl<'a> ShardSink<'a> {
    fn new(shards: &'a Shards) -> ShardSink<'a> {
        ShardSink(shards, (0..SHARDS).map(|_| Batch::default()).collect())
    }

    fn apply(&mut self, i: usize) {
        let mut fold = self.0.lock(i);
        self.1[i].drain(|p| fold.apply_progress(p));
    }

    /// Applies every held report.
    fn flush(&mut self) {
        for i in 0..SHARDS {
            if !self.1[i].is_empty() {
                self.apply(i);
            }
        }
    }
}

impl FoldSink for ShardSink<'_> {
    fn progress(&mut self, p: &ProgressRef<'_>) {
        let i = self.0.index(p.job_id);
        self.1[i].push(p);
        if self.1[i].len() >= BATCH {
            self.apply(i);
        }
    }

    fn event(&mut self, event: Event, payload: &[u8], at: impl FnOnce() -> Occurrence) {
        let i = self.0.index(event.job_id().as_str());
        self.0.lock(i).apply_event(event, payload, at)
    }

    fn finding(&mut self, f: Finding) {
        self.0.lock(0).add_finding(f)
    }

    fn join(&mut self, other: Fold) {
        let (jobs, rest) = other.take_jobs();
        self.0.lock(0).merge(rest);
        for (id, job) in jobs {
            self.0.lock(self.0.index(id.as_str())).merge_job(id, job);
        }
    }
}

/// Folds several ledgers (each labelled by its path), in parallel; the order does not matter.
/// Ledgers of one node must be copies of one log (each event is folded once); copies that differ
/// at an LSN are refused before anything is folded ([`super::copies::check`]).
pub fn fold_ledgers(paths: &[PathBuf]) -> Result<Fold, LedgerError> {
    fold_ledgers_counted(paths, &AtomicU64::new(0))
}

/// [`fold_ledgers`], adding the bytes read to `read` as it goes (a console's progress: the sum
/// of the files' sizes when done).
pub fn fold_ledgers_counted(paths: &[PathBuf], read: &AtomicU64) -> Result<Fold, LedgerError> {
    let held = super::copies::check(paths)?;
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(paths.len());
    if workers <= 1 {
        let mut fold = Fold::default();
        for (p, held) in paths.iter().zip(&held) {
            let mut sink = Counted {
                inner: &mut fold,
                read,
            };
            fold_copy_into(p, &crate::core::text::visible_path(p), held, &mut sink)?;
        }
        return Ok(fold);
    }
    let shards = Shards::new();
    let next = AtomicUsize::new(0);
    let results: Vec<Result<(), LedgerError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut sink = Counted {
                        inner: ShardSink::new(&shards),
                        read,
                    };
                    let inputs = std::iter::from_fn(|| {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        paths.get(i).zip(held.get(i))
                    });
                    for (p, held) in inputs {
                        fold_copy_into(p, &crate::core::text::visible_path(p), held, &mut sink)?;
                    }
                    sink.inner.flush();
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(LedgerError::WorkerPanicked)))
            .collect()
    });
    results.into_iter().collect::<Result<(), _>>()?;
    Ok(shards.into_fold())
}
