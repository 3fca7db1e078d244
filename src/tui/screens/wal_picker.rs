//! The WAL screen's list of the workspace's node write-ahead logs (`*.alwl`): shown while no log
//! is open, and on `o` from an open one. Each row is a log the Bundles screen found and examined
//! (its name, size and what recovery would do); Enter opens the selected one. Links, FIFOs and
//! other entries the workspace refuses are not offered.

use crate::text::visible_path;
use crate::tui::theme::Theme;
use crate::tui::widgets::{clip, table_window};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap};
use ratatui::Frame;
use std::path::{Path, PathBuf};

/// One log offered.
#[derive(Debug, Clone)]
pub struct WalChoice {
    pub path: PathBuf,
    /// Its file name as shown (control characters escaped: `BundleRow::file_name`).
    pub name: String,
    pub size: u64,
    /// What examining it found (`clean`, `torn-tail at ...`, `refused ...`, `reading`), as the
    /// Bundles screen says it, and the style it says it in.
    pub state: (String, Style),
    /// Its valid frames and, when recovery would not keep it whole, the offset it stops at; why
    /// it cannot be read (escaped); empty until examined.
    pub frames: String,
}

/// The list and its selection.
#[derive(Debug, Default)]
pub struct WalPicker {
    choices: Vec<WalChoice>,
    selected: usize,
    offset: usize,
    /// Rows the last draw showed (one page).
    pub page: usize,
    /// The workspace folder the logs are in.
    dir: PathBuf,
    /// Inside the table's border (its header line first), as last drawn: for clicks.
    table_area: Rect,
}

impl WalPicker {
    /// Replaces the offered logs (sorted by name), keeping the selection on the same file when it
    /// is still there.
    pub fn set_choices(&mut self, dir: &Path, mut choices: Vec<WalChoice>) {
        choices.sort_by(|a, b| a.path.cmp(&b.path));
        let keep = self.selected_path().map(Path::to_path_buf);
        self.selected = keep
            .and_then(|p| choices.iter().position(|c| c.path == p))
            .unwrap_or(0);
        self.choices = choices;
        self.dir = dir.to_path_buf();
    }

    pub fn len(&self) -> usize {
        self.choices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.choices.is_empty()
    }

    pub fn selected_path(&self) -> Option<&Path> {
        self.choices.get(self.selected).map(|c| c.path.as_path())
    }

    /// Selects the log at `path`, if offered.
    pub fn select_path(&mut self, path: &Path) {
        if let Some(i) = self.choices.iter().position(|c| c.path == path) {
            self.selected = i;
        }
    }

    pub fn move_by(&mut self, d: isize) {
        let n = self.choices.len();
        if n > 0 {
            self.selected = (self.selected as isize + d).clamp(0, n as isize - 1) as usize;
        }
    }

    /// Where the list was last drawn, for mouse clicks.
    pub fn click_rows(&self) -> crate::tui::screen::ClickRows {
        crate::tui::screen::ClickRows {
            area: self.table_area,
            offset: self.offset,
            selected: self.selected,
            len: self.choices.len(),
        }
    }

    /// The status-bar line.
    pub fn summary(&self) -> String {
        match self.choices.len() {
            0 => format!(
                "no WAL file in {}: `console --wal FILE` opens one elsewhere",
                visible_path(&self.dir)
            ),
            n => format!(
                "{} of {} in {} · Enter opens it",
                self.selected + 1,
                crate::format::plural(n as u64, "WAL file"),
                visible_path(&self.dir)
            ),
        }
    }

    pub fn render(&mut self, f: &mut Frame, area: Rect, theme: &Theme, open: Option<&Path>) {
        let [head, list] =
            Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(area);
        let text = match (self.choices.is_empty(), open) {
            (true, _) => format!(
                "No node write-ahead log (*.alwl) in {}. Start the console with `airlock console \
                 --wal FILE` to open one from elsewhere.",
                visible_path(&self.dir)
            ),
            (false, None) => "No WAL open. Enter opens the selected log of the workspace (it is \
                              indexed in the background; R recovers it, asking first)."
                .into(),
            (false, Some(p)) => format!(
                "{} is open. Enter opens the selected log instead; Esc goes back to it.",
                visible_path(p)
            ),
        };
        f.render_widget(
            Paragraph::new(text)
                .style(theme.muted)
                .wrap(Wrap { trim: true }),
            head,
        );
        if self.choices.is_empty() {
            return;
        }
        let height = list.height.saturating_sub(3) as usize;
        self.page = height.max(1);
        self.offset = table_window(self.offset, self.selected, height, self.choices.len());
        // SIZE, FRAMES and RECOVERY at their widths; FRAMES goes first when the names would get
        // less than 20 columns, the names take the rest.
        let (size_w, frames_w, state_w) = (10, 24, 18);
        let inner = list.width.saturating_sub(2) as usize;
        let with_frames = inner >= 20 + size_w + frames_w + state_w + 3;
        // The selection marker's column, then SIZE and RECOVERY, each after a space.
        let fixed = 2 + size_w + state_w + 2 + if with_frames { frames_w + 1 } else { 0 };
        let name_w = inner.saturating_sub(fixed).max(8);
        let rows = self
            .choices
            .iter()
            .enumerate()
            .skip(self.offset)
            .take(height)
            .map(|(i, c)| {
                let mut cells = vec![
                    Cell::from(clip(&c.name, name_w)),
                    Cell::from(crate::format::human_bytes(c.size)),
                ];
                if with_frames {
                    cells.push(Cell::from(clip(&c.frames, frames_w)));
                }
                cells.push(Cell::from(clip(&c.state.0, state_w)).style(c.state.1));
                crate::tui::widgets::marked_row(i == self.selected, cells, theme)
            });
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(" WAL files of the workspace ");
        self.table_area = block.inner(list);
        let width = |w: usize| Constraint::Length(w as u16);
        let mut widths = vec![width(1), width(name_w), width(size_w)];
        let mut header = vec!["", "FILE", "SIZE"];
        if with_frames {
            widths.push(width(frames_w));
            header.push("FRAMES");
        }
        widths.push(width(state_w));
        header.push("RECOVERY");
        let table = Table::new(rows, widths)
            .header(Row::new(header).style(theme.header))
            .block(block);
        f.render_widget(table, list);
    }
}
