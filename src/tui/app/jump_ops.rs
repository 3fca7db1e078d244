//! Jumps between screens by provenance: Enter (or `o`) on a Scheduler entry opens the bundle it
//! came from at its node and entry; on the Merge preview `o` / `O` open the first / second side
//! of a conflict (an input side in its bundle, the stored side at its chain position), and `o`
//! the bundle of a merged, duplicate or dropped entry. Esc comes back (the screen history).

use super::App;
use crate::core::bundle::catalog::ListingKind;
use crate::core::bundle::index::ChainIndex;
use crate::tui::action::{Action, ScreenId};
use crate::tui::screens::merge::MergeTab;
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a jump lands in a bundle: a node log and the entry (its index when known, else found
/// by jobId and tHlc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainTarget {
    pub node_id: String,
    pub index: Option<u64>,
    pub job_id: String,
    pub t_hlc: String,
}

/// A bundle to open at a target.
struct BundleRef {
    bundle_id: String,
    file: String,
    /// `file` is the very file the entry was read from (a merge input the engine names): opened
    /// before any other listed file of the same bundle id (a tampered copy keeps the original's
    /// id, and its entries must not open in the original).
    exact: bool,
    target: ChainTarget,
}

/// Finds the target's (log, entry) in an index: by index when it is known and agrees with the
/// jobId, else by scanning the node's log for the jobId (and tHlc).
pub fn locate(index: &ChainIndex, target: &ChainTarget) -> Option<(usize, usize)> {
    let log = index
        .logs
        .iter()
        .position(|l| l.node_id == target.node_id)?;
    let len = index.logs[log].entries.len();
    if let Some(i) = target.index.map(|i| i as usize).filter(|i| *i < len) {
        if index.read_row(log, i).entry.job_id == target.job_id {
            return Some((log, i));
        }
    }
    let by_job = (0..len).find(|&i| {
        let r = index.read_row(log, i);
        r.entry.job_id == target.job_id
            && (target.t_hlc.is_empty() || r.entry.t_hlc == target.t_hlc)
    });
    Some((log, by_job?))
}

impl App {
    /// `o` / `O` (and Enter on the Scheduler screen): open a source.
    pub(super) fn jump_action(&mut self, a: Action) -> ControlFlow<bool> {
        let side = usize::from(a == Action::OpenOtherSource);
        match self.screen {
            ScreenId::Scheduler => self.jump_from_scheduler(),
            ScreenId::Merge => self.jump_from_merge(side),
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn jump_from_scheduler(&mut self) {
        let Some(e) = self.scheduler.selected_entry() else {
            self.say(Level::Info, "the entry is still being read");
            return;
        };
        let Some(p) = e.provenance.clone() else {
            self.say(
                Level::Info,
                format!(
                    "entry {} was appended on this machine ({}): no source bundle",
                    e.seq,
                    crate::text::visible(&e.action)
                ),
            );
            return;
        };
        let target = ChainTarget {
            node_id: p.source_node,
            index: None,
            job_id: e.job_id.clone(),
            t_hlc: p.original_t_hlc,
        };
        self.open_bundle_at(BundleRef {
            bundle_id: p.bundle_id,
            file: p.file_name,
            exact: false,
            target,
        });
    }

    fn jump_from_merge(&mut self, side: usize) {
        let Some(plan) = self.merge.plan() else {
            self.say(Level::Info, "no plan shown");
            return;
        };
        let i = self.merge.diff.unwrap_or(self.merge.selected);
        let tenant = plan.tenant_id.clone().unwrap_or_default();
        let at = |bundle_id: &str, node: &str, index: u64, job: &str, hlc: &str| {
            let file = plan
                .bundles
                .iter()
                .find(|b| b.bundle_id == bundle_id)
                .map(|b| b.file.clone())
                .unwrap_or_default();
            BundleRef {
                bundle_id: bundle_id.to_string(),
                file,
                exact: false,
                target: ChainTarget {
                    node_id: node.to_string(),
                    index: Some(index),
                    job_id: job.to_string(),
                    t_hlc: hlc.to_string(),
                },
            }
        };
        let found = match self.merge.current_tab() {
            MergeTab::Conflicts => {
                let Some(s) = plan.conflicts.get(i).and_then(|c| c.sides.get(side)) else {
                    self.say(
                        Level::Info,
                        "no such side of a conflict (o first, O second)",
                    );
                    return;
                };
                match (&s.origin, s.chain_seq) {
                    (Some(o), _) => Some(BundleRef {
                        file: o.file.clone(),
                        exact: true,
                        ..at(&o.bundle_id, &o.node_id, o.index, &o.job_id, &o.t_hlc)
                    }),
                    (None, Some(seq)) => {
                        self.open_scheduler_at(tenant, seq);
                        return;
                    }
                    (None, None) => None,
                }
            }
            MergeTab::Merged => plan
                .new_entries
                .as_ref()
                .and_then(|v| v.get(i))
                .map(|e| at(&e.bundle_id, &e.node_id, e.index, &e.job_id, &e.t_hlc)),
            MergeTab::Duplicates => plan
                .duplicates
                .get(i)
                .map(|d| at(&d.bundle_id, &d.node_id, d.index, &d.job_id, &d.t_hlc)),
            MergeTab::Dropped => plan.dropped.get(i).map(|d| BundleRef {
                file: d.origin.file.clone(),
                exact: true,
                ..at(
                    &d.origin.bundle_id,
                    &d.origin.node_id,
                    d.origin.index,
                    &d.origin.job_id,
                    &d.origin.t_hlc,
                )
            }),
            MergeTab::Plan => None,
        };
        match found {
            Some(r) => self.open_bundle_at(r),
            None => self.say(
                Level::Info,
                "o opens the selected entry's bundle (on a conflict: o the first side, O the second)",
            ),
        }
    }

    /// The file of a bundle: the exact file named (`BundleRef::exact`) when it is there; else a
    /// listed row with that bundle id, the one named like the engine's file first (a tampered
    /// copy keeps the original's id, and may be listed before it); else the file the engine named
    /// (as given, or by its name in the directory).
    fn find_bundle(&self, bundle_id: &str, file: &str, exact: bool) -> Option<PathBuf> {
        let given = Path::new(file);
        if exact && !file.is_empty() && given.is_file() {
            return Some(given.to_path_buf());
        }
        let listed: Vec<&PathBuf> = (self.bundles.rows.iter())
            .filter(|r| {
                matches!(r.listing.as_ref().map(|l| &l.kind),
                    Some(ListingKind::Bundle { bundle_id: id, .. }) if id == bundle_id)
            })
            .map(|r| &r.path)
            .collect();
        let named = listed
            .iter()
            .find(|p| p.file_name().is_some() && p.file_name() == given.file_name());
        if let Some(p) = named.or(listed.first()) {
            return Some(p.to_path_buf());
        }
        if !file.is_empty() && given.is_file() {
            return Some(given.to_path_buf());
        }
        let in_dir = self.config.dir.join(given.file_name()?);
        in_dir.is_file().then_some(in_dir)
    }

    fn open_bundle_at(&mut self, r: BundleRef) {
        let Some(path) = self.find_bundle(&r.bundle_id, &r.file, r.exact) else {
            self.say(
                Level::Warning,
                format!(
                    "bundle {} ({}) is not in {}",
                    crate::text::visible(&r.bundle_id),
                    crate::text::visible(&r.file),
                    crate::text::visible_path(&self.config.dir)
                ),
            );
            return;
        };
        self.chain_target = Some(r.target);
        self.open_chain(path);
    }

    /// The Scheduler screen at a chain position of a tenant (the tenant list is read again).
    fn open_scheduler_at(&mut self, tenant: String, seq: u64) {
        self.scheduler_target = Some((tenant, seq));
        self.go(ScreenId::Scheduler);
    }

    /// Applies a pending Scheduler jump once the tenants are known.
    pub(super) fn land_scheduler(&mut self) {
        let Some((tenant, seq)) = self.scheduler_target.take() else {
            return;
        };
        let Some(i) = self
            .scheduler
            .tenants
            .iter()
            .position(|t| t.tenant == tenant)
        else {
            self.say(
                Level::Warning,
                format!("no tenant chain {}", crate::text::visible(&tenant)),
            );
            return;
        };
        let d = i as isize - self.scheduler.tenant as isize;
        if d != 0 {
            self.scheduler.switch_tenant(d);
            self.load_snapshots();
        }
        let d = seq as i128 - self.scheduler.selected as i128;
        self.scheduler.move_by(d as isize);
        self.pump_scheduler_page();
        self.say(
            Level::Info,
            format!("the stored side: chain position {seq}"),
        );
    }

    /// Selects the pending jump target in a ready index (found in the background when only
    /// the jobId is known).
    pub(super) fn land_chain(&mut self, index: &Arc<ChainIndex>) {
        let Some(target) = self.chain_target.take() else {
            return;
        };
        let token = self.chain_token;
        let index = index.clone();
        self.tasks.spawn(move |tx| {
            let at = locate(&index, &target);
            let _ = tx.send(TaskMsg::Located { token, at });
        });
    }

    pub(super) fn on_located(&mut self, token: u64, at: Option<(usize, usize)>) -> bool {
        if token != self.chain_token {
            return false;
        }
        match at {
            Some((log, i)) => {
                let d = log as isize - self.chain.log as isize;
                if d != 0 {
                    self.chain.switch_log(d);
                }
                let d = i as isize - self.chain.selected as isize;
                self.chain.move_by(d);
                self.say(
                    Level::Info,
                    format!("source entry: node log {log}, entry {i}"),
                );
            }
            None => self.say(
                Level::Warning,
                "the source entry is not in this bundle (node or jobId not found)",
            ),
        }
        true
    }
}
