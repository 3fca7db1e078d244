//! `/` search with n/N on the Chain, Merge, Scheduler and Activity screens, and the palette's
//! `goto`.
//!
//! Every search step and `:goto job` lookup runs in the background (a scan), never on the UI
//! thread: on the Chain screen the rows are read back from the bundle file one by one, on the
//! Scheduler screen from the store a page at a time (the screen holds only the rows shown), and on
//! the Merge and Activity screens from the lists they hold, shared with the scan
//! ([`Screen::search_rows`]). The status line shows how far a scan got, keys keep working, and
//! Esc, another search, a goto or leaving the screen stops it. A result that comes back for
//! another bundle, node log, tenant, plan, tab, load or search than the one shown now is dropped.
//!
//! [`Screen::search_rows`]: crate::tui::screen::Screen::search_rows

use super::scheduler_load::StoredRows;
use super::App;
use crate::core::bundle::index::ChainIndex;
use crate::tui::action::{Action, ScreenId};
use crate::tui::screens::chain::ChainState;
use crate::tui::search::{count, find_within, Goto, Hit, ScanEvent, SEARCH_LIMIT, TICK_ROWS};
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// How often a running scan reports its progress (the status line is redrawn with it).
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// A list and its selection: (screen, list, sub-list, rows, selected row); the list is the bundle
/// token and node log on the Chain screen, else the screen's `Screen::search_list`. A search that
/// gave up continues from where it stopped only while this has not changed.
type Place = (ScreenId, u64, usize, usize, usize);

/// The background scans, and where `n` continues after a search gave up.
#[derive(Default)]
pub(super) struct Scans {
    /// The last scan's token (each new scan takes the next one).
    token: u64,
    running: Option<Running>,
    resume: Option<Resume>,
}

/// A scan running in the background.
struct Running {
    token: u64,
    /// Set to stop it (Esc, a new search or goto, a stale result).
    cancel: Arc<AtomicBool>,
    list: ScanList,
    what: Scan,
}

/// The list a scan reads.
#[derive(PartialEq, Eq)]
enum ScanList {
    /// A bundle (the app's `chain_token`) and its node log, on the Chain screen.
    Chain { token: u64, log: usize },
    /// A tenant's stored chain, on the Scheduler screen.
    Scheduler { tenant: String },
    /// A list a screen holds (Merge, Activity): its `Screen::search_list`.
    Held {
        screen: ScreenId,
        list: (u64, usize),
    },
}

impl ScanList {
    fn screen(&self) -> ScreenId {
        match self {
            ScanList::Chain { .. } => ScreenId::Chain,
            ScanList::Scheduler { .. } => ScreenId::Scheduler,
            ScanList::Held { screen, .. } => *screen,
        }
    }
}

enum Scan {
    /// A search step: from `start` over at most `limit` of `len` rows, after `before` rows
    /// looked at by the steps that gave up before it; `place`: where it was asked for.
    Search {
        term: String,
        forward: bool,
        place: Place,
        start: usize,
        limit: usize,
        before: usize,
    },
    /// A jobId over every node log (`total` entries).
    Job { id: String, total: usize },
}

/// Where `n` continues after a search gave up (kept apart from the selection, which stays).
struct Resume {
    place: Place,
    term: String,
    forward: bool,
    /// The last row looked at.
    at: usize,
    /// Rows looked at by the steps so far.
    looked: usize,
}

/// A scan's side of the progress and the cancel flag.
struct Ticker<'a> {
    token: u64,
    cancel: &'a AtomicBool,
    tx: &'a UnboundedSender<TaskMsg>,
    last: Instant,
}

impl Ticker<'_> {
    /// `looked` rows looked at so far: reports them now and then; false when cancelled.
    fn tick(&mut self, looked: usize) -> bool {
        if self.cancel.load(Ordering::Relaxed) {
            return false;
        }
        if self.last.elapsed() >= PROGRESS_EVERY {
            self.last = Instant::now();
            let _ = self.tx.send(TaskMsg::Scanned {
                token: self.token,
                event: ScanEvent::Progress(looked),
            });
        }
        true
    }
}

/// The first node log and entry whose jobId (lowercased) is `id`, reading every log in order;
/// `None` in the outer option when cancelled.
fn find_job(
    index: &ChainIndex,
    id: &str,
    mut tick: impl FnMut(usize) -> bool,
) -> Option<Option<(usize, usize)>> {
    let mut looked = 0usize;
    for (log, l) in index.logs.iter().enumerate() {
        for i in 0..l.entries.len() {
            looked += 1;
            if looked.is_multiple_of(TICK_ROWS) && !tick(looked) {
                return None;
            }
            if index.read_row(log, i).entry.job_id.to_lowercase() == id {
                return Some(Some((log, i)));
            }
        }
    }
    Some(None)
}

impl App {
    /// `/`, `n`, `N` on screens whose `n`/`N` mean search (Merge, Scheduler, Activity).
    pub(super) fn search_action(&mut self, a: Action) -> ControlFlow<bool> {
        match a {
            Action::Search => {
                self.overlay = Some(super::Overlay::Search {
                    input: self.search.clone().unwrap_or_default(),
                })
            }
            Action::SearchNext | Action::SearchPrev if self.search.is_none() => {
                self.say(Level::Info, "no search: / starts one");
            }
            Action::SearchNext => self.search_step(true),
            Action::SearchPrev => self.search_step(false),
            _ => {}
        }
        ControlFlow::Continue(())
    }

    /// Moves to the next (or previous) row matching the active search, wrapping with a message.
    /// After a step that gave up, the next one in the same direction continues where it stopped
    /// (while the selection has not moved). The step runs in the background.
    pub(super) fn search_step(&mut self, forward: bool) {
        let Some(term) = self.search.clone() else {
            return;
        };
        let (len, from) = self.search_span();
        let place = self.place(len, from);
        if let Some(Running {
            what:
                Scan::Search {
                    term: t,
                    forward: f,
                    place: p,
                    ..
                },
            ..
        }) = &self.scans.running
        {
            if *t == term && *f == forward && *p == place {
                self.say(
                    Level::Info,
                    "still searching from this row; Esc stops the search",
                );
                return;
            }
        }
        self.stop_scan();
        let (start, before) = match self.scans.resume.take() {
            Some(r) if r.place == place && r.term == term && r.forward == forward => {
                (r.at, r.looked)
            }
            _ => (from, 0),
        };
        let limit = SEARCH_LIMIT.min(len.saturating_sub(before));
        let scan = Scan::Search {
            term: term.clone(),
            forward,
            place,
            start,
            limit,
            before,
        };
        if let Some((db, tenant)) = self.scheduler_scan_source() {
            let shown = crate::text::visible(&term).into_owned();
            self.start_scan(scan, move |ticker| {
                let mut rows = match StoredRows::open(&db, tenant) {
                    Ok(rows) => rows,
                    Err(e) => return Some(ScanEvent::Failed(e)),
                };
                let hit = find_within(
                    len,
                    start,
                    forward,
                    &term,
                    limit,
                    |i| rows.text(i as u64, forward),
                    |k| ticker.tick(k),
                )?;
                Some(match rows.error.take() {
                    Some(e) => ScanEvent::Failed(e),
                    None => ScanEvent::Searched(hit),
                })
            });
            self.say(
                Level::Info,
                format!("searching {shown:?} in the store… (Esc stops the search)"),
            );
            return;
        }
        let Some(rows) = self.current().search_rows() else {
            // Nothing shown to search (no bundle open, no plan yet).
            self.searched(&scan, Hit::None);
            return;
        };
        let shown = crate::text::visible(&term).into_owned();
        self.start_scan(scan, move |ticker| {
            find_within(len, start, forward, &term, limit, rows, |k| ticker.tick(k))
                .map(ScanEvent::Searched)
        });
        self.say(
            Level::Info,
            format!("searching {shown:?}… (Esc stops the search)"),
        );
    }

    /// Shows where a search step landed.
    fn searched(&mut self, scan: &Scan, hit: Hit) {
        let Scan::Search {
            term,
            forward,
            start,
            limit,
            before,
            ..
        } = scan
        else {
            return;
        };
        let forward = *forward;
        let shown = crate::text::visible(term).into_owned();
        self.scans.resume = None;
        match hit {
            Hit::Found { at, wrapped } => {
                self.search_select(at);
                let text = if wrapped {
                    format!(
                        "search {shown:?} wrapped to the {}",
                        if forward { "top" } else { "bottom" }
                    )
                } else {
                    format!("search {shown:?}: row {at}")
                };
                self.say(Level::Info, text);
            }
            Hit::None => self.say(Level::Warning, format!("no match for {shown:?}")),
            Hit::GaveUp { at } => {
                let (len, from) = self.search_span();
                let looked = before + limit;
                if looked >= len {
                    self.say(
                        Level::Warning,
                        format!("no match for {shown:?} in all {} rows", count(len)),
                    );
                    return;
                }
                // The selection stays where the user left it; `n` goes on from `at`.
                self.scans.resume = Some(Resume {
                    place: self.place(len, from),
                    term: term.clone(),
                    forward,
                    at,
                    looked,
                });
                self.say(
                    Level::Info,
                    format!(
                        "no match for {shown:?} in the {} rows {} row {start} ({} of {} looked \
                         at); the selection stays, {} continues from row {at}",
                        count(*limit),
                        if forward { "after" } else { "before" },
                        count(looked),
                        count(len),
                        if forward { "n" } else { "N" },
                    ),
                );
            }
        }
    }

    /// The rows the search runs over on this screen and the cursor's row.
    fn search_span(&self) -> (usize, usize) {
        self.current().search_span()
    }

    /// The list shown and its selection (see [`Place`]).
    fn place(&self, len: usize, selected: usize) -> Place {
        match self.screen {
            ScreenId::Chain => (self.screen, self.chain_token, self.chain.log, len, selected),
            s => {
                let (list, sub) = self.current().search_list();
                (s, list, sub, len, selected)
            }
        }
    }

    fn search_select(&mut self, at: usize) {
        self.current_mut().search_select(at);
        if self.screen == ScreenId::Scheduler {
            self.pump_scheduler_page();
        }
    }

    /// `:goto seq N` (an entry position) or `:goto job ID` on Chain and Scheduler; `:goto lsn N`
    /// (or `:goto N`) on the WAL screen.
    pub(super) fn goto(&mut self, g: Goto) {
        self.stop_scan();
        match (self.screen, g) {
            (ScreenId::Chain | ScreenId::Scheduler, Goto::Seq(n)) => {
                let (len, _) = self.search_span();
                if (n as usize) >= len {
                    self.say(
                        Level::Warning,
                        format!("there is no position {n}: this list has {len} entries"),
                    );
                    return;
                }
                self.search_select(n as usize);
                self.say(Level::Info, format!("at position {n}"));
            }
            (ScreenId::Chain, Goto::Job(id)) => self.goto_chain_job(id),
            (ScreenId::Scheduler, Goto::Job(id)) => self.start_find_job(id),
            (ScreenId::Wal, Goto::Lsn(n) | Goto::Seq(n)) => match self.wal.goto_lsn(n) {
                Ok(()) => self.say(Level::Info, format!("at LSN {n}")),
                Err(e) => self.say(Level::Warning, e),
            },
            (ScreenId::Wal, Goto::Job(_)) => {
                self.say(Level::Info, "on the WAL screen: goto lsn N, or / to search")
            }
            _ => self.say(
                Level::Info,
                "goto works on Chain and Scheduler (seq, job) and WAL (lsn)",
            ),
        }
    }

    /// Finds a jobId in every node log of the open bundle, in the background.
    fn goto_chain_job(&mut self, id: String) {
        let Some(index) = self.chain_scan_index() else {
            self.say(Level::Info, "no bundle open");
            return;
        };
        let total = index.entry_count();
        let shown = crate::text::visible(&id).into_owned();
        let scan = Scan::Job {
            id: id.clone(),
            total,
        };
        self.start_scan(scan, move |ticker| {
            find_job(&index, &id, |k| ticker.tick(k)).map(ScanEvent::JobAt)
        });
        self.say(
            Level::Info,
            format!(
                "looking for job {shown} in {} entries… (Esc stops it)",
                count(total)
            ),
        );
    }

    /// The Chain screen's index when it is shown and ready (a scan reads it).
    fn chain_scan_index(&self) -> Option<Arc<ChainIndex>> {
        match (&self.screen, &self.chain.state) {
            (ScreenId::Chain, ChainState::Ready(index)) => Some(index.clone()),
            _ => None,
        }
    }

    /// The store and tenant a Scheduler search reads, when that screen shows a tenant's chain.
    fn scheduler_scan_source(&self) -> Option<(crate::tui::store_ref::StoreRef, String)> {
        if self.screen != ScreenId::Scheduler {
            return None;
        }
        Some((self.db().ok()?, self.scheduler.tenant_id()?))
    }

    /// The list shown now, as a scan started now reads it.
    fn scan_list(&self) -> ScanList {
        match self.screen {
            ScreenId::Scheduler => ScanList::Scheduler {
                tenant: self.scheduler.tenant_id().unwrap_or_default(),
            },
            ScreenId::Chain => ScanList::Chain {
                token: self.chain_token,
                log: self.chain.log,
            },
            screen => ScanList::Held {
                screen,
                list: self.current().search_list(),
            },
        }
    }

    /// Runs `work` in the background as the one running scan; it returns its result, or `None`
    /// when it was stopped.
    fn start_scan(
        &mut self,
        what: Scan,
        work: impl FnOnce(&mut Ticker<'_>) -> Option<ScanEvent> + Send + 'static,
    ) {
        self.stop_scan();
        self.scans.token += 1;
        let token = self.scans.token;
        let cancel = Arc::new(AtomicBool::new(false));
        self.scans.running = Some(Running {
            token,
            cancel: cancel.clone(),
            list: self.scan_list(),
            what,
        });
        self.tasks.spawn(move |tx| {
            let mut ticker = Ticker {
                token,
                cancel: &cancel,
                tx,
                last: Instant::now(),
            };
            if let Some(event) = work(&mut ticker) {
                let _ = tx.send(TaskMsg::Scanned { token, event });
            }
        });
    }

    /// The screen is left: its running scan stops (the list it shares is let go at once, e.g.
    /// the Merge plan released with the screen) and `n` no longer resumes it.
    pub(super) fn leave_scans(&mut self) {
        self.stop_scan();
        self.scans.resume = None;
    }

    /// Stops the running scan, if any (its result will not come).
    fn stop_scan(&mut self) -> Option<Running> {
        let r = self.scans.running.take()?;
        r.cancel.store(true, Ordering::Relaxed);
        Some(r)
    }

    /// Esc: stops a running search or goto; false when none runs for what is shown (a stale
    /// one is stopped quietly and Esc does what it does otherwise).
    pub(super) fn cancel_scan(&mut self) -> bool {
        let applies = self
            .scans
            .running
            .as_ref()
            .is_some_and(|r| self.scan_applies(r));
        let Some(r) = self.stop_scan() else {
            return false;
        };
        if !applies {
            return false;
        }
        let what = match r.what {
            Scan::Search { .. } => "search",
            Scan::Job { .. } => "goto",
        };
        self.say(
            Level::Info,
            format!("{what} stopped; the selection stays where it is"),
        );
        true
    }

    /// True while the running scan's result still applies to what is shown: the same bundle on
    /// the Chain screen (for a search also the same node log) or the same tenant on the
    /// Scheduler screen, and for a search the same search.
    fn scan_applies(&self, r: &Running) -> bool {
        let same_list = match (&r.list, &r.what) {
            (ScanList::Chain { token, .. }, Scan::Job { .. }) => {
                self.screen == ScreenId::Chain && self.chain_token == *token
            }
            (list, _) => self.scan_list() == *list && self.screen == list.screen(),
        };
        same_list
            && match &r.what {
                Scan::Search { term, .. } => self.search.as_ref() == Some(term),
                Scan::Job { .. } => true,
            }
    }

    /// A scan's progress or result; a stale one (another scan's, or for a list no longer shown)
    /// is dropped and its scan stopped. True when the screen must be redrawn.
    pub(super) fn on_scanned(&mut self, token: u64, event: ScanEvent) -> bool {
        let Some(r) = self.scans.running.as_ref().filter(|r| r.token == token) else {
            return false;
        };
        if !self.scan_applies(r) {
            let what = match r.what {
                Scan::Search { .. } => "search stopped: the list shown changed (n searches again)",
                Scan::Job { .. } => "goto stopped: another bundle is shown",
            };
            let screen = r.list.screen();
            self.stop_scan();
            if self.screen == screen {
                self.say(Level::Info, what);
                return true;
            }
            return false;
        }
        match event {
            ScanEvent::Progress(k) => {
                let text = match &r.what {
                    Scan::Search {
                        term, limit, start, ..
                    } => format!(
                        "searching {:?}… {} of {} rows looked at (from row {start}); Esc stops \
                         the search",
                        crate::text::visible(term),
                        count(k),
                        count(*limit),
                    ),
                    Scan::Job { id, total } => format!(
                        "looking for job {}… {} of {} entries read; Esc stops it",
                        crate::text::visible(id),
                        count(k),
                        count(*total),
                    ),
                };
                self.say(Level::Info, text);
            }
            ScanEvent::Searched(hit) => {
                if let Some(r) = self.scans.running.take() {
                    self.searched(&r.what, hit);
                }
            }
            ScanEvent::Failed(e) => {
                self.scans.running = None;
                self.say(
                    Level::Error,
                    format!("search stopped: reading the store failed: {e}"),
                );
            }
            ScanEvent::JobAt(at) => {
                let Some(Running {
                    what: Scan::Job { id, .. },
                    ..
                }) = self.scans.running.take()
                else {
                    return false;
                };
                self.landed_on_job(&id, at);
            }
        }
        true
    }

    /// Shows where a `:goto job` lookup found the job.
    fn landed_on_job(&mut self, id: &str, at: Option<(usize, usize)>) {
        match at {
            Some((log, i)) => {
                let d = log as isize - self.chain.log as isize;
                self.chain.switch_log(d);
                self.search_select(i);
                self.say(
                    Level::Info,
                    format!(
                        "job {}: node log {log}, entry {i}",
                        crate::text::visible(id)
                    ),
                );
            }
            None => self.say(
                Level::Warning,
                format!("no entry with jobId {}", crate::text::visible(id)),
            ),
        }
    }
}
