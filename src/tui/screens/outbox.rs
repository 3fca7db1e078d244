//! Screen 4, Outbox: counts by status as a bar, the envelope list filtered by status, an envelope's
//! detail, replay with live progress, retry / cancel (confirmed) and export. Every operation is a
//! `core::outbox` call.

use crate::core::outbox::envelope::{Envelope, EnvelopeStatus};
use crate::core::outbox::replay::{ReplayOptions, ReplayProgress};
use crate::core::outbox::store::{Outbox, StatusCounts};
use crate::text::{visible, visible_lines};
use crate::tui::theme::Theme;
use crate::tui::widgets::{clip, table_window};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Gauge, Paragraph, Table};
use ratatui::Frame;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The filters `f` cycles through.
pub const FILTERS: [Option<EnvelopeStatus>; 6] = [
    None,
    Some(EnvelopeStatus::Queued),
    Some(EnvelopeStatus::Conflict),
    Some(EnvelopeStatus::Failed),
    Some(EnvelopeStatus::Delivered),
    Some(EnvelopeStatus::Cancelled),
];

/// Envelopes listed at most (the counts bar always covers all of them).
pub const LIST_LIMIT: usize = 5_000;

/// A replay running in the background.
#[derive(Debug, Clone)]
pub struct ReplayRun {
    pub progress: Arc<Mutex<ReplayProgress>>,
    pub started: Instant,
    pub upstream: String,
}

#[derive(Debug, Default)]
pub struct OutboxScreen {
    /// The envelope panel's scroll (J/K).
    pub detail: crate::tui::widgets::DetailScroll,
    /// Where the list was last drawn (its header line first), for mouse clicks.
    pub list_area: ratatui::layout::Rect,
    pub counts: Option<StatusCounts>,
    /// The envelopes shown: those of `all` that pass the `/` text filter.
    pub envelopes: Vec<Envelope>,
    /// The envelopes of the last load (of the selected status).
    pub all: Vec<Envelope>,
    pub text_filter: crate::tui::filter::ListFilter,
    pub filter: usize,
    pub selected: usize,
    pub offset: usize,
    pub page: usize,
    pub error: Option<String>,
    pub replay: Option<ReplayRun>,
    pub loaded: bool,
}

/// An outbox operation, confirmed first when it changes state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboxOp {
    Retry { id: String },
    Cancel { id: String },
    Export { output: PathBuf },
}

impl OutboxOp {
    pub fn run(self, outbox: &Path) -> Result<String, String> {
        let mut store = Outbox::open_existing(outbox).map_err(|e| e.to_string())?;
        match self {
            OutboxOp::Retry { id } => {
                let e = store.retry(&id).map_err(|e| e.to_string())?;
                Ok(format!(
                    "envelope {} is queued again for the next replay",
                    e.request.id
                ))
            }
            OutboxOp::Cancel { id } => {
                let e = store.cancel(&id).map_err(|e| e.to_string())?;
                Ok(format!(
                    "envelope {} cancelled; it will not be sent unless retried",
                    e.request.id
                ))
            }
            OutboxOp::Export { output } => {
                let s = store.export(&output, None).map_err(|e| e.to_string())?;
                Ok(format!(
                    "exported {} envelope(s) to {}",
                    s.envelopes,
                    crate::text::visible_path(&output)
                ))
            }
        }
    }
}

/// Loads counts and the (filtered) list; opens the outbox read-only with `read_only`.
pub fn load(
    outbox: &Path,
    filter: Option<EnvelopeStatus>,
    read_only: bool,
) -> Result<(StatusCounts, Vec<Envelope>), String> {
    // An outbox this user cannot write is still shown (opening it for writing is refused).
    let store = if read_only || crate::core::sqlite_file::not_writable(outbox).is_some() {
        Outbox::open_read_only(outbox)
    } else {
        Outbox::open_existing(outbox)
    }
    .map_err(|e| e.to_string())?;
    let counts = store.counts().map_err(|e| e.to_string())?;
    let list = store
        .list(filter, Some(LIST_LIMIT))
        .map_err(|e| e.to_string())?;
    Ok((counts, list))
}

/// Replay options for the console (the engine's defaults).
pub fn replay_options(upstream: &str) -> ReplayOptions {
    ReplayOptions::new(upstream)
}

pub fn status_style(s: EnvelopeStatus, theme: &Theme) -> (&'static str, Style) {
    match s {
        EnvelopeStatus::Queued => ("◔", theme.pending),
        EnvelopeStatus::Delivered => ("✓", theme.ok),
        EnvelopeStatus::Conflict => ("≠", theme.conflict),
        EnvelopeStatus::Failed => ("✗", theme.finding),
        EnvelopeStatus::Cancelled => ("⊘", theme.muted),
    }
}

impl OutboxScreen {
    /// Replaces the loaded list and applies the text filter.
    pub fn set_envelopes(&mut self, list: Vec<Envelope>) {
        self.all = list;
        self.refilter();
    }

    /// Re-applies the text filter (id, status, method, path, route class, idempotency key).
    pub fn refilter(&mut self) {
        let keep = |e: &Envelope| {
            let haystack = format!(
                "{} {} {} {} {} {}",
                e.request.id,
                e.status.as_str(),
                e.request.method,
                e.request.path,
                e.request.route_class.as_str(),
                e.request.idempotency_key
            )
            .to_lowercase();
            self.text_filter.matches(&haystack)
        };
        self.envelopes = self.all.iter().filter(|e| keep(e)).cloned().collect();
        self.selected = self.selected.min(self.envelopes.len().saturating_sub(1));
    }

    pub fn filter_status(&self) -> Option<EnvelopeStatus> {
        FILTERS[self.filter % FILTERS.len()]
    }

    pub fn selected_envelope(&self) -> Option<&Envelope> {
        self.envelopes.get(self.selected)
    }

    pub fn move_by(&mut self, d: isize) {
        let n = self.envelopes.len();
        if n > 0 {
            self.selected = (self.selected as isize + d).clamp(0, n as isize - 1) as usize;
        }
    }

    pub fn render(&mut self, f: &mut Frame, area: Rect, theme: &Theme, outbox: &Path) {
        let replay_h = if self.replay.is_some() { 2 } else { 0 };
        let [head, bar, replay, body] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Length(replay_h),
            Constraint::Min(3),
        ])
        .areas(area);
        let filter = match self.filter_status() {
            None => "all".to_string(),
            Some(s) => s.as_str().to_string(),
        };
        let mut rest = vec![
            Span::styled("   showing ", theme.muted),
            Span::styled(filter, theme.accent),
            Span::styled(" (f cycles)", theme.muted),
        ];
        rest.extend(self.text_filter.spans(theme));
        let line = crate::tui::widgets::head_line(
            Span::styled(" Outbox ", theme.header),
            Span::styled(crate::text::visible_path(outbox), theme.base),
            rest,
            head.width as usize,
        );
        f.render_widget(Paragraph::new(line), head);
        if let Some(e) = &self.error {
            f.render_widget(crate::tui::widgets::error_note(e, theme), body);
            return;
        }
        let Some(counts) = &self.counts else {
            f.render_widget(
                Paragraph::new(" reading the outbox…").style(theme.muted),
                body,
            );
            return;
        };
        draw_counts_bar(f, bar, theme, counts);
        if let Some(run) = &self.replay {
            draw_replay(f, replay, theme, run);
        }
        let (list_area, detail_area) = if body.width >= 130 {
            let [a, b] =
                Layout::horizontal([Constraint::Min(60), Constraint::Length(62)]).areas(body);
            (a, b)
        } else {
            let [a, b] = Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(body);
            (a, b)
        };
        self.draw_list(f, list_area, theme);
        self.draw_detail(f, detail_area, theme);
    }

    /// The envelope table (only the visible rows).
    fn draw_list(&mut self, f: &mut Frame, list_area: Rect, theme: &Theme) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(" envelopes ", theme.header));
        let inner = block.inner(list_area);
        f.render_widget(block, list_area);
        if self.envelopes.is_empty() {
            f.render_widget(
                Paragraph::new(if self.text_filter.text.is_empty() {
                    " no envelope with this status"
                } else {
                    " no envelope matches the filter (Esc clears it)"
                })
                .style(theme.muted),
                inner,
            );
        } else {
            let height = inner.height.saturating_sub(1) as usize;
            self.page = height.max(1);
            self.selected = self.selected.min(self.envelopes.len() - 1);
            self.offset = table_window(self.offset, self.selected, height, self.envelopes.len());
            self.list_area = inner;
            // Every digit of the largest sequence number fits (a 5-wide column cut 299999).
            let max_seq = self.envelopes.iter().map(|e| e.seq.max(0) as u64).max();
            let seq_w = crate::tui::widgets::number_width(max_seq.unwrap_or(0), 5);
            let widths = [
                Constraint::Length(1),
                Constraint::Length(seq_w),
                Constraint::Length(12),
                Constraint::Length(6),
                Constraint::Min(16),
                Constraint::Length(4),
                Constraint::Length(12),
            ];
            // What each column really gets: a value cut to it ends with `…`, never silently (a
            // cut path reads as another endpoint).
            let w = crate::tui::widgets::table_column_widths(inner.width, &widths);
            let rows = self
                .envelopes
                .iter()
                .enumerate()
                .skip(self.offset)
                .take(height)
                .map(|(i, e)| {
                    let (glyph, style) = status_style(e.status, theme);
                    let sel = i == self.selected;
                    let status = format!("{glyph} {}", e.status.as_str());
                    crate::tui::widgets::marked_row(
                        sel,
                        [
                            Cell::from(clip(&e.seq.to_string(), w[1])),
                            Cell::from(clip(&status, w[2])).style(style),
                            Cell::from(clip(&visible(&e.request.method), w[3])),
                            Cell::from(clip(&visible(&e.request.path), w[4])),
                            Cell::from(clip(&e.attempt_count.to_string(), w[5])),
                            Cell::from(clip(e.request.route_class.as_str(), w[6])),
                        ],
                        theme,
                    )
                });
            let labels = ["", "SEQ", "STATUS", "METHOD", "PATH", "TRY", "ROUTE"];
            let table = Table::new(rows, widths).header(crate::tui::widgets::header_row(
                &labels,
                &w,
                theme.header,
            ));
            f.render_widget(table, inner);
        }
    }

    fn draw_detail(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(" envelope ", theme.header));
        let Some(e) = self.selected_envelope() else {
            f.render_widget(block, area);
            return;
        };
        let kv = |k: &str, v: String, style: Style| {
            Line::from(vec![
                Span::styled(format!("{k:<12}"), theme.muted),
                Span::styled(v, style),
            ])
        };
        let (glyph, style) = status_style(e.status, theme);
        let mut lines = vec![
            kv("status", format!("{glyph} {}", e.status.as_str()), style),
            kv("id", visible(&e.request.id).into_owned(), theme.base),
            kv(
                "request",
                format!(
                    "{} {}",
                    visible(&e.request.method),
                    visible(&e.request.path)
                ),
                theme.base,
            ),
            kv(
                "route",
                format!(
                    "{} ({})",
                    e.request.route_class.as_str(),
                    visible(&e.request.route_pattern)
                ),
                theme.base,
            ),
            kv(
                "idem. key",
                visible(&e.request.idempotency_key).into_owned(),
                theme.base,
            ),
            kv("attempts", e.attempt_count.to_string(), theme.base),
            kv("created", visible(&e.created_at).into_owned(), theme.base),
        ];
        if e.status == EnvelopeStatus::Queued {
            lines.push(kv(
                "next retry",
                visible(&e.next_retry_at).into_owned(),
                theme.base,
            ));
        }
        if let Some(err) = &e.last_error {
            lines.push(kv("last error", visible(err).into_owned(), theme.warning));
        }
        if let Some(code) = e.response_status {
            lines.push(kv("response", code.to_string(), style));
        }
        if let Some(summary) = &e.response_summary {
            lines.push(kv("  body", visible(summary).into_owned(), theme.base));
        }
        lines.push(Line::from(Span::styled("body (scrubbed)", theme.header)));
        match &e.request.body {
            None => lines.push(Line::from(Span::styled("  (none)", theme.muted))),
            Some(b) => {
                let pretty = serde_json::from_str::<serde_json::Value>(b)
                    .ok()
                    .and_then(|v| serde_json::to_string_pretty(&v).ok())
                    .unwrap_or_else(|| b.clone());
                for l in visible_lines(&pretty) {
                    lines.push(Line::from(Span::styled(format!("  {l}"), theme.base)));
                }
            }
        }
        let of = (0, self.selected);
        self.detail.draw(f, area, block, lines, of, theme);
    }
}

/// The counts as a bar: each status a segment of its share, with glyph, word and count.
fn draw_counts_bar(f: &mut Frame, bar: Rect, theme: &Theme, counts: &StatusCounts) {
    let parts = [
        (EnvelopeStatus::Queued, counts.queued),
        (EnvelopeStatus::Conflict, counts.conflict),
        (EnvelopeStatus::Failed, counts.failed),
        (EnvelopeStatus::Delivered, counts.delivered),
        (EnvelopeStatus::Cancelled, counts.cancelled),
    ];
    let labels: Vec<String> = parts
        .iter()
        .map(|(s, n)| format!(" {} {} {n} ", status_style(*s, theme).0, s.as_str()))
        .collect();
    let label_w: usize = labels.iter().map(|l| l.chars().count()).sum();
    let free = (bar.width as usize).saturating_sub(label_w);
    let total = counts.total().max(1);
    let mut spans = Vec::new();
    for ((s, n), label) in parts.iter().zip(labels) {
        let (_, style) = status_style(*s, theme);
        spans.push(Span::styled(label, style));
        let w = (*n as usize * free) / total as usize;
        spans.push(Span::styled("█".repeat(w), style));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), bar);
}

/// A running replay: its counts, elapsed time and a gauge.
fn draw_replay(f: &mut Frame, replay: Rect, theme: &Theme, run: &ReplayRun) {
    let p = run.progress.lock().map(|p| p.clone()).unwrap_or_default();
    let [line, gauge] =
        Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(replay);
    f.render_widget(
            Paragraph::new(Line::from(vec![
                Span::styled(" ◔ replaying to ", theme.pending),
                Span::styled(visible(&run.upstream).into_owned(), theme.base),
                Span::styled(
                    format!(
                        "  sent {} of {} · ✓ {} delivered · ≠ {} conflict · ✗ {} failed · ◔ {} retry later · {:.1} s",
                        p.attempted,
                        p.total,
                        p.delivered,
                        p.conflict,
                        p.failed,
                        p.retry_later,
                        run.started.elapsed().as_secs_f64()
                    ),
                    theme.muted,
                ),
            ])),
            line,
        );
    let ratio = if p.total == 0 {
        0.0
    } else {
        (p.attempted as f64 / p.total as f64).min(1.0)
    };
    f.render_widget(
        Gauge::default()
            .ratio(ratio)
            .label(format!("{}/{}", p.attempted, p.total))
            .gauge_style(theme.accent),
        gauge,
    );
}

impl crate::tui::screen::Screen for OutboxScreen {
    fn click_rows(&self) -> Option<crate::tui::screen::ClickRows> {
        Some(crate::tui::screen::ClickRows {
            area: self.list_area,
            offset: self.offset,
            selected: self.selected,
            len: self.envelopes.len(),
        })
    }

    fn draw(&mut self, f: &mut Frame, area: Rect, ctx: &crate::tui::screen::Ctx) {
        let path = ctx.config.outbox.clone().unwrap_or_default();
        self.render(f, area, ctx.theme, &path);
    }

    fn title_right(&self, ctx: &crate::tui::screen::Ctx) -> String {
        format!("upstream {} ", visible(&ctx.config.upstream))
    }

    fn context_line(&self) -> String {
        match &self.counts {
            Some(c) => format!(
                "{} envelope(s): {} queued ({} due), {} conflict, {} failed",
                c.total(),
                c.queued,
                c.due,
                c.conflict,
                c.failed
            ),
            None => String::new(),
        }
    }

    fn page(&self) -> usize {
        self.page.max(1)
    }

    fn move_by(&mut self, d: isize) {
        OutboxScreen::move_by(self, d)
    }

    fn scroll_detail(&mut self, d: isize) {
        self.detail.scroll(d)
    }

    fn back(&mut self) -> bool {
        if self.text_filter.text.is_empty() {
            return false;
        }
        self.text_filter.text.clear();
        self.refilter();
        true
    }

    fn copy_value(&self) -> Option<(&'static str, String)> {
        self.selected_envelope()
            .map(|e| ("envelope id", e.request.id.clone()))
    }

    fn busy(&self) -> bool {
        self.replay.is_some()
    }

    fn progress(&self) -> u64 {
        let Some(run) = &self.replay else { return 0 };
        // The counts move with every envelope and the elapsed time with every frame.
        let p = run.progress.lock().map(|p| p.clone()).unwrap_or_default();
        (p.total << 40)
            .wrapping_add(p.attempted << 20)
            .wrapping_add(run.started.elapsed().as_millis() as u64 / 100)
    }
}
