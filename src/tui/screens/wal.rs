//! Screen 7, WAL: a node write-ahead log. Frames as a virtual table (only visible rows are read),
//! the selected frame's decoded payload, the watermarks as bands over the LSN axis, and damage shown
//! where it is (offset, reason, what recovery would do). A log refused for damage is read on past
//! it for the responder: each damaged span is a row between the frames around it (offset, reason,
//! the LSNs lost), the frames after damage are marked `*`, and recovery still refuses the log.
//! Indexing runs in the background (`core::wal::index`); recover is a `core::wal::recover` call,
//! confirmed first.

use crate::core::wal::index::{DamagedSpan, Entry, LiveIndex};
use crate::core::wal::inspect::FrameView;
use crate::core::wal::{FrameState, Watermarks};
use crate::text::{visible, visible_lines, visible_path};
use crate::tui::theme::Theme;
use crate::tui::widgets::{clip, percent, table_window, text_width};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap};
use ratatui::Frame;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Default)]
pub struct WalScreen {
    pub index: Option<Arc<LiveIndex>>,
    pub selected: usize,
    pub offset: usize,
    pub page: usize,
    /// The decoded selected frame, read once per selection and what it was decoded with.
    detail: Option<(DetailKey, Result<FrameView, String>)>,
    /// Lines the payload panel is scrolled down (J/K); back to the top with another row.
    pub detail_scroll: u16,
    /// A recovery of the open log runs in the background.
    pub recovering: bool,
    /// Logs opened so far: a background `/` search of an earlier one is dropped.
    opens: u64,
    /// The loop's tick has seen, through [`WalScreen::progress`], that indexing ended: until
    /// then the screen stays busy, so that a tick comes and draws the outcome even when indexing
    /// ended right after the last one.
    end_seen: AtomicBool,
    /// The workspace's logs to open: shown while none is open, or after `o` ([`Self::picking`]).
    pub picker: super::wal_picker::WalPicker,
    /// The list is shown over an open log (`o`); Esc goes back to the log.
    pub picking: bool,
    /// Inside the frames table's border (its header line first), as last drawn: for clicks.
    table_area: Rect,
}

/// What a decoded frame's view depends on besides its bytes: the row, the watermarks read so far
/// (its current state) and whether the log's node is known yet (its HLC text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DetailKey {
    row: usize,
    marks: Watermarks,
    node_known: bool,
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
        self.detail_scroll = 0;
        self.opens += 1;
        self.end_seen = AtomicBool::new(false);
        self.picking = false;
    }

    /// True while the list of the workspace's logs is shown instead of a log.
    pub fn picker_shown(&self) -> bool {
        self.index.is_none() || self.picking
    }

    pub fn path(&self) -> Option<&Path> {
        self.index.as_ref().map(|i| i.path())
    }

    /// True while the background index is still reading.
    pub fn is_indexing(&self) -> bool {
        self.index.as_ref().is_some_and(|i| i.done().is_none())
    }

    /// A progress value that moves while indexing, and once more when indexing ends (for
    /// redraws: a log smaller than the progress step would otherwise never show its outcome).
    pub fn progress(&self) -> u64 {
        self.index.as_ref().map_or(0, |i| {
            let done = i.done().is_some();
            if done {
                self.end_seen.store(true, Ordering::Relaxed);
            }
            (i.progress().0 >> 12) ^ (u64::from(done) << 63)
        })
    }

    /// True while the end of indexing has not been seen by [`WalScreen::progress`] yet.
    fn end_unseen(&self) -> bool {
        self.index.is_some() && !self.end_seen.load(Ordering::Relaxed)
    }

    /// Rows: every indexed frame and damaged span in file order, plus one end row once the
    /// index knows where reading stopped.
    fn rows(&self) -> usize {
        self.index
            .as_ref()
            .map_or(0, |i| i.entries() + usize::from(i.done().is_some()))
    }

    pub fn move_by(&mut self, d: isize) {
        if self.picker_shown() {
            return self.picker.move_by(d);
        }
        let n = self.rows();
        if n > 0 {
            self.select((self.selected as isize + d).clamp(0, n as isize - 1) as usize);
        }
    }

    /// Selects the frame with LSN `lsn` (`:goto lsn N`): LSNs are consecutive from the log's first
    /// (SPEC 11) up to any damage, and again within each stretch read past damage. An error says
    /// which LSNs the log holds (read so far, while indexing).
    pub fn goto_lsn(&mut self, lsn: u64) -> Result<(), String> {
        let Some(idx) = self.index.as_ref() else {
            return Err("no WAL is open".into());
        };
        if let Some(row) = idx.frame_of_lsn(lsn) {
            let at = idx.entry_of_frame(row);
            self.select(at);
            // The frame is shown, not left behind the list of logs.
            self.picking = false;
            return Ok(());
        }
        let so_far = if idx.done().is_none() { " so far" } else { "" };
        let ranges: Vec<String> = idx
            .lsn_ranges()
            .iter()
            .map(|(_, a, b)| format!("{a} to {b}"))
            .collect();
        Err(match ranges.len() {
            0 => format!("there is no LSN {lsn}: no frame has been read{so_far}"),
            1 => format!(
                "there is no LSN {lsn}: this log holds LSN {}{so_far}",
                ranges[0]
            ),
            _ => format!(
                "there is no LSN {lsn}: this log holds LSN {}{so_far} (damage between them)",
                ranges.join(", ")
            ),
        })
    }

    /// Selects row `at`; the payload panel starts at its top again for another row.
    fn select(&mut self, at: usize) {
        if at != self.selected {
            self.detail_scroll = 0;
        }
        self.selected = at;
    }

    /// What recovery would do to the log as this screen read it, for the confirmation.
    pub fn recovery_preview(&self) -> String {
        let idx = self.index.as_ref();
        match idx.and_then(|i| i.done()) {
            None => "Still reading the log: recovery reads it again itself.".into(),
            Some(Ok(s)) => visible(&format!(
                "Now: {} at offset {}: {}.{}",
                s.recovery.outcome.name(),
                s.stop.offset,
                s.stop.action,
                if idx.is_some_and(|i| !i.spans().is_empty()) {
                    " The frames the screen shows after the damage stay as they are: recovery \
                     does not skip damage."
                } else {
                    ""
                }
            ))
            .into_owned(),
            Some(Err(e)) => format!("Reading it failed: {}", visible(e)),
        }
    }

    /// The status-bar line.
    pub fn summary(&self) -> String {
        let Some(i) = self.index.as_ref().filter(|_| !self.picking) else {
            return self.picker.summary();
        };
        let (read, len) = i.progress();
        match i.done() {
            None => format!(
                "indexing… {}, {}%",
                crate::format::plural(i.len() as u64, "frame"),
                percent(read, len)
            ),
            Some(Ok(s)) => format!(
                "frame {} of {} · {} at offset {}{}",
                frames_up_to(i, self.selected).min(i.len()),
                i.len(),
                s.recovery.outcome.name(),
                s.stop.offset,
                match i.spans().len() {
                    0 => String::new(),
                    n => format!(
                        " · read past {} (* after damage)",
                        crate::format::plural(n as u64, "damaged span")
                    ),
                }
            ),
            Some(Err(e)) => format!("cannot read: {}", visible(e)),
        }
    }

    pub fn render(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let Some(idx) = self.index.clone().filter(|_| !self.picking) else {
            let open = self.path().map(Path::to_path_buf);
            self.picker.render(f, area, theme, open.as_deref());
            return;
        };
        // The recovery box grows to its text (up to DAMAGE_ROWS rows), but leaves the frames
        // table a row (head 1, bands 4, table 4 with its borders and header, box borders 2).
        let damage_max = (area.height as usize)
            .saturating_sub(1 + 4 + 4 + 2)
            .clamp(1, DAMAGE_ROWS);
        let damage_h = damage_rows(
            &damage_text(theme, &idx).1,
            area.width.saturating_sub(2),
            damage_max,
        )
        .len() as u16
            + 2;
        let [head, bands, body, damage] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(4),
            Constraint::Min(3),
            Constraint::Length(damage_h),
        ])
        .areas(area);
        self.draw_head(f, head, theme, &idx);
        draw_bands(f, bands, theme, &idx);
        let [table, detail] =
            Layout::horizontal([Constraint::Percentage(58), Constraint::Percentage(42)])
                .areas(body);
        self.draw_table(f, table, theme, &idx);
        self.draw_detail(f, detail, theme, &idx);
        draw_damage(f, damage, theme, &idx, damage_max);
        if idx.is_stale() {
            // A row read found the file changed under the index (compacted or recovered by
            // another process): index it again rather than show what its old offsets hold now.
            self.open(idx.path());
        }
    }

    fn draw_head(&self, f: &mut Frame, area: Rect, theme: &Theme, idx: &LiveIndex) {
        let (read, len) = idx.progress();
        let node = idx.node().map(visible).unwrap_or("?".into()).into_owned();
        let state = match idx.done() {
            None => format!(
                "indexing {}% (states and watermarks so far)",
                percent(read, len)
            ),
            Some(Ok(s)) => match idx.spans().len() {
                0 => s.recovery.outcome.name().to_string(),
                n => format!(
                    "{} · read past {} for inspection",
                    s.recovery.outcome.name(),
                    crate::format::plural(n as u64, "damaged span")
                ),
            },
            Some(Err(_)) => "unreadable".into(),
        };
        // The title bar cuts a long path first: the head line names the file itself.
        let file = idx
            .path()
            .file_name()
            .map(|n| visible_path(std::path::Path::new(n)))
            .unwrap_or_default();
        let facts = format!(
            " · {} · {} · ",
            crate::format::plural(idx.len() as u64, "frame"),
            crate::format::plural(len, "byte")
        );
        // A long file name is cut first (with `…`): the log's state after it stays in view.
        let rest = [" · node ", &node, &facts, &state]
            .map(text_width)
            .iter()
            .sum::<usize>();
        let file = clip(
            &file,
            (area.width as usize).saturating_sub(rest + 1).max(12),
        );
        let spans = vec![
            Span::styled(" ", theme.muted),
            Span::styled(file, theme.header),
            Span::styled(" · node ", theme.muted),
            Span::styled(node, theme.accent),
            Span::styled(facts, theme.muted),
            Span::styled(state, theme.header),
        ];
        let line = Line::from(crate::tui::widgets::clip_spans(spans, area.width as usize));
        f.render_widget(Paragraph::new(line), area);
    }

    fn draw_table(&mut self, f: &mut Frame, area: Rect, theme: &Theme, idx: &LiveIndex) {
        let after = idx.first_after_damage();
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(if after.is_some() {
                " frames (* read past damage) "
            } else {
                " frames "
            });
        let height = area.height.saturating_sub(3) as usize;
        self.page = height;
        self.table_area = block.inner(area);
        let total = self.rows();
        self.offset = table_window(self.offset, self.selected, height, total);
        // The shown rows' texts first, so that the columns can be as wide as their values.
        let mut texts: Vec<(usize, bool, FrameCells)> = Vec::new();
        for i in self.offset..(self.offset + height).min(total) {
            let (damaged, cells) = match idx.entry(i) {
                Some(Entry::Frame(row)) => (
                    false,
                    match idx.row(row) {
                        Ok(v) => FrameCells::Frame([
                            match after {
                                Some(a) if row >= a => format!("{}*", v.lsn),
                                _ => v.lsn.to_string(),
                            },
                            visible(&v.hlc).into_owned(),
                            v.frame_type.to_string(),
                            v.current_state.unwrap_or(v.state).to_string(),
                            v.length.to_string(),
                        ]),
                        Err(e) => {
                            FrameCells::Line(format!("read error: {}", visible(&e.to_string())))
                        }
                    },
                ),
                Some(Entry::Damage(span)) => (true, span_cells(&span)),
                None => (!is_clean_end(idx), damage_cells(idx)),
            };
            texts.push((i, damaged, cells));
        }
        let node_suffix = idx.node().map(|n| format!(":{}", visible(n)));
        // Inside the borders, less the selection marker's column and its gap.
        let columns = FrameColumns::fit(
            area.width.saturating_sub(4),
            texts.iter().filter_map(|(_, _, c)| match c {
                FrameCells::Frame(t) => Some(t),
                FrameCells::Line(_) => None,
            }),
            node_suffix.as_deref(),
        );
        let rows = texts.into_iter().map(|(i, damaged, cells)| {
            let style = if i == self.selected {
                theme.selection
            } else {
                theme.base
            };
            let style = if damaged {
                style.patch(theme.finding)
            } else {
                style
            };
            let marker = crate::tui::widgets::marker_cell(i == self.selected);
            Row::new(std::iter::once(marker).chain(columns.cells(cells))).style(style)
        });
        // A shortened HLC column says whose node it leaves off, when that fits.
        let hlc_header = match &columns.strip {
            Some(sfx) if text_width(sfx) + 6 <= columns.widths[1] => {
                format!("HLC (…{sfx})")
            }
            _ => "HLC".to_string(),
        };
        let header = Row::new(std::iter::once(Cell::from("")).chain(columns.cells_whole([
            "LSN".into(),
            hlc_header,
            "TYPE".into(),
            "STATE".into(),
            "SIZE".into(),
        ])))
        .style(theme.header);
        let widths = std::iter::once(Constraint::Length(1)).chain(columns.constraints());
        let table = Table::new(rows, widths).header(header).block(block);
        f.render_widget(table, area);
    }

    fn draw_detail(&mut self, f: &mut Frame, area: Rect, theme: &Theme, idx: &LiveIndex) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(" payload ");
        let row = match idx.entry(self.selected) {
            Some(Entry::Frame(row)) => row,
            other => {
                let text = match (other, idx.done()) {
                    (Some(Entry::Damage(span)), _) => span_detail(&span, idx),
                    (_, Some(Ok(_))) => end_detail(idx),
                    (_, Some(Err(e))) => e.clone(),
                    (_, None) => String::new(),
                };
                let p = Paragraph::new(visible_lines(&text).join("\n"))
                    .block(block)
                    .wrap(Wrap { trim: false });
                f.render_widget(p, area);
                return;
            }
        };
        // Decoded again when the watermarks read so far (the frame's current state) or the
        // node (its HLC text) changed since: indexing reads the watermarks after the frames.
        let key = DetailKey {
            row,
            marks: idx.marks(),
            node_known: idx.node().is_some(),
        };
        if self.detail.as_ref().map(|d| d.0) != Some(key) {
            self.detail = Some((key, idx.row(row).map_err(|e| e.to_string())));
        }
        let past = idx
            .spans()
            .into_iter()
            .take_while(|s| s.frames_before <= row)
            .last();
        let text = match (self.detail.as_ref().map(|d| &d.1), past) {
            (Some(Ok(v)), None) => detail_text(v),
            (Some(Ok(v)), Some(span)) => format!(
                "* read past the damage at offset {}: recovery refuses this log before this \
                 frame; watermarks read after the damage are not applied to its state\n{}",
                span.offset,
                detail_text(v)
            ),
            (Some(Err(e)), _) => format!("cannot read this frame: {e}"),
            (None, _) => String::new(),
        };
        let lines = visible_lines(&text);
        self.detail_scroll = self.detail_scroll.min(lines.len().saturating_sub(1) as u16);
        let p = Paragraph::new(lines.join("\n"))
            .block(block)
            .style(theme.base)
            .wrap(Wrap { trim: false })
            .scroll((self.detail_scroll, 0));
        f.render_widget(p, area);
    }
}

/// What a watermark frame states, as the payload pane shows it and `y` copies it.
fn watermark_text(w: &crate::core::wal::inspect::WatermarkView) -> String {
    format!("every frame up to LSN {} is {}", w.lsn, w.state)
}

fn detail_text(v: &FrameView) -> String {
    let body = match (&v.watermark, &v.payload, &v.payload_hex) {
        (Some(w), _, _) => format!("watermark: {}", watermark_text(w)),
        // Not JSON: the text on one line with its line breaks escaped too, so that a payload
        // cannot draw lines that look like the screen's own.
        (None, Some(p), _) => serde_json::from_str::<serde_json::Value>(p)
            .and_then(|j| serde_json::to_string_pretty(&j))
            .unwrap_or_else(|_| format!("not JSON: {}", visible(p))),
        (None, None, Some(h)) => format!("hex {h}"),
        _ => String::new(),
    };
    let problem = v
        .problem
        .as_ref()
        .map(|p| format!("\n⚠ {p}"))
        .unwrap_or_default();
    format!(
        "LSN {}  offset {}  {}  crc {}\nHLC {}\nstate byte {}, current {}{}\n\n{}",
        v.lsn,
        v.offset,
        crate::format::plural(v.length, "byte"),
        v.crc32,
        v.hlc,
        v.state,
        v.current_state.unwrap_or("-"),
        problem,
        body
    )
}

/// The end row's text as `/` searches it (where reading stopped, why, what recovery does).
fn damage_search_text(idx: &LiveIndex) -> Option<String> {
    match idx.done()? {
        Ok(s) if !idx.spans().is_empty() => Some(format!(
            "end offset {} {} {} {}",
            s.end.offset,
            s.end.kind,
            s.recovery.outcome.name(),
            s.end.reason
        )),
        Ok(s) => Some(format!(
            "offset {} {} {} {} {}",
            s.stop.offset,
            s.stop.kind,
            s.recovery.outcome.name(),
            s.stop.reason,
            s.stop.action
        )),
        Err(e) => Some(e.clone()),
    }
}

/// A damaged span's row as `/` searches it.
fn span_search_text(s: &DamagedSpan) -> String {
    format!(
        "offset {} {} damaged {} {}",
        s.offset,
        s.damage.kind(),
        s.damage,
        s.lsn_gap_text()
    )
}

/// Frames up to and including table row `at` (the status bar's "frame N of M").
fn frames_up_to(idx: &LiveIndex, at: usize) -> usize {
    match idx.entry(at) {
        Some(Entry::Frame(row)) => row + 1,
        Some(Entry::Damage(s)) => s.frames_before,
        None => idx.len(),
    }
}

/// A damaged span's row: `⚠`, its offset, the reason and the LSNs lost, DAMAGED, its length.
fn span_cells(s: &DamagedSpan) -> FrameCells {
    FrameCells::Frame([
        "⚠".to_string(),
        format!("offset {}", s.offset),
        format!("{} · {}", s.damage.kind(), s.lsn_gap_text()),
        "DAMAGED".to_string(),
        s.len.to_string(),
    ])
}

/// The payload pane on a damaged span: where, how long, why, the LSNs on either side, and that
/// recovery refuses the log (it never skips damage).
fn span_detail(s: &DamagedSpan, idx: &LiveIndex) -> String {
    let to = match s.resync {
        Some(r) => format!("to the next CRC-valid frame at offset {r}"),
        None => "to the end of the file: no CRC-valid frame in it".into(),
    };
    let lsns = |l: Option<u64>| l.map_or("none".to_string(), |l| format!("LSN {l}"));
    let recovery = match idx.done() {
        Some(Ok(sum)) if sum.recovery.offset == Some(s.offset) => {
            format!("Recovery refuses this log here: {}.", sum.stop.action)
        }
        Some(Ok(sum)) => format!(
            "Recovery stops at the first damage (offset {}) and refuses the log; it never \
             reads this far.",
            sum.stop.offset
        ),
        _ => "Recovery refuses a log with damage followed by valid frames.".into(),
    };
    format!(
        "damaged span at offset {}: {} {to}\n{}\nbefore it {}, after it {}: {}\n\n{recovery}\n\
         The frames after it (marked *) are read past the damage for inspection only: recovery \
         does not skip damage, and watermarks read after it are not applied to any state.",
        s.offset,
        crate::format::plural(s.len, "byte"),
        s.damage,
        lsns(s.lsn_before),
        lsns(s.lsn_after),
        s.lsn_gap_text()
    )
}

/// The payload pane on the end row: where reading stopped and what recovery would do.
fn end_detail(idx: &LiveIndex) -> String {
    match idx.done() {
        Some(Ok(s)) if !idx.spans().is_empty() => format!(
            "{}\n\nRecovery: {} at offset {}: {}\n{}",
            s.end.reason,
            s.recovery.outcome.name(),
            s.stop.offset,
            s.stop.reason,
            s.stop.action
        ),
        Some(Ok(s)) => format!("{}\n\n{}", s.stop.reason, s.stop.action),
        Some(Err(e)) => e.clone(),
        None => String::new(),
    }
}

fn is_clean_end(idx: &LiveIndex) -> bool {
    matches!(idx.done(), Some(Ok(s)) if s.recovery.outcome == crate::core::wal::Outcome::Clean)
}

/// The end row: where reading stopped (past any damage) and the log's outcome.
fn damage_cells(idx: &LiveIndex) -> FrameCells {
    match idx.done() {
        Some(Ok(s)) if !idx.spans().is_empty() => FrameCells::Frame([
            "end".to_string(),
            format!("offset {}", s.end.offset),
            s.end.kind.to_string(),
            s.recovery.outcome.name().to_string(),
            String::new(),
        ]),
        Some(Ok(s)) => FrameCells::Frame([
            if is_clean_end(idx) { "end" } else { "⚠" }.to_string(),
            format!("offset {}", s.stop.offset),
            s.stop.kind.to_string(),
            s.recovery.outcome.name().to_string(),
            String::new(),
        ]),
        Some(Err(e)) => FrameCells::Line(format!("⚠ {}", visible(e))),
        None => FrameCells::Frame(Default::default()),
    }
}

/// One row of the frames table as text: the five columns (LSN, HLC, TYPE, STATE, SIZE), or one
/// line across the table (a frame that cannot be read).
enum FrameCells {
    Frame([String; 5]),
    Line(String),
}

/// The widths of the frames table's columns (LSN, HLC, TYPE, STATE, SIZE) inside its borders.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FrameColumns {
    widths: [usize; 5],
    /// The log's own node suffix (`:gate-b`), left off the HLCs that end with it when the whole
    /// HLC does not fit (the head line and the HLC header name the node).
    strip: Option<String>,
}

impl FrameColumns {
    /// TYPE takes what is left, but at least this much before the HLC gives up its node.
    const TYPE_MIN: usize = 11;

    /// Widths for `avail` columns and the shown rows: LSN, STATE and SIZE as wide as their
    /// widest value (or header); the HLC whole, without the log's node (`node_suffix`) when the
    /// whole one leaves TYPE less than [`Self::TYPE_MIN`]; TYPE in what is left (left out when
    /// that is under 4 columns). A value that still does not fit is cut with `…`
    /// ([`Self::cells`]), never in silence.
    fn fit<'a>(
        avail: u16,
        rows: impl Iterator<Item = &'a [String; 5]> + Clone,
        node_suffix: Option<&str>,
    ) -> FrameColumns {
        let widest = |col: usize, header: &str| {
            rows.clone()
                .map(|r| text_width(&r[col]))
                .chain([text_width(header)])
                .max()
                .unwrap_or(0)
        };
        let strip_suffix = |h: &str| -> usize {
            match node_suffix {
                Some(sfx) if h.ends_with(sfx) => text_width(h) - text_width(sfx),
                _ => text_width(h),
            }
        };
        let (lsn, state, size) = (widest(0, "LSN"), widest(3, "STATE"), widest(4, "SIZE"));
        let (hlc_whole, kind) = (widest(1, "HLC"), widest(2, "TYPE"));
        let hlc_short = rows
            .clone()
            .map(|r| strip_suffix(&r[1]))
            .chain([3])
            .max()
            .unwrap_or(3);
        // Four one-column gaps between the five columns.
        let rest = (avail as usize).saturating_sub(lsn + state + size + 4);
        let type_want = kind.min(Self::TYPE_MIN);
        let strip = hlc_whole + type_want > rest && hlc_short < hlc_whole;
        let hlc = if strip { hlc_short } else { hlc_whole };
        // The HLC whole before the TYPE; a TYPE with no room for `Job…` is left out.
        let hlc = hlc.min(rest);
        let kind = match kind.min(rest - hlc) {
            w if w < 4 => 0,
            w => w,
        };
        FrameColumns {
            widths: [lsn, hlc, kind, state, size],
            strip: node_suffix.filter(|_| strip).map(str::to_string),
        }
    }

    fn constraints(&self) -> [Constraint; 5] {
        self.widths.map(|w| Constraint::Length(w as u16))
    }

    /// Header cells: cut with `…` to their columns, the HLC's not shortened.
    fn cells_whole(&self, texts: [String; 5]) -> Vec<Cell<'static>> {
        texts
            .iter()
            .zip(self.widths)
            .map(|(t, w)| Cell::from(clip(t, w)))
            .collect()
    }

    /// The cells of one row, each cut with `…` to its column.
    fn cells(&self, cells: FrameCells) -> Vec<Cell<'static>> {
        match cells {
            FrameCells::Line(text) => vec![Cell::from(text)],
            FrameCells::Frame(texts) => texts
                .into_iter()
                .zip(self.widths)
                .enumerate()
                .map(|(col, (text, w))| {
                    let text = match &self.strip {
                        Some(sfx) if col == 1 => {
                            text.strip_suffix(sfx.as_str()).unwrap_or(&text).to_string()
                        }
                        _ => text,
                    };
                    Cell::from(clip(&text, w))
                })
                .collect(),
        }
    }
}

/// One gauge line per state: how far along the LSN axis its watermarks reach.
fn draw_bands(f: &mut Frame, area: Rect, theme: &Theme, idx: &LiveIndex) {
    let marks = idx.marks();
    let first = idx.first_lsn();
    // The LSN axis of the frames before any damage (the log as recovery reads it).
    let last = idx.lsn_ranges().first().map_or(first, |r| r.2);
    let damaged = idx.first_after_damage().is_some();
    // Watermarks come later in the log than the frames they cover: until the end is read, a
    // band is only what has been read; in a log refused for damage, what precedes the damage.
    // Watermarks read past the damage are named beside it, not applied.
    let so_far = match idx.done() {
        _ if damaged => " before the damage",
        None => " so far",
        Some(Ok(s)) if s.recovery.outcome == crate::core::wal::Outcome::Refused => {
            " before the damage"
        }
        _ => "",
    };
    let after = idx.marks_after_damage();
    let after_text = |s: FrameState| match after.covered(s) {
        n if damaged && n > 0 => format!("; after it <= LSN {n}, not applied"),
        _ => String::new(),
    };
    let suffix = FrameState::ALL[1..]
        .iter()
        .map(|&s| so_far.chars().count() + after_text(s).chars().count())
        .max()
        .unwrap_or(0);
    let width = area.width.saturating_sub(30 + suffix as u16).max(4) as u64;
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
                Span::styled(
                    format!(" <= LSN {covered}{so_far}{}", after_text(s)),
                    theme.base,
                ),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(lines), area);
}

/// What the recovery box says: where recovery stops and what it would do, in its style.
fn damage_text(theme: &Theme, idx: &LiveIndex) -> (ratatui::style::Style, String) {
    match idx.done() {
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
            visible(&format!(
                "{} at offset {}: {} — {}{}",
                s.recovery.outcome.name(),
                s.stop.offset,
                s.stop.reason,
                s.stop.action,
                match idx.spans().len() {
                    0 => String::new(),
                    n => format!(
                        ". The table reads on past it for inspection only ({}, {} after the \
                         damage, marked *); recovery does not skip damage.",
                        crate::format::plural(n as u64, "damaged span"),
                        crate::format::plural(
                            (idx.len() - idx.first_after_damage().unwrap_or(0)) as u64,
                            "frame"
                        )
                    ),
                }
            ))
            .into_owned(),
        ),
    }
}

/// Rows of text the recovery box shows at most (it grows to them, then cuts with `…`).
const DAMAGE_ROWS: usize = 4;

/// The recovery box's text rows for a box `width` columns wide (inside its borders), word-wrapped,
/// at most `max` rows, the last ending with `…` when the text goes on.
fn damage_rows(text: &str, width: u16, max: usize) -> Vec<String> {
    let width = (width as usize).max(1);
    let max = max.max(1);
    let mut rows = crate::tui::widgets::wrap_words(text, width);
    if rows.len() > max {
        rows.truncate(max);
        let last = rows.pop().unwrap_or_default();
        let cut = clip(&format!("{last} …"), width);
        rows.push(if cut.ends_with('…') {
            cut
        } else {
            format!("{last}…")
        });
    }
    rows
}

/// Red box under the table: where recovery stops and what it would do.
fn draw_damage(f: &mut Frame, area: Rect, theme: &Theme, idx: &LiveIndex, max: usize) {
    let (style, text) = damage_text(theme, idx);
    let rows: Vec<Line> = damage_rows(&text, area.width.saturating_sub(2), max)
        .into_iter()
        .map(Line::from)
        .collect();
    let p = Paragraph::new(rows).style(style).block(
        Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(" recovery "),
    );
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
        if self.picker_shown() {
            return self.picker.page.max(1);
        }
        self.page.max(1)
    }

    fn move_by(&mut self, d: isize) {
        WalScreen::move_by(self, d)
    }

    /// The frames table, or the list of logs when it is shown.
    fn click_rows(&self) -> Option<crate::tui::screen::ClickRows> {
        if self.picker_shown() {
            return Some(self.picker.click_rows());
        }
        Some(crate::tui::screen::ClickRows {
            area: self.table_area,
            offset: self.offset,
            selected: self.selected,
            len: self.rows(),
        })
    }

    /// Esc over the list shown on an open log goes back to the log.
    fn back(&mut self) -> bool {
        if self.picking && self.index.is_some() {
            self.picking = false;
            return true;
        }
        false
    }

    /// The list offers Enter; a log offers recovery, search and `o` (the list).
    fn hint_applies(&self, a: crate::tui::action::Action) -> bool {
        use crate::tui::action::Action;
        match a {
            Action::Open => self.picker_shown() && !self.picker.is_empty(),
            Action::RecoverWal
            | Action::Search
            | Action::SearchNext
            | Action::SearchPrev
            | Action::PickWal => !self.picker_shown(),
            _ => true,
        }
    }

    /// The selected frame's payload (JSON text, a watermark as the pane states it, or hex); a
    /// damaged span's offset, length and reason; the file's path on the end row or when the
    /// frame cannot be read.
    fn copy_value(&self) -> Option<(&'static str, String)> {
        if self.picker_shown() {
            let path = self.picker.selected_path()?;
            return Some(("WAL file", path.display().to_string()));
        }
        let entry = self.index.as_ref().and_then(|idx| idx.entry(self.selected));
        let frame = match entry {
            Some(Entry::Damage(s)) => {
                return Some((
                    "damaged span",
                    format!(
                        "offset {}, {}: {}; {}",
                        s.offset,
                        crate::format::plural(s.len, "byte"),
                        s.damage,
                        s.lsn_gap_text()
                    ),
                ))
            }
            Some(Entry::Frame(row)) => self.index.as_ref().and_then(|idx| idx.row(row).ok()),
            None => None,
        };
        match frame {
            Some(v) => Some(match (&v.watermark, &v.payload, &v.payload_hex) {
                (Some(w), _, _) => ("watermark", watermark_text(w)),
                (None, Some(p), _) => ("frame payload", p.clone()),
                (None, None, Some(h)) => ("frame payload (hex)", h.clone()),
                _ => ("frame LSN", v.lsn.to_string()),
            }),
            None => self.path().map(|p| ("WAL file", p.display().to_string())),
        }
    }

    fn busy(&self) -> bool {
        self.is_indexing() || self.recovering || self.end_unseen()
    }

    fn search_span(&self) -> (usize, usize) {
        (self.rows(), self.selected)
    }

    fn search_list(&self) -> (u64, usize) {
        (self.opens, 0)
    }

    /// Each frame read back from the log (one positioned read), off the UI thread, and each
    /// damaged span where it is; the end row last.
    fn search_rows(&self) -> Option<crate::tui::search::RowText> {
        // The list of logs is not searched (Esc goes back to the log's frames).
        let idx = self.index.clone().filter(|_| !self.picking)?;
        Some(Box::new(move |i| match idx.entry(i) {
            Some(Entry::Frame(row)) => idx.row(row).ok().map(|v| v.one_line()),
            Some(Entry::Damage(s)) => Some(span_search_text(&s)),
            None => damage_search_text(&idx),
        }))
    }

    fn search_select(&mut self, at: usize) {
        self.select(at.min(self.rows().saturating_sub(1)));
    }

    fn scroll_detail(&mut self, d: isize) {
        self.detail_scroll = self.detail_scroll.saturating_add_signed(d as i16);
    }

    fn progress(&self) -> u64 {
        WalScreen::progress(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::screen::Screen;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn render(screen: &mut WalScreen) -> String {
        let theme = Theme::builtin("dark").expect("theme");
        let mut term = Terminal::new(TestBackend::new(140, 30)).expect("terminal");
        term.draw(|f| screen.render(f, f.area(), &theme))
            .expect("draw");
        crate::tui::widgets::buffer_text(term.backend().buffer())
    }

    /// `y` copies the selected frame's payload, not the file's path; a watermark frame as the
    /// pane states it.
    #[test]
    fn copy_takes_the_selected_frames_payload() {
        let mut s = opened("basic.alwl");
        let (label, text) = s.copy_value().expect("a value");
        assert_eq!(label, "frame payload");
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_ok(),
            "{text}"
        );
        let marks: Vec<usize> = (0..s.rows())
            .filter(|&i| {
                let idx = s.index.as_ref().expect("index");
                i < idx.len() && idx.row(i).is_ok_and(|v| v.watermark.is_some())
            })
            .collect();
        let &m = marks.first().expect("basic.alwl holds watermark frames");
        s.select(m);
        assert_eq!(s.copy_value().expect("a value").0, "watermark");
    }

    /// `:goto lsn N` selects that frame; an LSN outside the log says which it holds.
    #[test]
    fn goto_lsn_selects_the_frame_or_says_which_lsns_there_are() {
        let mut s = opened("basic.alwl");
        let idx = s.index.clone().expect("index");
        let (first, len) = (idx.first_lsn(), idx.len() as u64);
        assert!(len >= 2, "basic.alwl has frames");
        s.goto_lsn(first + 1).expect("goto");
        assert_eq!(s.selected, 1);
        assert_eq!(idx.row(s.selected).expect("row").lsn, first + 1);
        let e = s.goto_lsn(first + len).unwrap_err();
        assert!(
            e.contains(&format!("LSN {first} to {}", first + len - 1)),
            "{e}"
        );
        assert_eq!(s.selected, 1, "the selection stays");
        assert!(WalScreen::default().goto_lsn(1).is_err());
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

    fn frame(lsn: u64, hlc: &str, kind: &str) -> [String; 5] {
        [
            lsn.to_string(),
            hlc.into(),
            kind.into(),
            "PENDING".into(),
            "156".into(),
        ]
    }

    /// The HLC column shows whole HLCs: with its node where there is room, else without the log's
    /// own node (which the header names); TYPE takes what is left, cut with `…`.
    #[test]
    fn frame_columns_keep_the_hlc_whole() {
        let rows = [
            frame(1, "1795689102983:0:gate-b", "JobAccepted"),
            frame(12, "1795689102999:12:gate-b", "JobCancellationRequested"),
        ];
        let wide = FrameColumns::fit(120, rows.iter(), Some(":gate-b"));
        assert_eq!(wide.strip, None);
        assert_eq!(wide.widths, [3, 23, 24, 7, 4]);
        // 80 columns: the table gets 44 inside its borders.
        let narrow = FrameColumns::fit(44, rows.iter(), Some(":gate-b"));
        assert_eq!(narrow.strip.as_deref(), Some(":gate-b"));
        assert_eq!(narrow.widths[1], "1795689102999:12".len());
        let cells: Vec<String> = rows
            .iter()
            .map(|r| {
                let text = r[1].strip_suffix(":gate-b").unwrap().to_string();
                clip(&text, narrow.widths[1])
            })
            .collect();
        assert_eq!(cells, ["1795689102983:0", "1795689102999:12"]);
        assert_eq!(clip(&rows[1][2], narrow.widths[2]), "JobCancel…");
        // Another node's HLC keeps its node (only the log's own is left off).
        assert_eq!(
            FrameColumns::fit(44, rows.iter(), Some(":gate-a")).strip,
            None
        );
        // Too narrow even for that: cut with `…`, never a shorter number in silence.
        let tiny = FrameColumns::fit(24, rows.iter(), Some(":gate-b"));
        assert!(tiny.widths[1] < 16, "{tiny:?}");
        assert!(clip("1795689102983:0", tiny.widths[1]).ends_with('…'));
    }

    /// A log refused for damage at 520 (LSN 4's frame) with valid frames after it: the damaged
    /// span is a row in its place between LSN 3 and LSN 5 (offset, reason, the LSN lost), the
    /// frames after it are rows marked `*`, the bands say "before the damage", and the recovery
    /// box and the damage row's pane still say that recovery refuses the log.
    #[test]
    fn damage_is_shown_in_place_with_the_frames_after_it() {
        let mut s = opened("mid-damage.alwl");
        let text = render(&mut s);
        let lines: Vec<&str> = text.lines().collect();
        let line_of = |needle: &str| {
            lines
                .iter()
                .position(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("no {needle:?} in {text}"))
        };
        let (lsn3, damage, lsn5) = (
            line_of("│  3 "),
            line_of("│  ⚠   offset 520 "),
            line_of("│  5* "),
        );
        assert_eq!((damage, lsn5), (lsn3 + 1, lsn3 + 2), "{text}");
        let row = lines[damage];
        assert!(row.contains("crc-mismatch · LSN 4 lost"), "{row}");
        assert!(row.contains("DAMAGED"), "{row}");
        assert!(
            lines[lsn5].contains("1767614400003:0:gate-a JobCreated"),
            "{text}"
        );
        assert!(text.contains("│  10* "), "{text}");
        assert!(text.contains("before the damage"), "{text}");
        assert!(text.contains("refused at offset 520"), "{text}");
        assert!(text.contains("refuse to open"), "{text}");
        assert!(text.contains("recovery does not skip damage"), "{text}");
        assert!(
            s.summary().contains("read past 1 damaged span"),
            "{}",
            s.summary()
        );
        s.move_by(3);
        assert_eq!(s.selected, 3, "the damage row is selectable");
        let pane = render(&mut s);
        assert!(pane.contains("CRC mismatch: stored f045937c"), "{pane}");
        assert!(pane.contains("Recovery refuses this log here"), "{pane}");
        s.move_by(1);
        assert!(render(&mut s).contains("* read past the damage at offset 520"));
        s.goto_lsn(5).expect("LSN 5 is read past the damage");
        assert_eq!(s.selected, 4);
        let e = s.goto_lsn(4).unwrap_err();
        assert!(e.contains("LSN 1 to 3, 5 to 10"), "{e}");
        s.move_by(100);
        assert_eq!(s.selected, 10, "the end row last");
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

    /// Indexing ends between two ticks of the loop, even for a log smaller than the progress
    /// step: the screen stays busy (so the tick comes) and its progress moves (so it redraws)
    /// until a tick has seen the end; then it is idle.
    #[test]
    fn the_end_of_indexing_reaches_the_screen_for_a_small_log() {
        let s = opened("basic.alwl");
        assert!(!s.is_indexing());
        assert!(s.busy(), "busy until a tick has seen the end");
        let p = s.progress();
        assert_ne!(
            p, 0,
            "the progress moved from that of an index that read nothing"
        );
        assert!(!s.busy(), "idle once the end was seen");
        assert_eq!(s.progress(), p);
    }

    /// A log whose watermark comes after many frames (as a real log's do): the payload pane
    /// decoded while indexing says the state is so far, and once the watermark is read it shows
    /// the frame's new current state (as the table does), not the one decoded before.
    #[test]
    fn the_payload_pane_follows_watermarks_read_after_it() {
        use crate::core::wal::{encode_frame_into, file_header, FrameType, WalHlc, Watermark};
        let d = tempfile::tempdir().expect("tempdir");
        let log = d.path().join("late-mark.alwl");
        let n: u64 = 400_000;
        let mut bytes = file_header().to_vec();
        bytes.reserve(n as usize * 60);
        let hlc = |i: u64| WalHlc::from_parts(1_700_000_000_000 + i, 0, 7).expect("hlc");
        for lsn in 1..=n {
            encode_frame_into(
                &mut bytes,
                lsn,
                hlc(lsn),
                FrameState::Pending,
                FrameType::from_byte(3).expect("type"),
                &[b"{\"n\":1}"],
            );
        }
        let mark = Watermark {
            state: FrameState::Applied,
            lsn: n,
        };
        encode_frame_into(
            &mut bytes,
            n + 1,
            hlc(n + 1),
            FrameState::Pending,
            FrameType::Watermark,
            &[&mark.encode()],
        );
        std::fs::write(&log, &bytes).expect("write");
        let mut s = WalScreen::default();
        s.open(&log);
        let idx = s.index.clone().expect("index");
        let start = std::time::Instant::now();
        while idx.is_empty() && idx.done().is_none() && start.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let early = render(&mut s);
        if idx.done().is_none() {
            assert!(early.contains("current PENDING"), "{early}");
            assert!(early.contains("so far"), "{early}");
        }
        while s.is_indexing() && start.elapsed().as_secs() < 60 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let text = render(&mut s);
        assert!(text.contains("current APPLIED"), "{text}");
        assert!(!text.contains("so far"), "{text}");
    }

    /// Untrusted text on the screen: a payload that is not JSON (raw escapes, line breaks that
    /// would draw lines looking like the screen's own) is shown on its own line, escaped; the
    /// file's name (on the head line: the title bar cuts long paths) too.
    #[test]
    fn hostile_payloads_and_file_names_are_shown_escaped() {
        use crate::core::wal::{encode_frame_into, file_header, FrameType, WalHlc};
        let d = tempfile::tempdir().expect("tempdir");
        let log = d.path().join("evil\u{1b}[31m.alwl");
        let mut bytes = file_header().to_vec();
        encode_frame_into(
            &mut bytes,
            1,
            WalHlc::from_parts(1_700_000_000_000, 0, 7).expect("hlc"),
            FrameState::Pending,
            FrameType::from_byte(3).expect("type"),
            &[b"oops \x1b[2J\nstate byte APPLIED, current APPLIED\x07"],
        );
        std::fs::write(&log, &bytes).expect("write");
        let mut s = WalScreen::default();
        s.open(&log);
        let start = std::time::Instant::now();
        while s.is_indexing() && start.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let text = render(&mut s);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text}"
        );
        assert!(text.contains("evil\\x1b[31m.alwl"), "{text}");
        assert!(text.contains("not JSON: oops \\x1b[2J\\nstate"), "{text}");
        assert!(
            !text.lines().any(|l| l.contains("│state byte APPLIED")),
            "a payload line looks like the pane's own: {text}"
        );
    }

    /// A compaction (or any rewrite) of the log while the screen shows it: drawing does not
    /// crash on what the old offsets hold now, and the log is indexed again.
    #[test]
    fn a_log_compacted_under_the_screen_is_indexed_again() {
        let d = tempfile::tempdir().expect("tempdir");
        let log = d.path().join("b.alwl");
        let basic = std::fs::read("../shared/vectors/wal/basic.alwl").expect("read");
        std::fs::write(&log, &basic).expect("write");
        let mut s = WalScreen::default();
        s.open(&log);
        let wait = |s: &WalScreen| {
            let start = std::time::Instant::now();
            while s.is_indexing() && start.elapsed().as_secs() < 10 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        };
        wait(&s);
        assert!(render(&mut s).contains("JobProgressReported"));
        // What compaction leaves: LSN 5 on, at offsets the index does not know; LSN 2's offset
        // now holds a length below the frame header.
        let mut new = basic[..8].to_vec();
        new.extend_from_slice(&basic[563..]);
        new[206..214].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 5]);
        std::fs::write(d.path().join("b.new"), &new).expect("write");
        std::fs::rename(d.path().join("b.new"), &log).expect("rename");
        render(&mut s);
        wait(&s);
        let text = render(&mut s);
        assert!(!text.contains("changed since"), "{text}");
        assert_eq!(s.index.as_ref().expect("index").first_lsn(), 5, "{text}");
    }
}
