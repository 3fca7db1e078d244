//! Screen 7, WAL: a node write-ahead log. Frames as a virtual table (only visible rows are read),
//! the selected frame's decoded payload, the watermarks as bands over the LSN axis, and damage shown
//! where it is (after the last valid frame: offset, reason, what recovery would do). Indexing runs
//! in the background (`core::wal::index`); recover is a `core::wal::recover` call, confirmed first.

use crate::core::wal::index::LiveIndex;
use crate::core::wal::inspect::FrameView;
use crate::core::wal::FrameState;
use crate::text::{visible, visible_lines};
use crate::tui::theme::Theme;
use crate::tui::widgets::{clip, percent, table_window};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap};
use ratatui::Frame;
use std::path::Path;
use std::sync::Arc;

#[derive(Default)]
pub struct WalScreen {
    pub index: Option<Arc<LiveIndex>>,
    pub selected: usize,
    pub offset: usize,
    pub page: usize,
    /// The decoded selected frame (row, view), read once per selection.
    detail: Option<(usize, Result<FrameView, String>)>,
    /// A recovery of the open log runs in the background.
    pub recovering: bool,
}

impl WalScreen {
    /// Opens `path`: indexing starts in the background.
    pub fn open(&mut self, path: &Path) {
        if let Some(old) = self.index.take() {
            old.cancel();
        }
        self.index = Some(LiveIndex::start(path));
        self.selected = 0;
        self.offset = 0;
        self.detail = None;
    }

    pub fn path(&self) -> Option<&Path> {
        self.index.as_ref().map(|i| i.path())
    }

    /// True while the background index is still reading.
    pub fn is_indexing(&self) -> bool {
        self.index.as_ref().is_some_and(|i| i.done().is_none())
    }

    /// A progress value that moves while indexing (for redraws).
    pub fn progress(&self) -> u64 {
        self.index.as_ref().map_or(0, |i| i.progress().0 >> 12)
    }

    /// Rows: every indexed frame, plus one damage row once the index knows where reading stopped.
    fn rows(&self) -> usize {
        self.index
            .as_ref()
            .map_or(0, |i| i.len() + usize::from(i.done().is_some()))
    }

    pub fn move_by(&mut self, d: isize) {
        let n = self.rows();
        if n > 0 {
            self.selected = (self.selected as isize + d).clamp(0, n as isize - 1) as usize;
        }
    }

    /// The status-bar line.
    pub fn summary(&self) -> String {
        let Some(i) = &self.index else {
            return "open a WAL with `console --wal FILE` or Enter on a .alwl file".into();
        };
        let (read, len) = i.progress();
        match i.done() {
            None => format!("indexing… {} frames, {}%", i.len(), percent(read, len)),
            Some(Ok(s)) => format!(
                "frame {} of {} · {} at offset {}",
                (self.selected + 1).min(i.len()),
                i.len(),
                s.recovery.outcome.name(),
                s.stop.offset
            ),
            Some(Err(e)) => format!("cannot read: {}", visible(e)),
        }
    }

    pub fn render(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let Some(idx) = self.index.clone() else {
            let p = Paragraph::new(
                "No WAL open. Start the console with `airlock console --wal FILE`, or press Enter \
                 on a .alwl file on the Bundles screen.",
            )
            .style(theme.muted)
            .wrap(Wrap { trim: true });
            f.render_widget(p, area);
            return;
        };
        let [head, bands, body, damage] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(4),
            Constraint::Min(3),
            Constraint::Length(3),
        ])
        .areas(area);
        self.draw_head(f, head, theme, &idx);
        draw_bands(f, bands, theme, &idx);
        let [table, detail] =
            Layout::horizontal([Constraint::Percentage(58), Constraint::Percentage(42)])
                .areas(body);
        self.draw_table(f, table, theme, &idx);
        self.draw_detail(f, detail, theme, &idx);
        draw_damage(f, damage, theme, &idx);
    }

    fn draw_head(&self, f: &mut Frame, area: Rect, theme: &Theme, idx: &LiveIndex) {
        let (read, len) = idx.progress();
        let node = idx.node().map(visible).unwrap_or("?".into()).into_owned();
        let state = match idx.done() {
            None => format!("indexing {}%", percent(read, len)),
            Some(Ok(s)) => s.recovery.outcome.name().to_string(),
            Some(Err(_)) => "unreadable".into(),
        };
        let line = Line::from(vec![
            Span::styled(" node ", theme.muted),
            Span::styled(node, theme.accent),
            Span::styled(
                format!(" · {} frames · {} bytes · ", idx.len(), len),
                theme.muted,
            ),
            Span::styled(state, theme.header),
        ]);
        f.render_widget(Paragraph::new(line), area);
    }

    fn draw_table(&mut self, f: &mut Frame, area: Rect, theme: &Theme, idx: &LiveIndex) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(" frames ");
        let height = area.height.saturating_sub(3) as usize;
        self.page = height;
        let total = self.rows();
        self.offset = table_window(self.offset, self.selected, height, total);
        let frames = idx.len();
        let mut rows = Vec::new();
        for i in self.offset..(self.offset + height).min(total) {
            let style = if i == self.selected {
                theme.selection
            } else {
                theme.base
            };
            let cells: Vec<Cell> = if i < frames {
                match idx.row(i) {
                    Ok(v) => vec![
                        Cell::from(v.lsn.to_string()),
                        Cell::from(clip(&visible(&v.hlc), 30)),
                        Cell::from(v.frame_type),
                        Cell::from(v.current_state.unwrap_or(v.state)),
                        Cell::from(v.length.to_string()),
                    ],
                    Err(e) => vec![Cell::from(format!("read error: {e}"))],
                }
            } else {
                damage_cells(idx)
            };
            let style = if i >= frames && !is_clean_end(idx) {
                style.patch(theme.finding)
            } else {
                style
            };
            rows.push(Row::new(cells).style(style));
        }
        let widths = [
            Constraint::Length(10),
            Constraint::Length(30),
            Constraint::Length(25),
            Constraint::Length(9),
            Constraint::Length(7),
        ];
        let table = Table::new(rows, widths)
            .header(Row::new(["LSN", "HLC", "TYPE", "STATE", "SIZE"]).style(theme.header))
            .block(block);
        f.render_widget(table, area);
    }

    fn draw_detail(&mut self, f: &mut Frame, area: Rect, theme: &Theme, idx: &LiveIndex) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(" payload ");
        if self.selected >= idx.len() {
            let text = match idx.done() {
                Some(Ok(s)) => format!("{}\n\n{}", s.stop.reason, s.stop.action),
                Some(Err(e)) => e.clone(),
                None => String::new(),
            };
            let p = Paragraph::new(visible_lines(&text).join("\n"))
                .block(block)
                .wrap(Wrap { trim: false });
            f.render_widget(p, area);
            return;
        }
        if self.detail.as_ref().map(|d| d.0) != Some(self.selected) {
            self.detail = Some((
                self.selected,
                idx.row(self.selected).map_err(|e| e.to_string()),
            ));
        }
        let text = match self.detail.as_ref().map(|d| &d.1) {
            Some(Ok(v)) => detail_text(v),
            Some(Err(e)) => format!("cannot read this frame: {e}"),
            None => String::new(),
        };
        let p = Paragraph::new(visible_lines(&text).join("\n"))
            .block(block)
            .style(theme.base)
            .wrap(Wrap { trim: false });
        f.render_widget(p, area);
    }
}

fn detail_text(v: &FrameView) -> String {
    let body = match (&v.watermark, &v.payload, &v.payload_hex) {
        (Some(w), _, _) => format!("watermark: every frame up to LSN {} is {}", w.lsn, w.state),
        (None, Some(p), _) => serde_json::from_str::<serde_json::Value>(p)
            .and_then(|j| serde_json::to_string_pretty(&j))
            .unwrap_or_else(|_| p.clone()),
        (None, None, Some(h)) => format!("hex {h}"),
        _ => String::new(),
    };
    format!(
        "LSN {}  offset {}  {} bytes  crc {}\nHLC {}\nstate byte {}, current {}\n\n{}",
        v.lsn,
        v.offset,
        v.length,
        v.crc32,
        v.hlc,
        v.state,
        v.current_state.unwrap_or("-"),
        body
    )
}

fn is_clean_end(idx: &LiveIndex) -> bool {
    matches!(idx.done(), Some(Ok(s)) if s.recovery.outcome == crate::core::wal::Outcome::Clean)
}

fn damage_cells(idx: &LiveIndex) -> Vec<Cell<'static>> {
    match idx.done() {
        Some(Ok(s)) => vec![
            Cell::from(if is_clean_end(idx) { "end" } else { "⚠" }),
            Cell::from(format!("offset {}", s.stop.offset)),
            Cell::from(s.stop.kind),
            Cell::from(s.recovery.outcome.name()),
            Cell::from(""),
        ],
        Some(Err(e)) => vec![Cell::from(format!("⚠ {}", visible(e)))],
        None => vec![],
    }
}

/// One gauge line per state: how far along the LSN axis its watermarks reach.
fn draw_bands(f: &mut Frame, area: Rect, theme: &Theme, idx: &LiveIndex) {
    let marks = idx.marks();
    let first = idx.first_lsn();
    let last = first + idx.len().max(1) as u64 - 1;
    let width = area.width.saturating_sub(30).max(4) as u64;
    let lines: Vec<Line> = FrameState::ALL[1..]
        .iter()
        .map(|&s| {
            let covered = marks.covered(s);
            let filled = if covered < first {
                0
            } else {
                ((covered.min(last) - first + 1) * width / (last - first + 1)) as usize
            };
            Line::from(vec![
                Span::styled(format!(" {:<10}", s.name()), theme.muted),
                Span::styled("█".repeat(filled), theme.ok),
                Span::styled("░".repeat(width as usize - filled), theme.muted),
                Span::styled(format!(" <= LSN {covered}"), theme.base),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(lines), area);
}

/// Red box under the table: where recovery stops and what it would do.
fn draw_damage(f: &mut Frame, area: Rect, theme: &Theme, idx: &LiveIndex) {
    let (style, text) = match idx.done() {
        None => (
            theme.pending,
            "reading… damage, if any, shows here".to_string(),
        ),
        Some(Err(e)) => (theme.finding, visible(e).into_owned()),
        Some(Ok(s)) => (
            if is_clean_end(idx) {
                theme.ok
            } else {
                theme.finding
            },
            format!(
                "{} at offset {}: {} — {}",
                s.recovery.outcome.name(),
                s.stop.offset,
                s.stop.reason,
                s.stop.action
            ),
        ),
    };
    let p = Paragraph::new(visible(&text).into_owned())
        .style(style)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.border)
                .title(" recovery "),
        )
        .wrap(Wrap { trim: true });
    f.render_widget(p, area);
}

impl crate::tui::screen::Screen for WalScreen {
    fn draw(&mut self, f: &mut Frame, area: Rect, ctx: &crate::tui::screen::Ctx) {
        self.render(f, area, ctx.theme);
    }

    fn title_right(&self, _ctx: &crate::tui::screen::Ctx) -> String {
        crate::tui::widgets::path_title(self.path())
    }

    fn context_line(&self) -> String {
        self.summary()
    }

    fn page(&self) -> usize {
        self.page.max(1)
    }

    fn move_by(&mut self, d: isize) {
        WalScreen::move_by(self, d)
    }

    fn copy_value(&self) -> Option<(&'static str, String)> {
        self.path().map(|p| ("WAL file", p.display().to_string()))
    }

    fn busy(&self) -> bool {
        self.is_indexing() || self.recovering
    }

    fn progress(&self) -> u64 {
        WalScreen::progress(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn render(screen: &mut WalScreen) -> String {
        let theme = Theme::builtin("dark").expect("theme");
        let mut term = Terminal::new(TestBackend::new(140, 30)).expect("terminal");
        term.draw(|f| screen.render(f, f.area(), &theme))
            .expect("draw");
        crate::tui::widgets::buffer_text(term.backend().buffer())
    }

    fn opened(name: &str) -> WalScreen {
        let mut s = WalScreen::default();
        s.open(Path::new(&format!("../shared/vectors/wal/{name}")));
        let start = std::time::Instant::now();
        while s.is_indexing() && start.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        s
    }

    #[test]
    fn damage_is_shown_after_the_last_valid_frame() {
        let mut s = opened("mid-damage.alwl");
        let text = render(&mut s);
        assert!(text.contains("JobAccepted"), "{text}");
        assert!(text.contains("offset 520"), "{text}");
        assert!(text.contains("crc-mismatch"), "{text}");
        assert!(text.contains("refuse to open"), "{text}");
        s.move_by(10);
        assert_eq!(s.selected, 3, "the damage row is selectable");
        assert!(render(&mut s).contains("CRC mismatch: stored f045937c"));
    }

    #[test]
    fn frames_payload_and_watermark_bands_are_drawn() {
        let mut s = opened("basic.alwl");
        let text = render(&mut s);
        assert!(text.contains("1767614400000:0:gate-a"), "{text}");
        assert!(text.contains("\"workflow\": \"load-test\""), "{text}");
        assert!(
            text.contains("REGIONAL") && text.contains("<= LSN 3"),
            "{text}"
        );
        assert!(text.contains("APPLIED"), "{text}");
        assert!(s.summary().contains("clean"), "{}", s.summary());
    }
}
