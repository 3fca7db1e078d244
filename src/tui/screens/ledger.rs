//! The Ledger screen: jobs folded from the workspace's node WALs (`*.alwl`) with status, DCs and
//! progress; the selected job's events on the HLC axis, one lane per node, with the deciding event
//! and the losing events marked; a conflicts-only filter; and the diff of two copies of a ledger
//! with its first divergent range highlighted. Every rule is the engine's (`core::ledger`).

use crate::core::ledger::antientropy::{self, SyncReport};
use crate::core::ledger::parallel::fold_ledgers_counted;
use crate::core::ledger::timeline::{Role, TimelineLane};
use crate::core::ledger::{Finding, Resolution};
use crate::text::visible;
use crate::tui::theme::Theme;
use crate::tui::widgets::swimlanes::column;
use crate::tui::widgets::{clip, human_bytes, percent, plural};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;
use std::path::{Path, PathBuf};

#[derive(Debug, Default)]
pub struct LedgerScreen {
    /// Where the list was last drawn (its header line first), for mouse clicks.
    pub list_area: ratatui::layout::Rect,
    /// The first job row shown, as last drawn.
    pub list_offset: usize,
    pub paths: Vec<PathBuf>,
    pub jobs: Vec<Resolution>,
    pub findings: Vec<Finding>,
    /// Findings past the ones the fold keeps (`core::ledger::fold::KEPT_FINDINGS`).
    pub findings_not_kept: u64,
    pub error: Option<String>,
    pub selected: usize,
    pub conflicts_only: bool,
    pub lanes: Vec<TimelineLane>,
    /// The diff of the first two ledgers, when shown.
    pub diff: Option<Result<SyncReport, String>>,
    pub page: usize,
    /// The selected job whose lanes are to be read (in the background: reading the WALs must not
    /// hold up keys), and the token of the latest request.
    lanes_wanted: Option<Resolution>,
    lanes_token: u64,
    /// Lanes are being read for the selected job.
    pub lanes_loading: bool,
    /// The ledgers are being folded in the background (the jobs shown are the last fold's until
    /// the new one arrives); `fold_token` is the latest request's.
    pub folding: bool,
    fold_wanted: bool,
    fold_token: u64,
    /// Bytes the running fold has read, and the ledgers' size when it was asked for.
    fold_read: std::sync::Arc<std::sync::atomic::AtomicU64>,
    fold_total: u64,
    /// The two ledgers to compare in the background, and the latest request's token.
    diff_wanted: Option<(PathBuf, PathBuf)>,
    diff_token: u64,
    pub diff_loading: bool,
}

/// A request to fold the ledgers (`core::ledger::parallel::fold_ledgers_counted`).
pub struct FoldRequest {
    pub token: u64,
    pub paths: Vec<PathBuf>,
    /// Where the fold adds the bytes it has read (the screen shows it).
    pub read: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// What a fold gives the screen: every job's resolution, the findings kept and how many more
/// there were.
pub type Folded = Result<(Vec<Resolution>, Vec<Finding>, u64), String>;

/// Folds `paths`, adding the bytes read to `read` (the background half of a [`FoldRequest`]).
pub fn fold(paths: &[PathBuf], read: &std::sync::atomic::AtomicU64) -> Folded {
    fold_ledgers_counted(paths, read)
        .map(|f| (f.resolutions(), f.findings(), f.findings_not_kept()))
        .map_err(|e| e.to_string())
}

/// A request to compare the first two ledgers (`core::ledger::antientropy::between_files`).
pub struct DiffRequest {
    pub token: u64,
    pub a: PathBuf,
    pub b: PathBuf,
}

/// Compares two ledgers (the background half of a [`DiffRequest`]).
pub fn diff(a: &Path, b: &Path) -> Result<SyncReport, String> {
    antientropy::between_files(a, b, false).map_err(|e| e.to_string())
}

/// A request to read a job's lanes from the ledgers (`core::ledger::timeline::job_timeline`).
pub struct LanesRequest {
    pub token: u64,
    pub paths: Vec<PathBuf>,
    pub job: Resolution,
}

/// The glyph, word and style of an event's role.
pub fn role_mark(role: Role, theme: &Theme) -> (char, &'static str, Style) {
    match role {
        Role::Deciding => ('◆', "deciding", theme.accent),
        Role::Won => ('•', "won", theme.ok),
        Role::Lost => ('✗', "lost", theme.conflict),
        Role::Plain => ('·', "event", theme.muted),
    }
}

impl LedgerScreen {
    /// Lists every `*.alwl` in `dir` (sorted by name) and asks for their fold.
    pub fn load(&mut self, dir: &Path) {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| crate::core::wal::is_wal_path(p))
                    .collect()
            })
            .unwrap_or_default();
        paths.sort();
        self.load_paths(paths);
    }

    /// Asks for a fold of `paths` (read in the background: a node's WAL can hold millions of
    /// frames); the jobs of the last fold stay on screen until [`LedgerScreen::set_fold`].
    pub fn load_paths(&mut self, paths: Vec<PathBuf>) {
        self.paths = paths;
        self.diff = None;
        self.diff_wanted = None;
        self.diff_loading = false;
        self.fold_token += 1;
        self.fold_wanted = true;
        self.folding = true;
        self.fold_read = Default::default();
        self.fold_total = self
            .paths
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
    }

    /// How far the running fold is: bytes read, and the ledgers' size.
    pub fn fold_progress(&self) -> (u64, u64) {
        let read = self.fold_read.load(std::sync::atomic::Ordering::Relaxed);
        (read.min(self.fold_total), self.fold_total)
    }

    /// The pending fold request, if any (taken once).
    pub fn take_fold_request(&mut self) -> Option<FoldRequest> {
        std::mem::take(&mut self.fold_wanted).then(|| FoldRequest {
            token: self.fold_token,
            paths: self.paths.clone(),
            read: self.fold_read.clone(),
        })
    }

    /// The fold for request `token`; a stale one (the ledgers were listed again since) is
    /// dropped. The selection stays on the same job when it is still there.
    pub fn set_fold(&mut self, token: u64, folded: Folded) -> bool {
        if token != self.fold_token {
            return false;
        }
        self.folding = false;
        let keep = self.selected_job().map(|r| r.job_id.clone());
        match folded {
            Ok((jobs, findings, not_kept)) => {
                self.jobs = jobs;
                self.findings = findings;
                self.findings_not_kept = not_kept;
                self.error = None;
            }
            Err(e) => {
                self.jobs.clear();
                self.findings.clear();
                self.findings_not_kept = 0;
                self.error = Some(e);
            }
        }
        self.selected = keep
            .and_then(|id| self.rows().iter().position(|r| r.job_id == id))
            .unwrap_or(0);
        self.refresh_lanes();
        true
    }

    /// The jobs shown (all, or those a conflict decided).
    pub fn rows(&self) -> Vec<&Resolution> {
        self.jobs.iter().filter(|r| self.shown(r)).collect()
    }

    /// How many jobs the list shows, without collecting them.
    fn row_count(&self) -> usize {
        self.jobs.iter().filter(|r| self.shown(r)).count()
    }

    /// Whether the list shows `r` (every job, or in the conflicts view those a conflict decided).
    fn shown(&self, r: &Resolution) -> bool {
        !self.conflicts_only || !r.decisions.is_empty()
    }

    pub fn selected_job(&self) -> Option<&Resolution> {
        self.rows().get(self.selected).copied()
    }

    pub fn move_by(&mut self, d: isize) {
        let n = self.row_count();
        let cur = self.selected as isize + d;
        self.selected = cur.clamp(0, n.saturating_sub(1) as isize) as usize;
        self.refresh_lanes();
    }

    pub fn toggle_conflicts(&mut self) {
        self.conflicts_only = !self.conflicts_only;
        self.selected = 0;
        self.refresh_lanes();
    }

    /// Shows (or hides) the diff of the first two ledgers; the comparison reads both files, so
    /// it runs in the background ([`LedgerScreen::take_diff_request`], [`LedgerScreen::set_diff`]).
    pub fn toggle_diff(&mut self) {
        self.diff_token += 1;
        if self.diff.is_some() || self.diff_loading {
            self.diff = None;
            self.diff_wanted = None;
            self.diff_loading = false;
            return;
        }
        match self.paths.as_slice() {
            [a, b, ..] => {
                self.diff_wanted = Some((a.clone(), b.clone()));
                self.diff_loading = true;
            }
            _ => {
                self.diff = Some(Err(
                    "a diff needs two ledgers (*.alwl) in the workspace".into()
                ))
            }
        }
    }

    /// The pending diff request, if any (taken once).
    pub fn take_diff_request(&mut self) -> Option<DiffRequest> {
        let (a, b) = self.diff_wanted.take()?;
        Some(DiffRequest {
            token: self.diff_token,
            a,
            b,
        })
    }

    /// The diff for request `token`; dropped when the panel was closed or asked again since.
    pub fn set_diff(&mut self, token: u64, report: Result<SyncReport, String>) -> bool {
        if token != self.diff_token || !self.diff_loading {
            return false;
        }
        self.diff_loading = false;
        self.diff = Some(report);
        true
    }

    /// Asks for the selected job's lanes; the app reads them in the background
    /// ([`LedgerScreen::take_lanes_request`], [`LedgerScreen::set_lanes`]).
    fn refresh_lanes(&mut self) {
        self.lanes.clear();
        self.lanes_token += 1;
        self.lanes_wanted = self.selected_job().cloned();
        self.lanes_loading = self.lanes_wanted.is_some();
    }

    /// The pending lanes request, if any (taken once).
    pub fn take_lanes_request(&mut self) -> Option<LanesRequest> {
        let job = self.lanes_wanted.take()?;
        Some(LanesRequest {
            token: self.lanes_token,
            paths: self.paths.clone(),
            job,
        })
    }

    /// Lanes read for request `token`; a stale answer (the selection moved on) is dropped.
    pub fn set_lanes(&mut self, token: u64, lanes: Vec<TimelineLane>) -> bool {
        if token != self.lanes_token {
            return false;
        }
        self.lanes = lanes;
        self.lanes_loading = false;
        true
    }

    pub fn summary(&self) -> String {
        let conflicts = self.jobs.iter().filter(|r| !r.decisions.is_empty()).count();
        format!(
            "{} · {} · {} decided by conflict · {}{}",
            plural(self.paths.len() as u64, "ledger"),
            plural(self.jobs.len() as u64, "job"),
            conflicts,
            plural(
                self.findings.len() as u64 + self.findings_not_kept,
                "finding"
            ),
            if self.conflicts_only {
                " · conflicts only (c)"
            } else {
                ""
            }
        ) + &if self.folding {
            let (read, total) = self.fold_progress();
            format!(" · folding… {}%", percent(read, total))
        } else {
            String::new()
        }
    }

    pub fn render(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        if let Some(e) = &self.error {
            f.render_widget(
                Paragraph::new(visible(e).into_owned()).style(theme.finding),
                area,
            );
            return;
        }
        if self.folding && self.jobs.is_empty() {
            let (read, total) = self.fold_progress();
            let text = format!(
                "folding {} in the background, {} of {} read ({}%): {}",
                plural(self.paths.len() as u64, "ledger"),
                human_bytes(read),
                human_bytes(total),
                percent(read, total),
                self.paths
                    .iter()
                    .map(|p| p.file_name().unwrap_or_default().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            f.render_widget(
                Paragraph::new(clip(&visible(&text), area.width as usize)).style(theme.muted),
                area,
            );
            return;
        }
        if self.paths.is_empty() {
            f.render_widget(
                Paragraph::new(
                    "no ledgers: the Ledger screen folds the *.alwl node WALs of the console's \
                     directory (`airlock ledger fold WAL...` on the command line)",
                )
                .style(theme.muted),
                area,
            );
            return;
        }
        let area = if self.findings.is_empty() {
            area
        } else {
            let lines = self.findings.len() + usize::from(self.findings_not_kept > 0);
            let height = (lines as u16 + 1).min(7);
            let [rest, panel] =
                Layout::vertical([Constraint::Min(8), Constraint::Length(height)]).areas(area);
            self.draw_findings(f, panel, theme);
            rest
        };
        let [top, bottom] =
            Layout::vertical([Constraint::Percentage(45), Constraint::Min(6)]).areas(area);
        self.draw_jobs(f, top, theme);
        match &self.diff {
            Some(d) => draw_diff(f, bottom, theme, Some(d)),
            None if self.diff_loading => draw_diff(f, bottom, theme, None),
            None => self.draw_timeline(f, bottom, theme),
        }
    }

    fn draw_jobs(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let height = area.height.saturating_sub(1) as usize;
        self.page = height.max(1);
        // The window moves only when the selection leaves it (as every other list).
        let n = self.row_count();
        let offset = crate::tui::widgets::table_window(self.list_offset, self.selected, height, n);
        (self.list_area, self.list_offset) = (area, offset);
        let rows = self.rows();
        let w = area.width as usize;
        let mut lines = vec![Line::styled(
            clip(
                &format!(
                    "  {:<36} {:<11} {:>5} {:<9} {:<9} progress",
                    "job", "status", "fence", "accepted", "cancel"
                ),
                w,
            ),
            theme.header,
        )];
        for (i, r) in rows.iter().enumerate().skip(offset).take(height) {
            let v = &r.view;
            let progress: Vec<String> = v
                .progress
                .iter()
                .map(|(dc, p)| format!("{dc} {}/{}", p.completed, p.failed))
                .collect();
            // A job id longer than its column is cut with `…` so that the columns after it stay
            // under their headers (a wide character counts two columns).
            let text = format!(
                "{} {:<11} {:>5} {:<9} {:<9} {}{}",
                crate::tui::widgets::fit(&visible(&r.job_id), 36),
                v.status.as_str(),
                v.fence_token.map_or("-".into(), |t| t.to_string()),
                format!("{}/{}", v.accepted_dcs.len(), v.assigned_dcs.len()),
                format!("{}/{}", v.cancel_acked_dcs.len(), v.assigned_dcs.len()),
                progress.join(" "),
                if r.decisions.is_empty() {
                    ""
                } else {
                    "  ⚑ conflict"
                }
            );
            // The selection is marked, not only coloured.
            let (marker, style) = if i == self.selected {
                ("▶ ", theme.selection)
            } else {
                ("  ", theme.base)
            };
            let text = format!("{marker}{}", visible(&text));
            lines.push(Line::styled(clip(&text, w), style));
        }
        f.render_widget(Paragraph::new(lines), area);
    }

    /// The frames that could not be folded: where each is and why (as many as fit).
    fn draw_findings(&self, f: &mut Frame, area: Rect, theme: &Theme) {
        let inner = top_panel(f, area, theme, " frames that could not be folded ");
        let room = inner.height as usize;
        let total = self.findings.len() as u64 + self.findings_not_kept;
        let shown = if (total as usize) > room {
            room.saturating_sub(1)
        } else {
            room
        };
        let w = inner.width as usize;
        let mut lines: Vec<Line> = self
            .findings
            .iter()
            .take(shown)
            .map(|x| {
                let text = format!("{} {}: {}", x.source, x.location(), x.message);
                Line::styled(clip(&visible(&text), w), theme.finding)
            })
            .collect();
        if (shown as u64) < total {
            lines.push(Line::styled(
                format!(
                    "… and {} more ({} kept: `airlock ledger fold WAL...` lists those)",
                    total - shown as u64,
                    self.findings.len()
                ),
                theme.muted,
            ));
        }
        f.render_widget(Paragraph::new(lines), inner);
    }

    fn draw_timeline(&self, f: &mut Frame, area: Rect, theme: &Theme) {
        let inner = top_panel(f, area, theme, " events by node (HLC) ");
        let Some(job) = self.selected_job() else {
            return;
        };
        if self.lanes_loading {
            f.render_widget(
                Paragraph::new("reading the job's events…").style(theme.muted),
                inner,
            );
            return;
        }
        let label_w = 12usize;
        let track_w = (inner.width as usize).saturating_sub(label_w + 2).max(1);
        let times = self
            .lanes
            .iter()
            .flat_map(|l| l.entries.iter().map(|e| e.physical));
        let (min, max) = (times.clone().min().unwrap_or(0), times.max().unwrap_or(0));
        let mut lines = Vec::new();
        for lane in &self.lanes {
            let mut cells: Vec<(char, Style)> = vec![('─', theme.muted); track_w];
            for e in &lane.entries {
                let c = column(e.physical, min, max, track_w).min(track_w - 1);
                let (g, _, s) = role_mark(e.role, theme);
                if cells[c].0 == '─' || e.role != Role::Plain {
                    cells[c] = (g, s);
                }
            }
            let mut spans = vec![Span::styled(
                format!(
                    "{}  ",
                    crate::tui::widgets::fit(&visible(&lane.node), label_w)
                ),
                theme.base,
            )];
            spans.extend(
                cells
                    .into_iter()
                    .map(|(g, s)| Span::styled(g.to_string(), s)),
            );
            lines.push(Line::from(spans));
        }
        let mut legend = vec![Span::raw(" ")];
        for role in [Role::Deciding, Role::Won, Role::Lost, Role::Plain] {
            let (g, word, s) = role_mark(role, theme);
            legend.push(Span::styled(g.to_string(), s));
            legend.push(Span::styled(format!(" {word}  "), theme.muted));
        }
        lines.push(Line::from(legend));
        let decided = job
            .view
            .decided_by
            .as_deref()
            .map_or("-".to_string(), |h| visible(h).into_owned());
        // Lines longer than the panel end with `…` (a cut HLC reads as another).
        let w = inner.width as usize;
        lines.push(Line::styled(
            clip(
                &format!("{} · decided by {decided}", job.view.status.as_str()),
                w,
            ),
            theme.base,
        ));
        for d in &job.decisions {
            lines.push(Line::styled(
                clip(
                    &visible(&format!(
                        "{}: {} {} wins by {}",
                        d.subject,
                        d.winner.kind,
                        d.winner.hlc,
                        d.rule.as_str()
                    )),
                    w,
                ),
                theme.ok,
            ));
            for l in &d.losers {
                lines.push(Line::styled(
                    clip(
                        &visible(&format!(
                            "  ✗ {} {} ({} LSN {}) lost by {}",
                            l.event.kind,
                            l.event.hlc,
                            l.event.source,
                            l.event.lsn,
                            l.rule.as_str()
                        )),
                        w,
                    ),
                    theme.conflict,
                ));
            }
        }
        f.render_widget(Paragraph::new(lines), inner);
    }
}

/// Draws a panel with a top rule titled `title` over `area`; returns the room under it.
fn top_panel(f: &mut Frame, area: Rect, theme: &Theme, title: &str) -> Rect {
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(theme.border)
        .title(title.to_string());
    let inner = block.inner(area);
    f.render_widget(block, area);
    inner
}

/// The diff panel: the report, or (`None`) that the comparison is still running.
fn draw_diff(f: &mut Frame, area: Rect, theme: &Theme, diff: Option<&Result<SyncReport, String>>) {
    let inner = top_panel(f, area, theme, " diff of the first two ledgers (d) ");
    let Some(diff) = diff else {
        f.render_widget(
            Paragraph::new("comparing the first two ledgers in the background…").style(theme.muted),
            inner,
        );
        return;
    };
    let r = match diff {
        Err(e) => {
            let p = Paragraph::new(visible(e).into_owned()).style(theme.finding);
            f.render_widget(p.wrap(ratatui::widgets::Wrap { trim: false }), inner);
            return;
        }
        Ok(r) => r,
    };
    let mut lines = vec![Line::styled(
        match r.first_divergent_lsn {
            None => format!("in sync ({})", plural(r.exchanges as u64, "exchange")),
            Some(l) => format!(
                "first divergent LSN {l} ({})",
                plural(r.exchanges as u64, "exchange")
            ),
        },
        theme.base,
    )];
    // The LSN axis of the compared spans: the first divergent span highlighted.
    let w = (inner.width as usize).saturating_sub(2).max(1);
    if let (Some(first), Some(last)) = (r.spans.first(), r.spans.last()) {
        let (lo, hi) = (first.from, last.to.max(first.from + 1));
        let mut cells = vec![('─', theme.muted); w];
        for (i, s) in r.spans.iter().enumerate() {
            let (a, b) = (
                column(s.from, lo, hi, w),
                column(s.to, lo, hi, w).max(column(s.from, lo, hi, w)),
            );
            for c in cells.iter_mut().take(b.min(w - 1) + 1).skip(a.min(w - 1)) {
                *c = if i == 0 {
                    ('█', theme.conflict)
                } else {
                    ('▒', theme.warning)
                };
            }
        }
        let mut spans = vec![Span::raw(" ")];
        spans.extend(
            cells
                .into_iter()
                .map(|(g, s)| Span::styled(g.to_string(), s)),
        );
        lines.push(Line::from(spans));
        lines.push(Line::styled(
            format!(
                " LSN {lo} … {}   █ first divergent range  ▒ other differing ranges",
                hi - 1
            ),
            theme.muted,
        ));
    }
    for (label, list) in [
        ("missing in A", &r.missing_in_a),
        ("missing in B", &r.missing_in_b),
    ] {
        for fi in list.iter().take(20) {
            lines.push(Line::styled(
                visible(&format!(
                    "{label}: LSN {} {} {} {}",
                    fi.lsn,
                    fi.kind,
                    fi.hlc,
                    fi.job_id.as_deref().unwrap_or("")
                ))
                .into_owned(),
                theme.warning,
            ));
        }
    }
    if !r.divergent.is_empty() {
        lines.push(Line::styled(
            format!("divergent (never overwritten): LSN {:?}", r.divergent),
            theme.conflict,
        ));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

impl crate::tui::screen::Screen for LedgerScreen {
    fn click_rows(&self) -> Option<crate::tui::screen::ClickRows> {
        Some(crate::tui::screen::ClickRows {
            area: self.list_area,
            offset: self.list_offset,
            selected: self.selected,
            len: self.row_count(),
        })
    }

    fn draw(&mut self, f: &mut Frame, area: Rect, ctx: &crate::tui::screen::Ctx) {
        self.render(f, area, ctx.theme);
    }

    fn context_line(&self) -> String {
        self.summary()
    }

    fn busy(&self) -> bool {
        self.folding || self.diff_loading || self.lanes_loading
    }

    fn progress(&self) -> u64 {
        self.fold_progress().0 >> 16
    }

    fn page(&self) -> usize {
        self.page.max(1)
    }

    fn move_by(&mut self, d: isize) {
        LedgerScreen::move_by(self, d)
    }

    fn handle(&mut self, a: crate::tui::action::Action) -> bool {
        use crate::tui::action::Action;
        match a {
            Action::LedgerConflicts => self.toggle_conflicts(),
            Action::LedgerDiff => self.toggle_diff(),
            _ => return false,
        }
        true
    }

    fn copy_value(&self) -> Option<(&'static str, String)> {
        self.selected_job().map(|r| ("job id", r.job_id.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn render(s: &mut LedgerScreen, w: u16, h: u16) -> ratatui::buffer::Buffer {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        let theme = Theme::default();
        term.draw(|f| s.render(f, f.area(), &theme)).unwrap();
        term.backend().buffer().clone()
    }

    fn text(b: &ratatui::buffer::Buffer) -> String {
        let w = b.area.width as usize;
        b.content()
            .chunks(w)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n")
            .collect()
    }

    fn vector_paths() -> Vec<PathBuf> {
        let dir = Path::new("../shared/vectors/ledger");
        vec![dir.join("gate-a.alwl"), dir.join("gate-b.alwl")]
    }

    /// Folds the requested ledgers here, as the app's background task does.
    fn fold_now(s: &mut LedgerScreen) {
        let r = s.take_fold_request().expect("a fold request");
        assert!(s.set_fold(r.token, fold(&r.paths, &r.read)));
    }

    fn vector_screen() -> LedgerScreen {
        let mut s = LedgerScreen::default();
        s.load_paths(vector_paths());
        fold_now(&mut s);
        s
    }

    /// Opening the screen folds nothing on the UI thread: it asks for the fold, says so while it
    /// runs, drops a fold made for an earlier listing, and keeps the selected job across a refold.
    #[test]
    fn loading_asks_for_the_fold_instead_of_reading_the_wals() {
        let mut s = LedgerScreen::default();
        s.load_paths(vector_paths());
        assert!(s.jobs.is_empty() && s.folding);
        assert!(crate::tui::screen::Screen::busy(&s));
        let t = text(&render(&mut s, 120, 30));
        assert!(
            t.contains("folding 2 ledgers in the background, 0 B of ")
                && t.contains(" read (0%): gate-a.alwl, gate-b.alwl"),
            "{t}"
        );
        let stale = s.take_fold_request().unwrap();
        s.load_paths(vector_paths());
        assert!(
            !s.set_fold(stale.token, fold(&stale.paths, &stale.read)),
            "stale fold dropped"
        );
        // The fold's reads land in the request's counter: all of both files once done.
        let (_, total) = s.fold_progress();
        assert!(total > 0);
        assert_eq!(stale.read.load(std::sync::atomic::Ordering::Relaxed), total);
        assert!(s.folding && s.jobs.is_empty());
        fold_now(&mut s);
        assert!(!s.folding && s.jobs.len() == 4);
        s.move_by(2);
        let picked = s.selected_job().unwrap().job_id.clone();
        s.load_paths(vector_paths());
        assert_eq!(s.jobs.len(), 4, "the last fold stays on screen meanwhile");
        assert!(s.summary().ends_with(" · folding… 0%"), "{}", s.summary());
        fold_now(&mut s);
        assert_eq!(s.selected_job().unwrap().job_id, picked);
        // A fold that fails says why instead of showing jobs.
        s.load_paths(vec![PathBuf::from("/nonexistent/gate-z.alwl")]);
        fold_now(&mut s);
        assert!(s.jobs.is_empty() && s.error.as_deref().is_some_and(|e| e.contains("gate-z")));
    }

    /// The diff reads both files: it runs in the background too, and closing the panel before
    /// it arrives drops the answer.
    #[test]
    fn diff_is_compared_in_the_background() {
        let mut s = vector_screen();
        s.toggle_diff();
        assert!(s.diff.is_none() && s.diff_loading);
        let t = text(&render(&mut s, 120, 30));
        assert!(
            t.contains("comparing the first two ledgers in the background…"),
            "{t}"
        );
        let r = s.take_diff_request().expect("a diff request");
        s.toggle_diff(); // closed before the answer came
        assert!(!s.set_diff(r.token, diff(&r.a, &r.b)), "closed: dropped");
        assert!(s.diff.is_none() && !s.diff_loading);
        s.toggle_diff();
        let r = s.take_diff_request().unwrap();
        assert!(s.set_diff(r.token, diff(&r.a, &r.b)));
        assert!(s.diff.is_some() && !s.diff_loading);
        s.toggle_diff();
        assert!(s.diff.is_none(), "d again hides it");
        // One ledger: nothing to compare, said at once.
        let mut one = LedgerScreen::default();
        one.load_paths(vector_paths()[..1].to_vec());
        fold_now(&mut one);
        one.toggle_diff();
        assert!(one.take_diff_request().is_none());
        assert!(matches!(&one.diff, Some(Err(e)) if e.contains("needs two ledgers")));
    }

    /// Reads the requested lanes here, as the app's background task does.
    fn read_lanes(s: &mut LedgerScreen) {
        use crate::core::ledger::timeline::job_timeline;
        let r = s.take_lanes_request().expect("a lanes request");
        let lanes = job_timeline(&r.paths, &r.job).unwrap();
        assert!(s.set_lanes(r.token, lanes));
    }

    /// Moving the selection reads nothing on the UI thread: it asks for the lanes, which the app
    /// reads in the background; a late answer for an earlier selection is dropped.
    #[test]
    fn moving_asks_for_lanes_instead_of_reading_the_wals() {
        let mut s = vector_screen();
        read_lanes(&mut s);
        assert!(!s.lanes.is_empty());
        s.move_by(1);
        assert!(s.lanes.is_empty(), "no WAL read on the UI thread");
        assert!(s.lanes_loading);
        assert!(text(&render(&mut s, 120, 30)).contains("reading the job's events…"));
        let stale = s.take_lanes_request().unwrap();
        s.move_by(1);
        assert!(
            !s.set_lanes(stale.token, Vec::new()),
            "stale answer dropped"
        );
        assert!(s.lanes_loading);
        read_lanes(&mut s);
        assert!(!s.lanes_loading && !s.lanes.is_empty());
    }

    #[test]
    fn jobs_timeline_and_the_deciding_event() {
        let mut s = vector_screen();
        assert_eq!(s.jobs.len(), 4);
        s.move_by(1); // use1-...-00001: cancelled, the completion lost to the cancellation
        read_lanes(&mut s);
        let b = render(&mut s, 120, 30);
        let t = text(&b);
        let row = t
            .lines()
            .find(|l| l.contains("use1-1767614400000-gate42-00001"))
            .unwrap();
        // The selected job is marked, not only coloured.
        assert!(row.starts_with("▶ use1-"), "{row}");
        assert!(
            row.contains("cancelled") && row.contains("⚑ conflict"),
            "{row}"
        );
        assert!(t.contains("decided by 1767614400020:0:gate-b"), "{t}");
        assert!(t.contains("✗ JobCompleted 1767614400045:0:gate-b"), "{t}");
        assert_eq!(
            s.lanes.iter().map(|l| l.node.as_str()).collect::<Vec<_>>(),
            vec!["gate-a", "gate-b"]
        );
        // The deciding event is drawn with the accent style, the loser with the conflict style.
        let theme = Theme::default();
        let find = |g: &str| {
            b.content()
                .iter()
                .find(|c| c.symbol() == g)
                .map(|c| c.style())
        };
        assert_eq!(find("◆").map(|s| s.fg), Some(theme.accent.fg));
        assert_eq!(find("✗").map(|s| s.fg), Some(theme.conflict.fg));
    }

    /// The job list's window moves only when the selection leaves it: moving up from the last
    /// row keeps the rows where they are (it used to pin the selection to the bottom row).
    #[test]
    fn the_job_window_moves_only_when_the_selection_leaves_it() {
        let mut s = vector_screen();
        // A height whose job list shows two of the four jobs.
        let h = (8..60)
            .find(|&h| {
                render(&mut s, 120, h);
                s.list_area.height == 3
            })
            .expect("a height showing two rows");
        s.move_by(3);
        render(&mut s, 120, h);
        assert_eq!(s.list_offset, 2);
        s.move_by(-1);
        render(&mut s, 120, h);
        assert_eq!(
            s.list_offset, 2,
            "the window stays while the selection is in it"
        );
        s.move_by(-1);
        render(&mut s, 120, h);
        assert_eq!(s.list_offset, 1);
    }

    #[test]
    fn conflicts_filter_and_diff_panel() {
        let mut s = vector_screen();
        s.toggle_conflicts();
        assert_eq!(s.rows().len(), 3);
        s.toggle_diff();
        let r = s.take_diff_request().unwrap();
        assert!(s.set_diff(r.token, diff(&r.a, &r.b)));
        let t = text(&render(&mut s, 120, 30));
        // The two vector WALs are two different nodes' logs: the diff says so instead of guessing.
        assert!(t.contains("copies of one node's"), "{t}");
    }

    /// A job id longer than its column ends with `…` and the columns after it stay under their
    /// headers; a node id and a decision line longer than the timeline end with `…` (ratatui
    /// alone cuts them in silence, and a cut HLC reads as another).
    #[test]
    fn long_job_and_node_ids_are_marked_cut() {
        let mut s = vector_screen();
        s.move_by(1);
        read_lanes(&mut s);
        let long_job = format!("use1-{}-end", "日本".repeat(20));
        s.jobs[1].job_id = long_job.clone();
        let long_node = "gate-with-a-very-long-node-name";
        s.lanes[0].node = long_node.into();
        for (w, h) in [(80, 24), (120, 40)] {
            let t = crate::tui::widgets::buffer_text(&render(&mut s, w, h));
            let header = t.lines().find(|l| l.contains("fence")).unwrap();
            let row = t.lines().find(|l| l.starts_with("▶ use1-")).unwrap();
            assert!(
                crate::tui::widgets::shows_cut(row, &long_job),
                "{w}x{h}:\n{t}"
            );
            let col = |l: &str, word: &str| {
                let at = l.find(word).unwrap_or_else(|| panic!("{word} in {l}"));
                crate::tui::widgets::text_width(&l[..at])
            };
            assert_eq!(
                col(header, "status"),
                col(row, "cancelled"),
                "{w}x{h}:\n{t}"
            );
            assert!(
                crate::tui::widgets::shows_cut(&t, long_node),
                "{w}x{h}:\n{t}"
            );
            if w == 80 {
                let lost = t.lines().find(|l| l.contains("✗ JobCompleted")).unwrap();
                assert!(lost.trim_end().ends_with('…'), "{w}x{h}:\n{t}");
            }
        }
    }
}
