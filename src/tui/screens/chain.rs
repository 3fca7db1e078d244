//! Screen 2, Chain: one tab per node log, the chain ribbon, a virtual entry table that reads only
//! the visible rows from the file, findings highlighted in place, `n`/`N` between findings, and a
//! detail panel with the pretty payload, stored vs recomputed hashes and the finding's explanation.

use crate::core::bundle::index::{evidence, ChainIndex, EntryRow};
use crate::core::verify::{entry_flags, Finding};
use crate::text::{visible, visible_lines};
use crate::tui::theme::Theme;
use crate::tui::widgets::ribbon::Ribbon;
use crate::tui::widgets::{clip, human_bytes, table_window};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Gauge, Paragraph, Row, Table, Wrap};
use ratatui::Frame;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What the chain screen shows.
#[derive(Debug, Default)]
pub enum ChainState {
    /// No bundle opened yet.
    #[default]
    Empty,
    /// Indexing in the background.
    Loading {
        path: PathBuf,
        read: Arc<AtomicU64>,
        total: u64,
        started: Instant,
    },
    Ready(Arc<ChainIndex>),
    Failed {
        path: PathBuf,
        error: String,
    },
}

/// The chain screen's state.
#[derive(Debug, Default)]
pub struct ChainScreen {
    pub state: ChainState,
    pub log: usize,
    pub selected: usize,
    pub offset: usize,
    pub detail_scroll: u16,
    /// Index into `positions` of the finding last jumped to.
    pub finding_cursor: Option<usize>,
    positions: Vec<(usize, usize)>,
    cache: HashMap<(usize, usize), EntryRow>,
    pub page: usize,
    pub table_area: Rect,
}

const CACHE_LIMIT: usize = 2048;

impl ChainScreen {
    pub fn loading(path: PathBuf, read: Arc<AtomicU64>, total: u64) -> ChainScreen {
        ChainScreen {
            state: ChainState::Loading {
                path,
                read,
                total,
                started: Instant::now(),
            },
            ..ChainScreen::default()
        }
    }

    pub fn set_ready(&mut self, index: Arc<ChainIndex>) {
        self.positions = index.finding_positions();
        self.state = ChainState::Ready(index);
        self.log = 0;
        self.selected = 0;
        self.offset = 0;
        self.finding_cursor = None;
        self.cache.clear();
    }

    pub fn index(&self) -> Option<&ChainIndex> {
        match &self.state {
            ChainState::Ready(i) => Some(i),
            _ => None,
        }
    }

    pub fn path(&self) -> Option<&PathBuf> {
        match &self.state {
            ChainState::Empty => None,
            ChainState::Loading { path, .. } | ChainState::Failed { path, .. } => Some(path),
            ChainState::Ready(i) => Some(&i.path),
        }
    }

    pub fn log_len(&self) -> usize {
        self.index()
            .and_then(|i| i.logs.get(self.log))
            .map(|l| l.entries.len())
            .unwrap_or(0)
    }

    pub fn move_by(&mut self, delta: isize) {
        let n = self.log_len();
        if n == 0 {
            return;
        }
        self.selected = (self.selected as isize + delta).clamp(0, n as isize - 1) as usize;
        self.finding_cursor = None;
        self.detail_scroll = 0;
    }

    pub fn home(&mut self) {
        self.move_by(-(self.selected as isize));
    }

    pub fn end(&mut self) {
        self.move_by(self.log_len() as isize);
    }

    pub fn switch_log(&mut self, delta: isize) {
        let n = self.index().map(|i| i.logs.len()).unwrap_or(0);
        if n == 0 {
            return;
        }
        self.log = (self.log as isize + delta).rem_euclid(n as isize) as usize;
        self.selected = 0;
        self.offset = 0;
        self.finding_cursor = None;
        self.detail_scroll = 0;
    }

    /// Jumps to the next (`forward`) or previous finding, across node logs; returns the finding's
    /// position, or `None` when there is no finding in that direction.
    pub fn jump_finding(&mut self, forward: bool) -> Option<(usize, usize)> {
        if self.positions.is_empty() {
            return None;
        }
        let here = (self.log, self.selected);
        let target = match (self.finding_cursor, forward) {
            (Some(c), true) => (c + 1 < self.positions.len()).then_some(c + 1),
            (Some(c), false) => c.checked_sub(1),
            (None, true) => self.positions.iter().position(|p| *p >= here),
            (None, false) => self.positions.iter().rposition(|p| *p < here),
        }?;
        self.goto_finding(target)
    }

    /// Jumps to the first located finding of the bundle.
    pub fn first_finding(&mut self) -> Option<(usize, usize)> {
        if self.positions.is_empty() {
            return None;
        }
        self.goto_finding(0)
    }

    fn goto_finding(&mut self, target: usize) -> Option<(usize, usize)> {
        let (log, idx) = self.positions[target];
        self.log = log;
        self.selected = idx.min(self.log_len().saturating_sub(1));
        self.finding_cursor = Some(target);
        self.detail_scroll = 0;
        Some((log, idx))
    }

    pub fn finding_count(&self) -> usize {
        self.index().map(|i| i.report.findings.len()).unwrap_or(0)
    }

    fn row(&mut self, log: usize, i: usize) -> EntryRow {
        if let Some(r) = self.cache.get(&(log, i)) {
            return r.clone();
        }
        let Some(index) = self.index() else {
            return EntryRow::default();
        };
        let r = index.read_row(log, i);
        if self.cache.len() >= CACHE_LIMIT {
            self.cache.clear();
        }
        self.cache.insert((log, i), r.clone());
        r
    }

    /// Rows read from the file and kept (the visible window and recent neighbours).
    pub fn cached_rows(&self) -> usize {
        self.cache.len()
    }

    /// True while the background index is running (the loop redraws its progress).
    pub fn is_loading(&self) -> bool {
        matches!(self.state, ChainState::Loading { .. })
    }

    pub fn render(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        match &self.state {
            ChainState::Empty => {
                f.render_widget(
                    Paragraph::new(vec![
                        Line::from(""),
                        Line::from(Span::styled(
                            "  No bundle open. Select one on the Bundles screen (1) and press Enter.",
                            theme.muted,
                        )),
                    ]),
                    area,
                );
            }
            ChainState::Loading {
                path,
                read,
                total,
                started,
            } => {
                let done = read.load(Ordering::Relaxed);
                let ratio = if *total == 0 {
                    0.0
                } else {
                    (done as f64 / *total as f64).min(1.0)
                };
                let [msg, gauge, _] = Layout::vertical([
                    Constraint::Length(2),
                    Constraint::Length(1),
                    Constraint::Min(0),
                ])
                .areas(area);
                f.render_widget(
                    Paragraph::new(Line::from(vec![
                        Span::styled(" ◔ indexing and verifying ", theme.pending),
                        Span::styled(crate::text::visible_path(path), theme.base),
                        Span::styled(
                            format!(
                                "  {} of {} · {:.1} s",
                                human_bytes(done),
                                human_bytes(*total),
                                started.elapsed().as_secs_f64()
                            ),
                            theme.muted,
                        ),
                    ])),
                    msg,
                );
                f.render_widget(
                    Gauge::default()
                        .ratio(ratio)
                        .label(format!("{:.0}%", ratio * 100.0))
                        .gauge_style(theme.accent),
                    gauge,
                );
            }
            ChainState::Failed { path, error } => {
                f.render_widget(
                    Paragraph::new(vec![
                        Line::from(vec![
                            Span::styled(" ! cannot open ", theme.warning),
                            Span::styled(crate::text::visible_path(path), theme.base),
                        ]),
                        Line::from(Span::styled(
                            format!("   {}", visible(error)),
                            theme.warning,
                        )),
                    ])
                    .wrap(Wrap { trim: false }),
                    area,
                );
            }
            ChainState::Ready(_) => self.draw_ready(f, area, theme),
        }
    }

    fn draw_ready(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let index = self.index().expect("ready");
        let bundle_findings: Vec<Finding> = index.bundle_level_findings().cloned().collect();
        let banner_h = bundle_findings.len().min(3) as u16;
        let [info, tabs, ribbon, banner, body] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Length(banner_h),
            Constraint::Min(3),
        ])
        .areas(area);

        // Bundle line.
        let r = &index.report;
        let file = index
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let verdict = if r.ok {
            Span::styled("✓ verified, no findings", theme.ok)
        } else {
            Span::styled(
                format!(
                    "✗ {}",
                    crate::format::plural(r.findings.len() as u64, "finding")
                ),
                theme.finding,
            )
        };
        // The verdict comes first and the file name is clipped: a long name never hides it. The
        // details follow, whole or left off (` · …`), the signature state first and the long
        // bundle id last.
        let name_w = (info.width as usize / 3).max(12);
        let name = format!(" {} ", crate::tui::widgets::clip(&visible(&file), name_w));
        let used = 1 + verdict.width() + crate::tui::widgets::text_width(&name);
        let details = crate::tui::widgets::fit_parts(
            &[
                format!("signature {}", r.checks.signature),
                format!("tenant {}", visible(&index.header.tenant_id)),
                crate::format::plural(index.logs.len() as u64, "node log"),
                crate::format::count(index.entry_count() as u64, "entry", "entries"),
                human_bytes(index.bytes),
                format!("bundle {}", visible(&index.header.bundle_id)),
            ],
            (info.width as usize).saturating_sub(used),
        );
        let info_line = Line::from(vec![
            Span::raw(" "),
            verdict,
            Span::styled(name, theme.header),
            Span::styled(details, theme.muted),
        ]);
        f.render_widget(Paragraph::new(info_line), info);

        // Node tabs.
        let items: Vec<(String, ratatui::style::Style)> = (index.logs.iter().enumerate())
            .map(|(i, l)| {
                let n = index.report.log_findings(i).count();
                let label = format!(
                    "{} ({}{})",
                    visible(&l.node_id),
                    l.entries.len(),
                    if n > 0 {
                        format!(", ✗{n}")
                    } else {
                        String::new()
                    }
                );
                let style = if i == self.log {
                    theme.tab_active
                } else if n > 0 {
                    theme.finding
                } else {
                    theme.tab
                };
                (label, style)
            })
            .collect();
        let lead = Span::styled(" nodes: ", theme.muted);
        let spans = crate::tui::widgets::tab_spans(lead, &items, self.log, tabs.width, theme.muted);
        f.render_widget(Paragraph::new(Line::from(spans)), tabs);

        // Ribbon.
        let log = self.log;
        let len = self.log_len();
        let marks: Vec<usize> = index
            .report
            .log_findings(log)
            .map(|f| f.index.map(|i| i as usize).unwrap_or(usize::MAX))
            .collect();
        f.render_widget(
            Ribbon {
                entries: len,
                marks: &marks,
                selected: (len > 0).then_some(self.selected),
                theme,
            },
            ribbon,
        );

        // Bundle-level findings.
        let lines: Vec<Line> = bundle_findings
            .iter()
            .take(3)
            .map(|f| {
                // A message longer than the line ends with `…`, never cut silently by the edge.
                let kind = format!(" ✗ {} ", f.kind);
                let room = (banner.width as usize).saturating_sub(kind.chars().count());
                Line::from(vec![
                    Span::styled(kind, theme.finding),
                    Span::styled(clip(&visible(&f.message), room), theme.base),
                ])
            })
            .collect();
        f.render_widget(Paragraph::new(lines), banner);

        // Table | detail.
        let (table_area, detail_area) = if body.width >= 130 {
            let [a, b] =
                Layout::horizontal([Constraint::Min(60), Constraint::Length(59)]).areas(body);
            (a, b)
        } else {
            let [a, b] = Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)])
                .areas(body);
            (a, b)
        };
        self.draw_table(f, table_area, theme);
        self.draw_detail(f, detail_area, theme);
    }

    fn draw_table(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(" entries ", theme.header));
        let inner = block.inner(area);
        f.render_widget(block, area);
        self.table_area = inner;
        let height = inner.height.saturating_sub(1) as usize;
        self.page = height.max(1);
        let total = self.log_len();
        if total == 0 {
            f.render_widget(
                Paragraph::new(" this log has no entries").style(theme.muted),
                inner,
            );
            return;
        }
        self.selected = self.selected.min(total - 1);
        self.offset = table_window(self.offset, self.selected, height, total);
        let log = self.log;
        let num_w = crate::tui::widgets::number_width(total as u64 - 1, 1);
        let constraints = [
            Constraint::Length(1),
            Constraint::Length(num_w),
            Constraint::Length(23),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Min(8),
            Constraint::Length(20),
        ];
        // What each column really gets: a value cut to it ends with `…`, never silently (a
        // squeezed tHlc or status read as another).
        let w = crate::tui::widgets::table_column_widths(inner.width, &constraints);
        let mut rows = Vec::with_capacity(height);
        for i in self.offset..(self.offset + height).min(total) {
            let row = self.row(log, i);
            let index = self.index().expect("ready");
            let flags = index.logs[log].entries[i].flags;
            let finding = index.findings_at(log, i).next().map(|f| f.kind);
            let (glyph, style) = if let Some(k) = finding {
                (format!("✗ {}", k.as_str()), theme.finding)
            } else if flags != 0 {
                ("✗".to_string(), theme.finding)
            } else if row.error.is_some() {
                ("!".to_string(), theme.warning)
            } else {
                ("✓".to_string(), theme.ok)
            };
            let selected = i == self.selected;
            let cells = vec![
                crate::tui::widgets::marker_cell(selected),
                Cell::from(clip(&i.to_string(), w[1])),
                Cell::from(clip(&visible(&row.entry.t_hlc), w[2])),
                Cell::from(clip(&visible(&row.entry.job_id), w[3])),
                Cell::from(clip(
                    &visible(row.entry.partition_key.as_deref().unwrap_or("—")),
                    w[4],
                )),
                Cell::from(clip(&visible(&row.entry.payload), w[5])),
                Cell::from(clip(&glyph, w[6])).style(style),
            ];
            let mut r = Row::new(cells);
            r = if selected {
                r.style(theme.selection)
            } else if finding.is_some() || flags != 0 {
                r.style(theme.finding)
            } else {
                r.style(theme.base)
            };
            rows.push(r);
        }
        let header = ["", "#", "tHlc", "jobId", "partition", "payload", "status"];
        let header = Row::new(header.iter().zip(&w).map(|(h, w)| clip(h, *w))).style(theme.header);
        let table = Table::new(rows, constraints)
            .header(header)
            .column_spacing(1);
        f.render_widget(table, inner);
    }

    fn draw_detail(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let log = self.log;
        let sel = self.selected;
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(format!(" entry {sel} "), theme.header));
        if self.log_len() == 0 {
            let index = self.index().expect("ready");
            let lines: Vec<Line> = index
                .log_level_findings(log)
                .flat_map(|f| finding_lines(f, theme))
                .collect();
            f.render_widget(Paragraph::new(lines).block(block), area);
            return;
        }
        let row = self.row(log, sel);
        let e = &row.entry;
        let index = self.index().expect("ready");
        let slot = index.logs[log].entries[sel];
        let mut lines: Vec<Line> = Vec::new();
        let kv = |k: &str, v: String, style: Style| {
            Line::from(vec![
                Span::styled(format!("{k:<11}"), theme.muted),
                Span::styled(v, style),
            ])
        };
        let findings: Vec<&Finding> = index.findings_at(log, sel).collect();
        // Findings first: they are why the operator is here.
        for f in &findings {
            lines.extend(finding_lines(f, theme));
            lines.push(Line::from(""));
        }
        if sel + 1 == index.logs[log].entries.len() {
            for f in index.log_level_findings(log) {
                lines.extend(finding_lines(f, theme));
                lines.push(Line::from(""));
            }
        }
        if let Some(err) = &row.error {
            lines.push(kv("error", visible(err).into_owned(), theme.warning));
        }
        lines.push(kv("node", visible(&e.node_id).into_owned(), theme.base));
        lines.push(kv("tHlc", visible(&e.t_hlc).into_owned(), theme.base));
        lines.push(kv("jobId", visible(&e.job_id).into_owned(), theme.base));
        lines.push(kv(
            "partition",
            visible(e.partition_key.as_deref().unwrap_or("—")).into_owned(),
            theme.base,
        ));
        lines.push(kv(
            "enqueued",
            visible(&e.enqueued_at).into_owned(),
            theme.base,
        ));
        lines.push(kv(
            "bytes",
            format!(
                "{}..{} in the file",
                slot.start,
                slot.start + slot.len as u64
            ),
            theme.muted,
        ));
        let re = evidence(&row);
        let hash_ok = re.payload_hash_matches;
        lines.push(Line::from(Span::styled("payloadHash", theme.header)));
        lines.push(kv(
            "  stored",
            visible(&e.payload_hash).into_owned(),
            theme.base,
        ));
        lines.push(kv(
            "  computed",
            if hash_ok {
                format!("✓ {}", re.payload_hash)
            } else {
                format!("✗ {} (differs)", re.payload_hash)
            },
            if hash_ok { theme.ok } else { theme.finding },
        ));
        lines.push(Line::from(Span::styled("link", theme.header)));
        lines.push(kv(
            "  prevLink",
            visible(
                row.entry
                    .prev_link
                    .as_deref()
                    .unwrap_or("null (first entry)"),
            )
            .into_owned(),
            theme.base,
        ));
        lines.push(kv("  stored", visible(&e.link).into_owned(), theme.base));
        match &re.link {
            Ok(l) => {
                let ok = re.link_matches;
                lines.push(kv(
                    "  computed",
                    if ok {
                        format!("✓ {l}")
                    } else {
                        format!("✗ {l} (differs)")
                    },
                    if ok { theme.ok } else { theme.finding },
                ));
            }
            Err(why) => lines.push(kv(
                "  computed",
                format!("cannot recompute: {}", visible(why)),
                theme.warning,
            )),
        }
        if slot.flags & entry_flags::SCHEMA != 0 {
            lines.push(kv(
                "schema",
                "✗ fields are missing or ill-typed".into(),
                theme.finding,
            ));
        }
        lines.push(Line::from(Span::styled("payload", theme.header)));
        let pretty = serde_json::from_str::<serde_json::Value>(&e.payload)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or_else(|| e.payload.clone());
        for l in visible_lines(&pretty) {
            lines.push(Line::from(Span::styled(format!("  {l}"), theme.base)));
        }
        let scroll = self.detail_scroll as usize;
        let scroll = crate::tui::widgets::scrolled_panel(f, area, block, lines, scroll, theme);
        self.detail_scroll = scroll.min(u16::MAX as usize) as u16;
    }
}

/// A finding as detail lines: kind, sentence, expected and actual.
fn finding_lines<'a>(f: &Finding, theme: &Theme) -> Vec<Line<'a>> {
    let mut lines = vec![
        Line::from(vec![
            Span::styled("✗ FINDING ", theme.finding),
            Span::styled(f.kind.as_str().to_string(), theme.finding),
            Span::styled(format!("  ({})", f.kind.title()), theme.muted),
        ]),
        Line::from(Span::styled(visible(&f.message).into_owned(), theme.base)),
    ];
    // The engine's details (job, expected, actual), as every report prints them.
    for (label, value) in f.details() {
        let style = match label {
            "expected" => theme.ok,
            "actual" => theme.finding,
            _ => theme.base,
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{label:<11}"), theme.muted),
            Span::styled(visible(value).into_owned(), style),
        ]));
    }
    lines
}

impl crate::tui::screen::Screen for ChainScreen {
    fn draw(&mut self, f: &mut Frame, area: Rect, ctx: &crate::tui::screen::Ctx) {
        self.render(f, area, ctx.theme);
    }

    fn title_right(&self, _ctx: &crate::tui::screen::Ctx) -> String {
        crate::tui::widgets::path_title(self.path())
    }

    fn context_line(&self) -> String {
        let Some(i) = self.index() else {
            return String::new();
        };
        let log = i.logs.get(self.log);
        format!(
            "entry {} of {} · node {}",
            self.selected,
            log.map(|l| l.entries.len()).unwrap_or(0),
            log.map(|l| visible(&l.node_id).into_owned())
                .unwrap_or_default()
        )
    }

    fn page(&self) -> usize {
        self.page.max(1)
    }

    fn move_by(&mut self, d: isize) {
        ChainScreen::move_by(self, d)
    }

    fn home(&mut self) {
        ChainScreen::home(self)
    }

    fn end(&mut self) {
        ChainScreen::end(self)
    }

    fn scroll_detail(&mut self, d: isize) {
        self.detail_scroll = self.detail_scroll.saturating_add_signed(d as i16);
    }

    fn click_rows(&self) -> Option<crate::tui::screen::ClickRows> {
        Some(crate::tui::screen::ClickRows {
            area: self.table_area,
            offset: self.offset,
            selected: self.selected,
            len: self.log_len(),
        })
    }

    fn copy_value(&self) -> Option<(&'static str, String)> {
        let index = self.index()?;
        Some(("link", index.read_row(self.log, self.selected).entry.link))
    }

    fn search_span(&self) -> (usize, usize) {
        (self.log_len(), self.selected)
    }

    fn search_rows(&self) -> Option<crate::tui::search::RowText> {
        let ChainState::Ready(index) = &self.state else {
            return None;
        };
        let (index, log) = (index.clone(), self.log);
        Some(Box::new(move |i| {
            let r = index.read_row(log, i);
            Some(format!(
                "{} {} {} {} {}",
                r.entry.job_id,
                r.entry.t_hlc,
                r.entry.partition_key.unwrap_or_default(),
                r.entry.node_id,
                r.entry.payload
            ))
        }))
    }

    fn search_select(&mut self, at: usize) {
        ChainScreen::move_by(self, at as isize - self.selected as isize);
        self.detail_scroll = 0;
    }

    fn busy(&self) -> bool {
        self.is_loading()
    }

    fn progress(&self) -> u64 {
        match &self.state {
            ChainState::Loading { read, .. } => read.load(Ordering::Relaxed) >> 16,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::verify::FindingKind;

    /// A finding's lines carry every detail the engine gives it (`Finding::details`), in its
    /// order, with expected and actual coloured as such.
    #[test]
    fn finding_lines_show_the_engines_details() {
        let theme = Theme::default();
        let f = Finding::new(FindingKind::PayloadModified, "payload changed")
            .job(Some("job-7".into()))
            .values(Some("sha256:aa".into()), Some("sha256:bb".into()));
        let lines = finding_lines(&f, &theme);
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        assert_eq!(
            text[2..],
            [
                "job        job-7",
                "expected   sha256:aa",
                "actual     sha256:bb"
            ]
        );
        assert_eq!(lines[3].spans[1].style, theme.ok);
        assert_eq!(lines[4].spans[1].style, theme.finding);
    }
}
