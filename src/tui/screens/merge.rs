//! Screen 3, Merge preview: the engine's dry-run plan (`core::import::plan_import`) of the marked
//! bundles against the store: HLC swimlanes per node, the plan's summary lines (the very lines
//! `airlock jobs import --dry-run` prints), the merged order, duplicates, conflicts (with a
//! side-by-side payload diff) and dropped entries. Nothing here decides a merge; it shows the plan.

use crate::core::import::{
    ConflictSideReport, Fate, ImportPlan, ImportProgress, ImportStatus, Refusal,
};
use crate::text::visible;
use crate::tui::theme::Theme;
use crate::tui::widgets::{clip, diff, plural, swimlanes, table_window};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Gauge, Paragraph};
use ratatui::Frame;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How many entries the summary lists (the CLI's `--show` default).
pub const SHOW: usize = 50;

/// The lists of the preview, in tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeTab {
    Plan,
    Merged,
    Duplicates,
    Conflicts,
    Dropped,
}

impl MergeTab {
    pub const ALL: [MergeTab; 5] = [
        MergeTab::Plan,
        MergeTab::Merged,
        MergeTab::Duplicates,
        MergeTab::Conflicts,
        MergeTab::Dropped,
    ];

    fn title(self) -> &'static str {
        match self {
            MergeTab::Plan => "Plan",
            MergeTab::Merged => "Merged order",
            MergeTab::Duplicates => "Duplicates",
            MergeTab::Conflicts => "Conflicts",
            MergeTab::Dropped => "Dropped",
        }
    }
}

/// Where the preview is.
#[derive(Debug, Default)]
pub enum MergeState {
    /// Nothing chosen yet.
    #[default]
    Empty,
    /// `plan_import` running; its counters.
    Planning(Arc<ImportProgress>),
    /// Shared with a background `/` search reading its lists.
    Ready(Arc<ImportPlan>),
    Failed(String),
}

/// The Merge preview screen's state.
#[derive(Debug, Default)]
pub struct MergeScreen {
    /// Where the list tab was last drawn, the line above it first (it has no header line), for
    /// mouse clicks; `None` while the plan text or a diff is shown.
    pub list_area: Option<Rect>,
    pub inputs: Vec<PathBuf>,
    pub state: MergeState,
    /// The plan's human summary (`report_text::import_lines`), shared with a background `/`
    /// search of the Plan tab.
    pub lines: Arc<Vec<String>>,
    pub tab: usize,
    pub selected: usize,
    pub offset: usize,
    /// The conflict whose diff is open.
    pub diff: Option<usize>,
    /// Scroll of the plan text or the diff.
    pub scroll: usize,
    /// The Plan tab's line a `/` search found last, where `n` / `N` go on from while the user has
    /// not scrolled since (a plan that fits the screen draws `scroll` back to 0).
    pub plan_found: Option<usize>,
    /// A running import's counters.
    pub importing: Option<Arc<ImportProgress>>,
    pub page: usize,
    /// The shown plan's number: a new plan (or the plan released) takes the next one, so a
    /// result for an older one is dropped, and a `/` search of the old lists stops.
    pub token: u64,
    /// The number of the last `F` (a plan made with `--force` for its confirmation only): the
    /// shown plan and its lists stay, so a running `/` search goes on; an older `F`'s result is
    /// dropped.
    pub force_token: u64,
    /// The next plan replaces no status message (it follows an import, whose result is shown).
    pub quiet: bool,
    /// Rows kept per list (merged order, duplicates, dropped); the rest are counted, not kept.
    /// 0 means [`KEEP_ROWS`].
    pub keep_rows: usize,
    /// The plan was released when the screen was left; coming back plans again.
    pub released: bool,
}

/// Rows of each list a plan keeps in memory (a 1.3 M-entry merge would otherwise hold every
/// planned entry while the screen is open).
pub const KEEP_ROWS: usize = 20_000;

impl MergeScreen {
    pub fn plan(&self) -> Option<&ImportPlan> {
        match &self.state {
            MergeState::Ready(p) => Some(p),
            _ => None,
        }
    }

    pub fn current_tab(&self) -> MergeTab {
        MergeTab::ALL[self.tab % MergeTab::ALL.len()]
    }

    /// Keeps at most [`KEEP_ROWS`] rows of each long list of `plan` (the totals still count all).
    pub fn bound(&self, plan: &mut ImportPlan) {
        let keep = if self.keep_rows == 0 {
            KEEP_ROWS
        } else {
            self.keep_rows
        };
        if let Some(v) = plan.new_entries.as_mut() {
            v.truncate(keep);
            v.shrink_to_fit();
        }
        plan.duplicates.truncate(keep);
        plan.duplicates.shrink_to_fit();
        plan.dropped.truncate(keep);
        plan.dropped.shrink_to_fit();
    }

    /// The note for lists cut by [`MergeScreen::bound`], if any is.
    pub fn cut_note(&self) -> Option<String> {
        let p = self.plan()?;
        // A refused plan has no merged order at all: nothing of it was cut.
        let merged_cut = p
            .new_entries
            .as_ref()
            .is_some_and(|v| (v.len() as u64) < p.totals.new);
        let cut = merged_cut
            || (p.duplicates.len() as u64) < p.totals.duplicates
            || (p.dropped.len() as u64) < p.totals.dropped;
        cut.then(|| {
            format!(
                "lists show their first {} rows (jobs import --dry-run --json lists all)",
                self.keep_rows_or_default()
            )
        })
    }

    fn keep_rows_or_default(&self) -> usize {
        if self.keep_rows == 0 {
            KEEP_ROWS
        } else {
            self.keep_rows
        }
    }

    /// Drops the plan (its memory) when the screen is left; the inputs stay, so coming back plans
    /// again. A plan still running is discarded when it arrives.
    pub fn release(&mut self) {
        if self.importing.is_some() || self.inputs.is_empty() {
            return;
        }
        self.token += 1;
        self.state = MergeState::Empty;
        self.lines = Arc::default();
        self.diff = None;
        self.released = true;
    }

    pub fn is_busy(&self) -> bool {
        matches!(self.state, MergeState::Planning(_)) || self.importing.is_some()
    }

    /// What a tab's list counts (all of them, also rows not kept by [`MergeScreen::bound`]).
    pub fn count_of(&self, tab: MergeTab) -> u64 {
        let Some(p) = self.plan() else { return 0 };
        match tab {
            MergeTab::Merged => p.totals.new,
            MergeTab::Duplicates => p.totals.duplicates,
            MergeTab::Dropped => p.totals.dropped,
            other => self.len_of(other) as u64,
        }
    }

    /// What a tab's label counts: [`MergeScreen::count_of`], or `—` for a list the refused plan
    /// did not make (no merged order on a refusal; no duplicates or conflicts when the bundles
    /// were refused before merging), so the label never counts rows its list does not have.
    pub fn tab_count(&self, tab: MergeTab) -> String {
        let Some(p) = self.plan() else {
            return "0".into();
        };
        let made = match tab {
            MergeTab::Merged => p.new_entries.is_some(),
            MergeTab::Duplicates | MergeTab::Conflicts => p.refusal != Some(Refusal::Findings),
            MergeTab::Plan | MergeTab::Dropped => true,
        };
        if made {
            self.count_of(tab).to_string()
        } else {
            "—".into()
        }
    }

    /// The refusal of a refused plan, plainly: `refused: 1 conflict — no merged order`.
    pub fn refusal_note(&self) -> Option<String> {
        let p = self.plan()?;
        if p.status != ImportStatus::Refused {
            return None;
        }
        Some(match p.refusal {
            Some(Refusal::Conflicts) => format!(
                "refused: {} — no merged order",
                plural(p.conflicts.len() as u64, "conflict")
            ),
            Some(Refusal::NothingToImport) => {
                "refused: nothing to import — every entry dropped, or none given".to_string()
            }
            _ => format!(
                "refused: {} — not merged",
                plural(p.totals.findings, "verification finding")
            ),
        })
    }

    /// What an empty list says: why it is empty (a refused plan did not make it) or that it is.
    fn empty_text(&self, tab: MergeTab) -> String {
        let made = self.tab_count(tab) != "—";
        let note = self.refusal_note();
        match (tab, note) {
            (MergeTab::Merged, Some(note)) if !made => {
                let p = self.plan().expect("a refusal has a plan");
                if p.refusal == Some(Refusal::Conflicts) {
                    let which = if p.conflicts.len() == 1 {
                        "the job with two payloads".to_string()
                    } else {
                        format!("the {} jobs with more than one payload", p.conflicts.len())
                    };
                    format!(
                        "{note}. The Conflicts list shows {which}; fix the producer, then plan again (r)."
                    )
                } else {
                    format!("{note}. The Plan list shows the findings; F plans with --force.")
                }
            }
            (_, Some(note)) if !made => {
                format!("{note}. The bundles were refused before merging: this list is not known.")
            }
            (MergeTab::Merged, _) => "no new entries".into(),
            (MergeTab::Duplicates, _) => "no duplicates".into(),
            (MergeTab::Conflicts, _) => "no conflicts".into(),
            _ => "nothing dropped".into(),
        }
    }

    /// A row's searchable text (the `/` search): the same fields the list shows.
    pub fn row_text(&self, tab: MergeTab, i: usize) -> Option<String> {
        row_text(self.plan()?, &self.lines, tab, i)
    }

    /// Rows in a tab's list.
    pub fn len_of(&self, tab: MergeTab) -> usize {
        let Some(p) = self.plan() else { return 0 };
        match tab {
            MergeTab::Plan => self.lines.len(),
            MergeTab::Merged => p.new_entries.as_ref().map_or(0, |v| v.len()),
            MergeTab::Duplicates => p.duplicates.len(),
            MergeTab::Conflicts => p.conflicts.len(),
            MergeTab::Dropped => p.dropped.len(),
        }
    }

    pub fn switch_tab(&mut self, delta: isize) {
        let n = MergeTab::ALL.len() as isize;
        self.tab = ((self.tab as isize + delta).rem_euclid(n)) as usize;
        self.selected = 0;
        self.offset = 0;
        self.scroll = 0;
        self.plan_found = None;
        self.diff = None;
    }

    /// Opens the tab showing `tab`.
    pub fn show_tab(&mut self, tab: MergeTab) {
        let i = MergeTab::ALL.iter().position(|t| *t == tab).unwrap_or(0);
        self.switch_tab(i as isize - self.tab as isize);
    }

    pub fn move_by(&mut self, d: isize) {
        if self.diff.is_some() || self.current_tab() == MergeTab::Plan {
            self.scroll = (self.scroll as isize + d).max(0) as usize;
            self.plan_found = None;
            return;
        }
        let n = self.len_of(self.current_tab());
        if n == 0 {
            return;
        }
        self.selected = (self.selected as isize + d).clamp(0, n as isize - 1) as usize;
    }

    /// The (node id, job id, tHlc) of the selected list row, for the swimlane marker.
    fn selected_entry(&self) -> Option<(String, String, String)> {
        let p = self.plan()?;
        let i = self.selected;
        match self.current_tab() {
            MergeTab::Plan => None,
            MergeTab::Merged => p
                .new_entries
                .as_ref()?
                .get(i)
                .map(|e| (e.node_id.clone(), e.job_id.clone(), e.t_hlc.clone())),
            MergeTab::Duplicates => p
                .duplicates
                .get(i)
                .map(|d| (d.node_id.clone(), d.job_id.clone(), d.t_hlc.clone())),
            MergeTab::Conflicts => p
                .conflicts
                .get(i)?
                .sides
                .iter()
                .find_map(|s| s.origin.as_ref())
                .map(|o| (o.node_id.clone(), o.job_id.clone(), o.t_hlc.clone())),
            MergeTab::Dropped => p.dropped.get(i).map(|d| {
                (
                    d.origin.node_id.clone(),
                    d.origin.job_id.clone(),
                    d.origin.t_hlc.clone(),
                )
            }),
        }
    }

    fn header(&self) -> String {
        let names: Vec<String> = self
            .inputs
            .iter()
            .map(|p| {
                p.file_name()
                    .map(|n| visible(&n.to_string_lossy()).into_owned())
                    .unwrap_or_default()
            })
            .collect();
        format!(" {} bundle(s): {}", names.len(), names.join(", "))
    }

    pub fn render(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let [head, rest] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(area);
        f.render_widget(
            Paragraph::new(Line::from(Span::styled(
                clip(&self.header(), area.width as usize),
                theme.header,
            ))),
            head,
        );
        if let Some(p) = &self.importing {
            let [g, body] =
                Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(rest);
            draw_progress(f, g, theme, p, "importing");
            self.draw_body(f, body, theme);
            return;
        }
        match &self.state {
            MergeState::Empty => {
                f.render_widget(
                    Paragraph::new(vec![
                        Line::from(""),
                        Line::from(Span::styled(
                            " No bundles chosen. On the Bundles screen (1), Space marks bundles and m opens their merge preview (or the selected bundle's).",
                            theme.muted,
                        )),
                    ])
                    .wrap(ratatui::widgets::Wrap { trim: false }),
                    rest,
                );
            }
            MergeState::Planning(p) => {
                let [g, _] =
                    Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(rest);
                draw_progress(f, g, theme, p, "planning");
            }
            MergeState::Failed(e) => {
                f.render_widget(
                    Paragraph::new(Line::from(vec![
                        Span::styled(" ✗ the plan failed: ", theme.finding),
                        Span::styled(visible(e).into_owned(), theme.base),
                    ]))
                    .wrap(ratatui::widgets::Wrap { trim: false }),
                    rest,
                );
            }
            MergeState::Ready(_) => self.draw_body(f, rest, theme),
        }
    }

    fn draw_body(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let Some(plan) = self.plan() else { return };
        let lane_count = plan.lanes.as_ref().map_or(0, |l| l.len());
        let lanes_h = if lane_count == 0 {
            3
        } else {
            (lane_count as u16).min(8) + 4
        };
        let [lanes_area, tabs_area, body] = Layout::vertical([
            Constraint::Length(lanes_h),
            Constraint::Length(1),
            Constraint::Min(3),
        ])
        .areas(area);
        // Swimlanes.
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(
                " HLC swimlanes (one lane per node, by physical time) ",
                theme.header,
            ));
        let inner = block.inner(lanes_area);
        f.render_widget(block, lanes_area);
        match plan.lanes.as_deref() {
            Some(lanes) if !lanes.is_empty() => {
                let [legend, tracks] =
                    Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
                f.render_widget(Paragraph::new(swimlanes::legend(theme)), legend);
                let mark = self.selected_entry().and_then(|(node, job, t)| {
                    let li = lanes.iter().position(|l| l.node_id == node)?;
                    let e = lanes[li]
                        .entries
                        .iter()
                        .find(|e| e.job_id == job && e.t_hlc == t)?;
                    Some((li, e.physical))
                });
                swimlanes::draw(f, tracks, theme, lanes, mark);
            }
            // One row: cut with `…` where the box ends, never in silence.
            _ => f.render_widget(
                Paragraph::new(Span::styled(
                    clip(
                        " no lanes: the plan stopped before merging (see Plan); F plans and imports with --force",
                        inner.width as usize,
                    ),
                    theme.muted,
                )),
                inner,
            ),
        }
        // Tabs.
        let mut spans = vec![Span::raw(" ")];
        for (i, t) in MergeTab::ALL.iter().enumerate() {
            let label = if *t == MergeTab::Plan {
                t.title().to_string()
            } else {
                format!("{} {}", t.title(), self.tab_count(*t))
            };
            if i == self.tab {
                spans.push(Span::styled(format!("[{label}]"), theme.tab_active));
            } else {
                spans.push(Span::styled(format!(" {label} "), theme.tab));
            }
            spans.push(Span::raw(" "));
        }
        f.render_widget(Paragraph::new(Line::from(spans)), tabs_area);
        if let Some(ci) = self.diff {
            self.draw_diff(f, body, theme, ci);
            return;
        }
        self.page = body.height.max(1) as usize;
        match self.current_tab() {
            MergeTab::Plan => {
                // End/G asks for "the last row": the last page, never a blank area past it.
                self.scroll = self
                    .scroll
                    .min(self.lines.len().saturating_sub(body.height as usize));
                let lines: Vec<Line> = self
                    .lines
                    .iter()
                    .skip(self.scroll)
                    // A line longer than the panel (a file name, a reason) ends with `…`.
                    .map(|l| {
                        let text = clip(l, body.width as usize);
                        Line::from(Span::styled(text, plan_line_style(l, theme)))
                    })
                    .collect();
                f.render_widget(Paragraph::new(lines).style(theme.base), body);
            }
            tab => self.draw_list(f, body, theme, tab),
        }
    }

    fn draw_list(&mut self, f: &mut Frame, area: Rect, theme: &Theme, tab: MergeTab) {
        let n = self.len_of(tab);
        if n == 0 {
            let text = self.empty_text(tab);
            let style = if self.refusal_note().is_some() {
                theme.finding
            } else {
                theme.muted
            };
            f.render_widget(
                Paragraph::new(Span::styled(format!(" {text}"), style))
                    .wrap(ratatui::widgets::Wrap { trim: false }),
                area,
            );
            return;
        }
        let height = area.height as usize;
        self.selected = self.selected.min(n - 1);
        self.offset = table_window(self.offset, self.selected, height, n);
        // The tab line above the rows stands where a table's header would.
        self.list_area = Some(Rect {
            y: area.y.saturating_sub(1),
            height: area.height + 1,
            ..area
        });
        let Some(p) = self.plan() else { return };
        let w = area.width as usize;
        let mut lines = Vec::with_capacity(height);
        for i in self.offset..(self.offset + height).min(n) {
            let (glyph, style, text) = match tab {
                MergeTab::Merged => {
                    let e = &p.new_entries.as_ref().expect("counted")[i];
                    let (g, _, s) = swimlanes::fate_mark(Fate::New, theme);
                    (
                        g,
                        s,
                        format!(
                            "#{:<6} {}  {}  node {}  bundle {}  link {}",
                            e.seq,
                            visible(&e.t_hlc),
                            visible(&e.job_id),
                            visible(&e.node_id),
                            clip(&visible(&e.bundle_id), 8),
                            clip(&e.chain_link, 16)
                        ),
                    )
                }
                MergeTab::Duplicates => {
                    let d = &p.duplicates[i];
                    let (g, _, s) = swimlanes::fate_mark(Fate::Duplicate, theme);
                    let kept = match &d.kept {
                        Some(k) => format!(
                            "kept {} from node {}",
                            visible(&k.t_hlc),
                            visible(&k.node_id)
                        ),
                        None => "already in the chain".into(),
                    };
                    (
                        g,
                        s,
                        format!(
                            "{}  {}  node {} #{}  ({kept})",
                            visible(&d.job_id),
                            visible(&d.t_hlc),
                            visible(&d.node_id),
                            d.index
                        ),
                    )
                }
                MergeTab::Conflicts => {
                    let c = &p.conflicts[i];
                    let (g, _, s) = swimlanes::fate_mark(Fate::Conflict, theme);
                    let hashes: Vec<String> =
                        c.payload_hashes.iter().map(|h| clip(h, 12)).collect();
                    (
                        g,
                        s,
                        format!(
                            "{}  {} sides  payloadHash {}   Enter: diff",
                            visible(&c.job_id),
                            c.sides.len(),
                            hashes.join(" ≠ ")
                        ),
                    )
                }
                _ => {
                    let d = &p.dropped[i];
                    let (g, _, s) = swimlanes::fate_mark(Fate::Dropped, theme);
                    (g, s, crate::report_text::dropped_line(d))
                }
            };
            let sel = i == self.selected;
            let line = Line::from(vec![
                Span::styled(if sel { "▶ " } else { "  " }, theme.accent),
                Span::styled(format!("{glyph} "), style),
                Span::styled(clip(&text, w.saturating_sub(4)), theme.base),
            ]);
            lines.push(if sel {
                line.style(theme.selection)
            } else {
                line
            });
        }
        f.render_widget(Paragraph::new(lines).style(theme.base), area);
    }

    fn draw_diff(&mut self, f: &mut Frame, area: Rect, theme: &Theme, ci: usize) {
        let Some(c) = self.plan().and_then(|p| p.conflicts.get(ci)) else {
            return;
        };
        let (a, b) = match c.sides.as_slice() {
            [a, b, ..] => (a, b),
            _ => return,
        };
        let la = diff::pretty_lines(a.payload.as_deref().unwrap_or(""));
        let lb = diff::pretty_lines(b.payload.as_deref().unwrap_or(""));
        let rows = diff::align(&la, &lb);
        let ha = side_header(a);
        let hb = side_header(b);
        let more = if c.sides.len() > 2 {
            format!(" (+{} more sides on the Plan tab)", c.sides.len() - 2)
        } else {
            String::new()
        };
        let title_a = format!("✗ conflict {} · side 1", visible(&c.job_id));
        let title_b = format!("side 2{more} · Esc closes");
        self.scroll = diff::draw(
            f,
            area,
            theme,
            [&title_a, &title_b],
            [&ha, &hb],
            &rows,
            self.scroll,
        );
    }
}

/// The provenance of one conflict side, as lines.
pub fn side_header(s: &ConflictSideReport) -> Vec<String> {
    let mut out = Vec::new();
    match &s.origin {
        Some(o) => {
            out.push(format!("source   {}", s.source));
            out.push(format!("bundle   {}", visible(&o.bundle_id)));
            out.push(format!("file     {}", visible(&o.file)));
            out.push(format!(
                "node     {}  index {}",
                visible(&o.node_id),
                o.index
            ));
            out.push(format!("tHlc     {}", visible(&o.t_hlc)));
        }
        None => {
            out.push(format!("source   {}", s.source));
            out.push(format!(
                "chain position {}",
                s.chain_seq.map(|x| x.to_string()).unwrap_or("?".into())
            ));
        }
    }
    out.push(format!("payloadHash {}", visible(&s.payload_hash)));
    out
}

fn plan_line_style(l: &str, theme: &Theme) -> ratatui::style::Style {
    if l.starts_with("refused") || l.starts_with("WOULD BE REFUSED") || l.starts_with("FAILED") {
        theme.finding
    } else if l.starts_with("  conflict") {
        theme.conflict
    } else if l.starts_with("PLAN") || l.starts_with("OK") {
        theme.ok
    } else if l.starts_with(' ') {
        theme.base
    } else {
        theme.header
    }
}

fn draw_progress(f: &mut Frame, area: Rect, theme: &Theme, p: &ImportProgress, what: &str) {
    use crate::core::import::{STAGE_PLANNING, STAGE_VERIFYING, STAGE_WRITING};
    let stage = p.stage.load(Ordering::Relaxed);
    let (done, total, word) = match stage {
        STAGE_VERIFYING => (
            p.bytes_read.load(Ordering::Relaxed),
            p.bytes_total.load(Ordering::Relaxed),
            "verifying",
        ),
        STAGE_PLANNING => (0, 1, "merging"),
        STAGE_WRITING => (
            p.entries_written.load(Ordering::Relaxed),
            p.entries_total.load(Ordering::Relaxed),
            "writing",
        ),
        _ => (1, 1, "done"),
    };
    let ratio = if total == 0 {
        0.0
    } else {
        (done as f64 / total as f64).clamp(0.0, 1.0)
    };
    f.render_widget(
        Gauge::default()
            .ratio(ratio)
            .label(format!("{what}: {word} {}%", (ratio * 100.0) as u32))
            .gauge_style(theme.accent),
        area,
    );
}

/// Row `i` of `tab`'s list as the `/` search matches it: the same fields the list shows (the plan
/// text's line for the Plan tab).
fn row_text(p: &ImportPlan, lines: &[String], tab: MergeTab, i: usize) -> Option<String> {
    match tab {
        MergeTab::Plan => lines.get(i).cloned(),
        MergeTab::Merged => p.new_entries.as_ref()?.get(i).map(|e| {
            format!(
                "{} {} {} {} {}",
                e.seq, e.t_hlc, e.job_id, e.node_id, e.bundle_id
            )
        }),
        MergeTab::Duplicates => p
            .duplicates
            .get(i)
            .map(|d| format!("{} {} {} {}", d.job_id, d.t_hlc, d.node_id, d.bundle_id)),
        MergeTab::Conflicts => p.conflicts.get(i).map(|c| {
            let mut t = c.job_id.clone();
            for h in &c.payload_hashes {
                t.push(' ');
                t.push_str(h);
            }
            t
        }),
        MergeTab::Dropped => p.dropped.get(i).map(|d| {
            format!(
                "{} {} {} {} {}",
                d.origin.job_id, d.origin.t_hlc, d.origin.node_id, d.origin.file, d.reason
            )
        }),
    }
}

/// Is a plan something an import can write (status and reason for the status bar otherwise)?
pub fn importable(p: &ImportPlan) -> Result<(), String> {
    match p.status {
        ImportStatus::Planned => Ok(()),
        ImportStatus::NothingToDo => Err("nothing to import: every bundle was imported before or every entry is already in the chain".into()),
        _ if !p.conflicts.is_empty() => Err(format!(
            "{} conflict(s) refuse this import, with or without --force: review them (Conflicts, Enter for the diff) and fix the producer",
            p.conflicts.len()
        )),
        _ => Err("verification found problems: the import is refused; F imports with --force (only each broken log's verified prefix)".into()),
    }
}

impl crate::tui::screen::Screen for MergeScreen {
    fn draw(&mut self, f: &mut Frame, area: Rect, ctx: &crate::tui::screen::Ctx) {
        self.render(f, area, ctx.theme);
    }

    fn title_right(&self, ctx: &crate::tui::screen::Ctx) -> String {
        ctx.store_label()
    }

    fn context_line(&self) -> String {
        match (&self.state, self.diff) {
            (_, Some(_)) => "payload diff: ≠ marks changed lines · Esc closes".to_string(),
            (MergeState::Ready(p), None) => {
                let t = &p.totals;
                let dropped = format!("{} dropped", t.dropped);
                let mut line = match self.refusal_note() {
                    Some(note) if p.refusal == Some(Refusal::Conflicts) => {
                        format!("{note} · {} · {dropped}", plural(t.duplicates, "duplicate"))
                    }
                    Some(note) => format!("{note} · {dropped}"),
                    None => format!(
                        "{} new, {}, {}, {dropped}",
                        t.new,
                        plural(t.duplicates, "duplicate"),
                        plural(t.conflicts, "conflict")
                    ),
                };
                if let Some(note) = self.cut_note() {
                    line.push_str(" · ");
                    line.push_str(&note);
                }
                line
            }
            (MergeState::Planning(_), _) => "planning…".into(),
            _ => "Space marks bundles on the Bundles screen, m previews".into(),
        }
    }

    fn page(&self) -> usize {
        self.page.max(1)
    }

    fn move_by(&mut self, d: isize) {
        MergeScreen::move_by(self, d)
    }

    fn click_rows(&self) -> Option<crate::tui::screen::ClickRows> {
        let tab = self.current_tab();
        if self.diff.is_some() || tab == MergeTab::Plan {
            return None;
        }
        Some(crate::tui::screen::ClickRows {
            area: self.list_area?,
            offset: self.offset,
            selected: self.selected,
            len: self.len_of(tab),
        })
    }

    fn scroll_detail(&mut self, d: isize) {
        self.scroll = self.scroll.saturating_add_signed(d);
        self.plan_found = None;
    }

    fn handle(&mut self, a: crate::tui::action::Action) -> bool {
        use crate::tui::action::Action;
        match a {
            Action::PrevTab => self.switch_tab(-1),
            Action::NextTab => self.switch_tab(1),
            _ => return false,
        }
        true
    }

    fn back(&mut self) -> bool {
        self.diff.take().is_some()
    }

    fn copy_value(&self) -> Option<(&'static str, String)> {
        let text = self.row_text(self.current_tab(), self.selected)?;
        Some(("row", text))
    }

    fn search_span(&self) -> (usize, usize) {
        let tab = self.current_tab();
        let from = if tab == MergeTab::Plan {
            self.plan_found.unwrap_or(self.scroll)
        } else {
            self.selected
        };
        (self.len_of(tab), from)
    }

    fn search_list(&self) -> (u64, usize) {
        (self.token, self.tab)
    }

    fn search_rows(&self) -> Option<crate::tui::search::RowText> {
        let MergeState::Ready(plan) = &self.state else {
            return None;
        };
        let (plan, lines, tab) = (plan.clone(), self.lines.clone(), self.current_tab());
        Some(Box::new(move |i| row_text(&plan, &lines, tab, i)))
    }

    fn search_select(&mut self, at: usize) {
        if self.current_tab() == MergeTab::Plan {
            self.scroll = at;
            self.plan_found = Some(at);
        } else {
            self.selected = at;
        }
    }

    fn hint_applies(&self, a: crate::tui::action::Action) -> bool {
        use crate::tui::action::Action;
        let Some(p) = self.plan() else {
            return !matches!(a, Action::Open | Action::Import | Action::ForceImport);
        };
        match a {
            // The diff is of a conflict: none, no diff.
            Action::Open => !p.conflicts.is_empty(),
            Action::Import => importable(p).is_ok(),
            // --force waives findings only, never conflicts.
            Action::ForceImport => p.refusal == Some(Refusal::Findings),
            _ => true,
        }
    }

    fn busy(&self) -> bool {
        self.is_busy()
    }

    fn progress(&self) -> u64 {
        let p = match (&self.importing, &self.state) {
            (Some(p), _) | (None, MergeState::Planning(p)) => p,
            _ => return 0,
        };
        use std::sync::atomic::Ordering;
        (p.bytes_read.load(Ordering::Relaxed) >> 12)
            .wrapping_add(p.entries_written.load(Ordering::Relaxed))
            .wrapping_add(p.stage.load(Ordering::Relaxed) as u64)
    }
}
