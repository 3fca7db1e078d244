//! The Bundles screen: polling the directory, examining (inspect + verify) new files, its actions.

use super::{App, EXAMINE_PARALLEL};
use crate::core::bundle::catalog;
use crate::core::bundle::index::examine;
use crate::core::inbox::OddEntry;
use crate::core::verify::VerifyOptions;
use crate::tui::action::Action;
use crate::tui::screens::bundles::{BundleRow, VerifyState};
use crate::tui::tasks::{stamp_of, FileStamp, TaskMsg};
use crate::tui::widgets::bars::Level;
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Entries whose index the Bundles rows keep in all (8 M x 16 bytes = 128 MB); a bundle past the
/// budget is indexed again when opened.
const KEPT_INDEX_ENTRIES: usize = 8_000_000;

impl App {
    /// Lists the directory (names and stamps only) in the background.
    pub fn poll_dir(&mut self) {
        if let Some(watch) = &self.drop_inbox {
            // The inbox's own watcher lists it (and knows which files are still copying).
            watch.rescan();
            return;
        }
        if self.polling {
            return;
        }
        self.polling = true;
        let dir = self.config.dir.clone();
        self.tasks.spawn(move |tx| {
            let result = catalog::files_in(&dir)
                .map(|files| {
                    files
                        .into_iter()
                        .map(|p| {
                            let s = stamp_of(&p);
                            (p, s)
                        })
                        .collect()
                })
                .map_err(|e| e.to_string());
            let _ = tx.send(TaskMsg::Polled(result));
        });
    }

    pub(super) fn on_polled(&mut self, files: Vec<(PathBuf, FileStamp)>) -> bool {
        self.on_listed(files, &HashSet::new(), Vec::new())
    }

    /// The directory's files: a row kept while its file is unchanged, else a new row queued for
    /// examining, unless its file is still being copied (`waiting`, inbox mode); then the
    /// entries `refused` (inbox mode: links, FIFOs, sockets, devices), listed and never examined.
    /// True when the list changed.
    pub(super) fn on_listed(
        &mut self,
        files: Vec<(PathBuf, FileStamp)>,
        waiting: &HashSet<PathBuf>,
        refused: Vec<OddEntry>,
    ) -> bool {
        let selected = self.bundles.selected_row().map(|r| r.path.clone());
        let mut changed = !self.bundles.listed_once || self.bundles.dir_error.is_some();
        self.bundles.listed_once = true;
        self.bundles.dir_error = None;
        // The old rows by path: one seeded-hash lookup per listed file (a directory may hold
        // many thousands; a scan of the rows per file was quadratic).
        let mut old: HashMap<PathBuf, BundleRow> = std::mem::take(&mut self.bundles.rows)
            .into_iter()
            .map(|r| (r.path.clone(), r))
            .collect();
        let old_len = old.len();
        let mut rows = Vec::with_capacity(files.len());
        for (path, stamp) in files {
            let wait = waiting.contains(&path);
            match old.remove(&path) {
                Some(r)
                    if r.stamp == stamp
                        && r.refused().is_none()
                        && !(wait ^ matches!(r.verify, VerifyState::Waiting)) =>
                {
                    rows.push(r)
                }
                prev => {
                    changed = true;
                    if !wait {
                        self.examine_queue.push_back(path.clone());
                    }
                    rows.push(BundleRow {
                        path,
                        stamp,
                        listing: None,
                        verify: if wait {
                            VerifyState::Waiting
                        } else {
                            VerifyState::Pending
                        },
                        index: None,
                        header: None,
                        imported: None,
                        new: prev.is_some_and(|r| r.new),
                    });
                }
            }
        }
        for odd in refused {
            match old.remove(&odd.path) {
                Some(r) if r.refused() == Some((odd.kind, odd.reason.as_str())) => rows.push(r),
                _ => {
                    changed = true;
                    rows.push(refused_row(odd));
                }
            }
        }
        if rows.len() != old_len {
            changed = true;
        }
        self.bundles.rows = rows;
        if let Some(p) = selected {
            self.bundles.select_path(&p);
        }
        self.bundles.clamp();
        self.pump_examine();
        changed
    }

    /// Starts queued examinations up to the parallel limit.
    pub(super) fn pump_examine(&mut self) {
        while self.examining < EXAMINE_PARALLEL {
            let Some(path) = self.examine_queue.pop_front() else {
                break;
            };
            let Some(row) = self.bundles.row_mut(&path) else {
                continue;
            };
            if !matches!(row.verify, VerifyState::Pending) {
                continue;
            }
            let counter = Arc::new(AtomicU64::new(0));
            row.verify = VerifyState::Running(counter.clone());
            let stamp = row.stamp;
            self.examining += 1;
            if crate::core::wal::is_wal_path(&path) {
                // A node WAL: what recovery would do, read in the background like a bundle.
                self.tasks.run(move || {
                    let result = crate::core::wal::examine_counted(&path, &counter)
                        .map(Box::new)
                        .map_err(|e| e.to_string());
                    TaskMsg::WalExamined {
                        path,
                        stamp,
                        result,
                    }
                });
                continue;
            }
            let (trust, policy) = (self.trust.clone(), self.verify_policy());
            self.tasks.spawn(move |tx| {
                let opts = VerifyOptions::under(&trust, policy);
                let examined = examine(&path, &opts, Some(counter));
                let _ = tx.send(TaskMsg::Examined {
                    path,
                    stamp,
                    listing: examined.listing,
                    index: examined.index.map(Box::new),
                });
            });
        }
    }

    /// How many more entries the Bundles rows may keep indexed (16 bytes each).
    pub(super) fn index_budget(&self) -> usize {
        let kept: usize = self
            .bundles
            .rows
            .iter()
            .filter_map(|r| r.index.as_ref())
            .map(|i| i.entry_count())
            .sum();
        KEPT_INDEX_ENTRIES.saturating_sub(kept)
    }

    /// Re-reads the trust store after a change and verifies every bundle again against it.
    pub(super) fn reload_trust(&mut self) {
        match crate::core::trust::TrustStore::open(&self.config.trust_store) {
            Ok(store) => self.trust = Arc::new(store.trust_set()),
            Err(e) => {
                self.say(Level::Error, e.to_string());
                return;
            }
        }
        let paths: Vec<PathBuf> = self
            .bundles
            .rows
            .iter_mut()
            .filter(|r| r.is_bundle() && !matches!(r.verify, VerifyState::Running(_)))
            .map(|r| {
                r.verify = VerifyState::Pending;
                r.path.clone()
            })
            .collect();
        self.examine_queue.extend(paths);
        self.pump_examine();
    }

    /// The Bundles screen's actions (routed here by [`App::apply`]).
    pub(super) fn bundles_action(&mut self, a: Action) -> ControlFlow<bool> {
        match a {
            Action::Open => {
                let Some(row) = self.bundles.selected_row() else {
                    self.say(Level::Info, "nothing selected");
                    return ControlFlow::Break(true);
                };
                // Never opened, whatever its name says (a link named `x.alwl` is not a WAL).
                if let Some((kind, why)) = row.refused() {
                    let text = format!(
                        "{} is refused ({}), not opened: {}",
                        row.file_name(),
                        kind.word(),
                        crate::text::untrusted(why)
                    );
                    self.say(Level::Warning, text);
                    return ControlFlow::Break(true);
                }
                if crate::core::wal::is_wal_path(&row.path) {
                    let path = row.path.clone();
                    self.open_wal(&path);
                    return ControlFlow::Break(true);
                }
                if !row.is_bundle() {
                    let text = match &row.verify {
                        VerifyState::NotBundle(r, cause) => {
                            format!("{} is {}: {r}", row.file_name(), cause.label())
                        }
                        _ => format!("{} has not been read yet", row.file_name()),
                    };
                    self.say(Level::Warning, text);
                    return ControlFlow::Break(true);
                }
                let path = row.path.clone();
                self.mark_seen(&path);
                self.chain_target = None;
                self.open_chain(path);
            }
            Action::Rescan => {
                for r in &mut self.bundles.rows {
                    r.stamp.modified = None;
                }
                self.poll_dir();
                self.say(Level::Info, "rescanning the directory");
            }
            Action::Reverify => {
                let Some(path) = self.bundles.selected_row().map(|r| r.path.clone()) else {
                    return ControlFlow::Break(false);
                };
                if let Some(r) = self.bundles.row_mut(&path) {
                    if r.is_bundle() && !matches!(r.verify, VerifyState::Running(_)) {
                        r.verify = VerifyState::Pending;
                        self.examine_queue.push_back(path);
                        self.pump_examine();
                    }
                }
            }
            Action::ToggleMark => {
                if self.bundles.toggle_mark() {
                    self.bundles.move_by(1);
                } else {
                    self.say(
                        Level::Info,
                        "only bundles can be marked for a merge preview",
                    );
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// The row of an inbox entry that is refused: listed with what it is and why, never examined.
fn refused_row(odd: OddEntry) -> BundleRow {
    BundleRow {
        path: odd.path,
        // Not even its metadata is read here: nothing of it is shown but its name and kind.
        stamp: FileStamp {
            size: 0,
            modified: None,
        },
        listing: None,
        verify: VerifyState::Refused(odd.kind, odd.reason),
        index: None,
        header: None,
        imported: None,
        new: false,
    }
}

impl App {
    /// The directory could not be listed.
    pub(super) fn on_poll_failed(&mut self, e: String) -> bool {
        let changed = self.bundles.dir_error.as_deref() != Some(e.as_str());
        self.bundles.dir_error = Some(e);
        self.bundles.listed_once = true;
        changed
    }

    pub(super) fn on_examined(
        &mut self,
        path: std::path::PathBuf,
        stamp: crate::tui::tasks::FileStamp,
        listing: crate::core::bundle::catalog::Listing,
        index: Option<Box<crate::core::bundle::index::ChainIndex>>,
    ) -> bool {
        self.examining = self.examining.saturating_sub(1);
        let budget = self.index_budget();
        let row = self.bundles.row_mut(&path);
        // A refused entry (the file was swapped for a link meanwhile) never takes a result.
        if let Some(row) = row.filter(|r| r.stamp == stamp && r.refused().is_none()) {
            row.verify = match (&listing.kind, &index) {
                (catalog::ListingKind::NotBundle { reason, cause }, _) => {
                    VerifyState::NotBundle(reason.clone(), *cause)
                }
                (_, Some(ix)) => VerifyState::Done(Box::new(ix.report.clone())),
                (_, None) => VerifyState::Failed("not indexed".into()),
            };
            row.listing = Some(listing);
            row.header = index.as_ref().map(|ix| ix.header.clone());
            // Kept for the Chain screen (no second read) while within the budget.
            row.index = index
                .filter(|ix| ix.entry_count() <= budget)
                .map(std::sync::Arc::from);
        }
        self.examined_one();
        true
    }

    /// After one file of a pass (a bundle or a WAL) is examined: the next queued ones start, and
    /// once every file of the pass is examined, whichever kind finished last, the store is asked
    /// which bundles are imported (the STORE column).
    fn examined_one(&mut self) {
        self.pump_examine();
        if self.examining == 0 && self.examine_queue.is_empty() {
            self.refresh_import_states();
        }
    }

    /// A node WAL of the directory examined: its row shows what recovery would do.
    pub(super) fn on_wal_examined(
        &mut self,
        path: PathBuf,
        stamp: crate::tui::tasks::FileStamp,
        result: Result<Box<crate::core::wal::Recovery>, String>,
    ) -> bool {
        self.examining = self.examining.saturating_sub(1);
        let row = self.bundles.row_mut(&path);
        if let Some(row) = row.filter(|r| r.stamp == stamp && r.refused().is_none()) {
            row.verify = VerifyState::Wal(result);
        }
        self.examined_one();
        true
    }

    /// Asks the store (in the background, one read transaction) whether each listed bundle is
    /// imported, partly or not (`core::import::import_states`).
    pub(super) fn refresh_import_states(&mut self) {
        let Ok(db) = self.db() else { return };
        let wanted: Vec<(PathBuf, crate::core::bundle::BundleHeader)> = self
            .bundles
            .rows
            .iter()
            .filter_map(|r| Some((r.path.clone(), r.header.clone()?)))
            .collect();
        if wanted.is_empty() {
            return;
        }
        self.tasks.spawn(move |tx| {
            let headers: Vec<&crate::core::bundle::BundleHeader> =
                wanted.iter().map(|(_, h)| h).collect();
            // No store file yet: nothing is imported (and listing must not create one).
            let sqlite_missing = !db.path.to_string_lossy().contains("://") && !db.path.exists();
            let result = if sqlite_missing {
                Ok(vec![
                    crate::core::import::ImportState::NotImported;
                    headers.len()
                ])
            } else {
                db.open().and_then(|store| {
                    crate::core::import::import_states(&store, &headers).map_err(|e| e.to_string())
                })
            };
            let result = result.map(|states| {
                wanted
                    .iter()
                    .map(|(p, _)| p.clone())
                    .zip(states)
                    .collect::<Vec<_>>()
            });
            let _ = tx.send(TaskMsg::ImportStates(result));
        });
    }

    pub(super) fn on_import_states(
        &mut self,
        result: Result<Vec<(PathBuf, crate::core::import::ImportState)>, String>,
    ) -> bool {
        let Ok(states) = result else {
            // No store yet (nothing imported) or unreadable: the column stays empty.
            return false;
        };
        let by_path: std::collections::HashMap<PathBuf, crate::core::import::ImportState> =
            states.into_iter().collect();
        for r in &mut self.bundles.rows {
            if let Some(s) = by_path.get(&r.path) {
                r.imported = Some(s.clone());
            }
        }
        true
    }
}
