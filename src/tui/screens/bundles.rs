//! Screen 1, Bundles: every file of the directory with its bundle summary and a verification state
//! that fills in as background verification finishes.

use crate::core::bundle::catalog::{Listing, ListingKind, NotBundleCause};
use crate::core::verify::{Report, SignatureCheck};
use crate::text::visible;
use crate::tui::tasks::FileStamp;
use crate::tui::theme::Theme;
use crate::tui::widgets::{clip, human_bytes, table_window};
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How far a file's verification got.
#[derive(Debug, Clone)]
pub enum VerifyState {
    /// Waiting for its turn.
    Pending,
    /// An inbox file still being copied (changed within the settle interval): not read yet.
    Waiting,
    /// Being read; the counter holds bytes read.
    Running(Arc<AtomicU64>),
    /// Verified.
    Done(Box<Report>),
    /// Not a bundle, truncated (half-copied) or unreadable: the reason and its kind.
    NotBundle(String, NotBundleCause),
    /// Could not be verified (I/O, syntax).
    Failed(String),
    /// A node write-ahead log (`*.alwl`): what recovery would do (`core::wal::examine`), or why it
    /// could not be read. Enter opens it on the WAL screen.
    Wal(Result<Box<crate::core::wal::Recovery>, String>),
    /// An inbox entry that is not a regular file (a symbolic link, FIFO, socket or device): what
    /// it is and why it is refused (`core::inbox::odd_entries`). It is never opened, followed,
    /// verified or filed; only listed, for the operator to remove.
    Refused(crate::core::inbox::OddKind, String),
}

/// One file of the directory.
#[derive(Debug, Clone)]
pub struct BundleRow {
    pub path: PathBuf,
    pub stamp: FileStamp,
    pub listing: Option<Listing>,
    pub verify: VerifyState,
    /// The index the examining pass built, kept for the Chain screen (within a budget).
    pub index: Option<std::sync::Arc<crate::core::bundle::index::ChainIndex>>,
    /// The bundle's header (from the examining pass), to ask the store about it.
    pub header: Option<crate::core::bundle::BundleHeader>,
    /// Imported, partly or not, in the console's store (`core::import::import_states`).
    pub imported: Option<crate::core::import::ImportState>,
    /// Arrived in the inbox while the console watched it and not opened or decided yet.
    pub new: bool,
}

impl BundleRow {
    /// The file's name as shown: control characters made visible, bytes that are not UTF-8 as
    /// `\xNN` (two names never look alike).
    pub fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| crate::text::visible_path(std::path::Path::new(n)))
            .unwrap_or_default()
    }

    pub fn is_bundle(&self) -> bool {
        self.listing.as_ref().is_some_and(|l| l.is_bundle())
    }

    /// A refused inbox entry's kind and reason (see [`VerifyState::Refused`]).
    pub fn refused(&self) -> Option<(crate::core::inbox::OddKind, &str)> {
        match &self.verify {
            VerifyState::Refused(kind, why) => Some((*kind, why)),
            _ => None,
        }
    }

    /// The STORE column: imported, partly or not (and when), or empty while unknown.
    pub fn import_label(&self, theme: &Theme) -> (String, Style) {
        use crate::core::import::ImportState;
        match &self.imported {
            Some(ImportState::Imported { .. }) => ("✓ imported".into(), theme.ok),
            Some(ImportState::Partly {
                entries, dropped, ..
            }) => (
                format!("◑ partly {}/{entries}", entries.saturating_sub(*dropped)),
                theme.warning,
            ),
            Some(ImportState::NotImported) => ("· not".into(), theme.muted),
            None => (String::new(), theme.muted),
        }
    }

    /// The verification state as glyph + words + the theme slot that colours it.
    pub fn state_label(&self, theme: &Theme) -> (String, Style) {
        match &self.verify {
            VerifyState::Pending => ("○ pending".into(), theme.pending),
            VerifyState::Waiting => ("◌ copying…".into(), theme.pending),
            VerifyState::Running(read) => {
                let pct =
                    crate::tui::widgets::percent(read.load(Ordering::Relaxed), self.stamp.size)
                        .min(99);
                (format!("◔ verifying {pct}%"), theme.pending)
            }
            VerifyState::Done(r) if r.ok => ("✓ ok".into(), theme.ok),
            VerifyState::Done(r) => {
                let n = r.findings.len();
                (
                    format!("✗ {n} finding{}", if n == 1 { "" } else { "s" }),
                    theme.finding,
                )
            }
            VerifyState::NotBundle(_, NotBundleCause::NotABundle) => {
                ("⊘ not a bundle".into(), theme.muted)
            }
            VerifyState::NotBundle(_, NotBundleCause::Truncated) => {
                ("◔ truncated".into(), theme.warning)
            }
            VerifyState::NotBundle(_, NotBundleCause::Unreadable) => {
                ("! unreadable".into(), theme.warning)
            }
            VerifyState::Failed(_) => ("! unreadable".into(), theme.warning),
            VerifyState::Wal(Ok(r)) => {
                use crate::core::wal::Outcome;
                match r.outcome {
                    Outcome::Clean => ("◇ WAL clean".into(), theme.ok),
                    Outcome::TornTail => ("◔ WAL torn tail".into(), theme.warning),
                    Outcome::Refused => ("✗ WAL damaged".into(), theme.finding),
                }
            }
            VerifyState::Wal(Err(_)) => ("! unreadable WAL".into(), theme.warning),
            VerifyState::Refused(..) => ("⊘ refused".into(), theme.warning),
        }
    }

    /// Signer column: the trust name when verified with a trusted key, else the key id, else
    /// `unsigned`.
    pub fn signer(&self) -> String {
        if let VerifyState::Done(r) = &self.verify {
            if let Some(name) = &r.stats.signer {
                return format!("✓ {}", visible(name));
            }
        }
        match self.listing.as_ref().map(|l| &l.kind) {
            Some(ListingKind::Bundle {
                signed_by: Some(k), ..
            }) => {
                let short: String = k.chars().take(12).collect();
                let untrusted = matches!(&self.verify, VerifyState::Done(r) if r.checks.signature == crate::core::verify::SignatureState::Untrusted);
                format!("{}{}…", if untrusted { "? " } else { "" }, visible(&short))
            }
            Some(ListingKind::Bundle { .. }) => "unsigned".into(),
            _ => String::new(),
        }
    }

    /// The text searched by the `/` filter.
    fn haystack(&self) -> String {
        let mut s = self.file_name();
        if let Some(ListingKind::Bundle {
            bundle_id,
            tenant_id,
            ..
        }) = self.listing.as_ref().map(|l| &l.kind)
        {
            s.push(' ');
            s.push_str(bundle_id);
            s.push(' ');
            s.push_str(tenant_id);
        }
        s.push(' ');
        s.push_str(&self.signer());
        s.push(' ');
        s.push_str(&match &self.verify {
            VerifyState::Done(r) if r.ok => "ok".to_string(),
            VerifyState::Done(r) => {
                r.findings
                    .iter()
                    .map(|f| f.kind.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
                    + " findings broken"
            }
            VerifyState::NotBundle(_, cause) => cause.label().into(),
            VerifyState::Failed(_) => "unreadable".into(),
            VerifyState::Wal(r) => format!(
                "wal {}",
                r.as_ref().map_or("unreadable", |r| r.outcome.name())
            ),
            VerifyState::Refused(kind, _) => format!("refused {} not opened", kind.word()),
            _ => "pending".into(),
        });
        s.to_lowercase()
    }
}

/// Whether a signature check is worth a glyph (used by the detail line).
pub fn signature_words(c: &SignatureCheck) -> &'static str {
    match c {
        SignatureCheck::Absent => "unsigned",
        SignatureCheck::Valid { .. } => "signature valid",
        SignatureCheck::Invalid { .. } => "signature INVALID",
        SignatureCheck::Untrusted { .. } => "signer untrusted",
    }
}

/// The Bundles screen's state.
#[derive(Debug, Default)]
pub struct BundlesScreen {
    pub rows: Vec<BundleRow>,
    /// Position in the filtered view.
    pub selected: usize,
    pub offset: usize,
    pub filter: crate::tui::filter::ListFilter,
    pub dir_error: Option<String>,
    /// Rows of the table on the last frame (for paging and mouse clicks).
    pub page: usize,
    pub table_area: Rect,
    pub listed_once: bool,
    /// Bundles marked (Space) for a merge preview.
    pub marked: std::collections::BTreeSet<PathBuf>,
    /// Show the STORE column (imported / partly / not): a store is configured.
    pub store_column: bool,
    /// Inbox mode (`console --inbox`): how the folder is watched, for the header.
    pub inbox: Option<String>,
    /// Row positions by path (see [`BundlesScreen::row_mut`]); checked on every hit, rebuilt
    /// when stale.
    row_index: std::collections::HashMap<PathBuf, usize>,
}

impl BundlesScreen {
    /// The row of `path`. File names are chosen by whoever fills the directory, and every
    /// finished verification looks its row up: the lookup goes through a path index, rebuilt
    /// only when a hit proves it stale or on a miss, so N results over N files stay linear.
    pub fn row_mut(&mut self, path: &std::path::Path) -> Option<&mut BundleRow> {
        let fresh = |s: &Self| {
            s.row_index
                .get(path)
                .copied()
                .filter(|&i| s.rows.get(i).is_some_and(|r| r.path == path))
        };
        let i = match fresh(self) {
            Some(i) => i,
            None => {
                self.row_index = self
                    .rows
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (r.path.clone(), i))
                    .collect();
                fresh(self)?
            }
        };
        self.rows.get_mut(i)
    }

    /// Indices into `rows` that pass the filter, in listing order.
    pub fn view(&self) -> Vec<usize> {
        self.rows
            .iter()
            .enumerate()
            .filter(|(_, r)| self.filter.matches(&r.haystack()))
            .map(|(i, _)| i)
            .collect()
    }

    pub fn selected_row(&self) -> Option<&BundleRow> {
        self.view().get(self.selected).map(|&i| &self.rows[i])
    }

    /// Changes the filter with `change` and keeps the selected file selected when it is still
    /// in the view (else the first row): clearing a filter must not jump to another file.
    pub fn refilter(&mut self, change: impl FnOnce(&mut crate::tui::filter::ListFilter)) {
        let was = self.selected_row().map(|r| r.path.clone());
        change(&mut self.filter);
        let view = self.view();
        self.selected = was
            .and_then(|p| view.iter().position(|&i| self.rows[i].path == p))
            .unwrap_or(0);
        self.clamp();
    }

    pub fn clamp(&mut self) {
        let n = self.view().len();
        if self.selected >= n {
            self.selected = n.saturating_sub(1);
        }
    }

    pub fn move_by(&mut self, delta: isize) {
        let n = self.view().len();
        if n == 0 {
            return;
        }
        let s = self.selected as isize + delta;
        self.selected = s.clamp(0, n as isize - 1) as usize;
    }

    /// Marks or unmarks the selected bundle; false when the row is not a bundle.
    pub fn toggle_mark(&mut self) -> bool {
        let Some(row) = self.selected_row().filter(|r| r.is_bundle()) else {
            return false;
        };
        let p = row.path.clone();
        if !self.marked.remove(&p) {
            self.marked.insert(p);
        }
        true
    }

    /// The bundles of a merge preview: the marked ones still listed, else the selected one.
    pub fn merge_inputs(&self) -> Vec<PathBuf> {
        let marked: Vec<PathBuf> = self
            .rows
            .iter()
            .filter(|r| self.marked.contains(&r.path) && r.is_bundle())
            .map(|r| r.path.clone())
            .collect();
        if !marked.is_empty() {
            return marked;
        }
        self.selected_row()
            .filter(|r| r.is_bundle())
            .map(|r| vec![r.path.clone()])
            .unwrap_or_default()
    }

    pub fn select_path(&mut self, path: &std::path::Path) {
        if let Some(p) = self.view().iter().position(|&i| self.rows[i].path == path) {
            self.selected = p;
        }
    }

    /// A one-line summary for the status bar.
    pub fn summary(&self) -> String {
        let bundles = self.rows.iter().filter(|r| r.is_bundle()).count();
        let broken = self
            .rows
            .iter()
            .filter(|r| matches!(&r.verify, VerifyState::Done(rep) if !rep.ok))
            .count();
        let pending = self
            .rows
            .iter()
            .filter(|r| matches!(r.verify, VerifyState::Pending | VerifyState::Running(_)))
            .count();
        let mut s = format!("{bundles} bundle(s), {broken} with findings");
        let (mut wals, mut to_recover) = (0, 0);
        for r in &self.rows {
            if let VerifyState::Wal(w) = &r.verify {
                wals += 1;
                to_recover += usize::from(
                    w.as_ref()
                        .map_or(true, |w| w.outcome != crate::core::wal::Outcome::Clean),
                );
            }
        }
        if wals > 0 {
            s.push_str(&format!(", {wals} WAL(s), {to_recover} to recover"));
        }
        if pending > 0 {
            s.push_str(&format!(", {pending} being verified"));
        }
        let copying = self
            .rows
            .iter()
            .filter(|r| matches!(r.verify, VerifyState::Waiting))
            .count();
        if copying > 0 {
            s.push_str(&format!(", {copying} still copying"));
        }
        let refused = self.rows.iter().filter(|r| r.refused().is_some()).count();
        if refused > 0 {
            s.push_str(&format!(
                ", {refused} refused (not regular files: never opened)"
            ));
        }
        let new = self.rows.iter().filter(|r| r.new).count();
        if new > 0 {
            s.push_str(&format!(", {new} new"));
        }
        if !self.marked.is_empty() {
            s.push_str(&format!(
                ", {} marked for a merge preview (m)",
                self.marked.len()
            ));
        }
        s
    }

    /// What an empty view says.
    fn empty_text(&self) -> &'static str {
        if !self.listed_once {
            "reading the directory…"
        } else if self.rows.is_empty() && self.inbox.is_some() {
            "the inbox is empty: files dropped here are verified once they stop growing"
        } else if self.rows.is_empty() {
            "no files here: put bundle files (.json) in this directory; it is polled every 2 s"
        } else {
            "no file matches the filter (Esc clears it)"
        }
    }

    pub fn render(&mut self, f: &mut Frame, area: Rect, theme: &Theme, dir: &str) {
        let [head, body] =
            ratatui::layout::Layout::vertical([Constraint::Length(1), Constraint::Min(1)])
                .areas(area);
        let lead = Span::styled(
            if self.inbox.is_some() {
                " Inbox "
            } else {
                " Directory "
            },
            theme.header,
        );
        let mut rest = Vec::new();
        if let Some(how) = &self.inbox {
            rest.push(Span::styled(format!(" · {how}"), theme.muted));
        }
        rest.extend(self.filter.spans(theme));
        if !self.marked.is_empty() {
            // Always on screen (the status line may be showing a message).
            rest.push(Span::styled(
                format!("   ◉ {} marked (m previews)", self.marked.len()),
                theme.accent,
            ));
        }
        // A long directory gives way (cut in its middle) to the filter and the marked count.
        let path = Span::styled(visible(dir).into_owned(), theme.base);
        let line = crate::tui::widgets::head_line(lead, path, rest, head.width as usize);
        f.render_widget(Paragraph::new(line).style(theme.base), head);

        if let Some(e) = &self.dir_error {
            f.render_widget(
                Paragraph::new(Line::from(vec![
                    Span::styled("! ", theme.warning),
                    Span::styled(visible(e).into_owned(), theme.warning),
                ])),
                body,
            );
            return;
        }
        let view = self.view();
        if view.is_empty() {
            let text = self.empty_text();
            f.render_widget(Paragraph::new(text).style(theme.muted), body);
            return;
        }
        self.table_area = body;
        let height = body.height.saturating_sub(1) as usize;
        self.page = height.max(1);
        self.clamp();
        self.offset = table_window(self.offset, self.selected, height, view.len());
        // The STORE column only where it does not squeeze the file names (>= 160 columns).
        let store = self.store_column && body.width >= 160;
        let cols = fitting_columns(body.width, store);
        let constraints: Vec<Constraint> = cols.iter().map(|c| c.constraint()).collect();
        let widths = crate::tui::widgets::table_column_widths(body.width, &constraints);
        let header = Row::new(
            cols.iter()
                .zip(&widths)
                .map(|(c, &w)| Cell::from(clip(c.title(), w)).style(theme.header)),
        );
        let rows = view
            .iter()
            .enumerate()
            .skip(self.offset)
            .take(height)
            .map(|(pos, &i)| {
                let r = &self.rows[i];
                let (state, style) = r.state_label(theme);
                let (import, import_style) = r.import_label(theme);
                let details = detail_cells(r, theme);
                let cells = cols.iter().zip(&widths).map(|(c, &w)| match c {
                    Col::File => {
                        let lead = [
                            if pos == self.selected { "▶ " } else { "  " },
                            if self.marked.contains(&r.path) {
                                "◉ "
                            } else {
                                ""
                            },
                            if r.new { "NEW " } else { "" },
                        ];
                        let used: usize = lead.iter().map(|l| l.chars().count()).sum();
                        Cell::from(Line::from(vec![
                            Span::raw(lead[0]),
                            Span::raw(lead[1]),
                            Span::styled(lead[2], theme.accent),
                            Span::raw(clip(&r.file_name(), w.saturating_sub(used))),
                        ]))
                    }
                    Col::State => Cell::from(clip(&state, w)).style(style),
                    Col::Store => Cell::from(clip(&import, w)).style(import_style),
                    Col::Size if r.refused().is_some() => Cell::from(clip("-", w)),
                    Col::Size => Cell::from(clip(&human_bytes(r.stamp.size), w)),
                    detail => {
                        let (text, style) = &details[detail.detail_index()];
                        Cell::from(clip(text, w)).style(*style)
                    }
                });
                let row = Row::new(cells);
                crate::tui::widgets::styled_row(row, pos == self.selected, theme)
            });
        let table = Table::new(rows, constraints)
            .header(header)
            .column_spacing(1)
            .style(theme.base);
        f.render_widget(table, body);
    }
}

/// A column of the Bundles list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    File,
    State,
    Store,
    Bundle,
    Tenant,
    Nodes,
    Entries,
    Signer,
    Created,
    Size,
}

impl Col {
    const ALL: [Col; 10] = [
        Col::File,
        Col::State,
        Col::Store,
        Col::Bundle,
        Col::Tenant,
        Col::Nodes,
        Col::Entries,
        Col::Signer,
        Col::Created,
        Col::Size,
    ];
    /// Left out first when the list is narrow: the least needed to tell files apart and decide.
    const DROP_ORDER: [Col; 7] = [
        Col::Created,
        Col::Nodes,
        Col::Signer,
        Col::Tenant,
        Col::Entries,
        Col::Bundle,
        Col::Store,
    ];

    fn title(self) -> &'static str {
        match self {
            Col::File => "FILE",
            Col::State => "STATE",
            Col::Store => "STORE",
            Col::Bundle => "BUNDLE",
            Col::Tenant => "TENANT",
            Col::Nodes => "NODES",
            Col::Entries => "ENTRIES",
            Col::Signer => "SIGNER",
            Col::Created => "CREATED",
            Col::Size => "SIZE",
        }
    }

    fn width(self) -> u16 {
        match self {
            Col::File => 20,
            Col::State => 15,
            Col::Store => 16,
            Col::Bundle => 13,
            Col::Tenant => 10,
            Col::Nodes => 5,
            Col::Entries => 8,
            Col::Signer => 16,
            Col::Created => 24,
            // "999.9 KiB"
            Col::Size => 9,
        }
    }

    fn constraint(self) -> Constraint {
        match self {
            Col::File => Constraint::Min(self.width()),
            _ => Constraint::Length(self.width()),
        }
    }

    /// Where the column's text is in [`detail_cells`].
    fn detail_index(self) -> usize {
        match self {
            Col::Bundle => 0,
            Col::Tenant => 1,
            Col::Nodes => 2,
            Col::Entries => 3,
            Col::Signer => 4,
            _ => 5,
        }
    }
}

/// The columns that fit in `width` at their full widths: the least needed are left out whole
/// ([`Col::DROP_ORDER`]) instead of every column being squeezed into cut values; FILE, STATE and
/// SIZE always stay (cut with `…` when even they do not fit).
fn fitting_columns(width: u16, store: bool) -> Vec<Col> {
    let mut cols: Vec<Col> = Col::ALL
        .into_iter()
        .filter(|&c| store || c != Col::Store)
        .collect();
    let need = |cols: &[Col]| -> u32 {
        cols.iter().map(|c| u32::from(c.width())).sum::<u32>() + cols.len() as u32 - 1
    };
    for drop in Col::DROP_ORDER {
        if need(&cols) <= u32::from(width) {
            break;
        }
        cols.retain(|&c| c != drop);
    }
    cols
}

/// A row's BUNDLE..CREATED texts: the bundle's listing, a WAL's frames and where recovery would
/// stop, why a file is not a bundle, or that it is still being read.
fn detail_cells(r: &BundleRow, theme: &Theme) -> [(String, Style); 6] {
    // Plain cells take the row's style (the selection highlight), so no style of their own.
    let base = Style::default();
    let blank = |first: (String, Style)| {
        let mut cells: [(String, Style); 6] = Default::default();
        cells[0] = first;
        cells
    };
    if let VerifyState::Refused(kind, why) = &r.verify {
        // What it is, that it was not opened, and why (cut with `…`; in full behind Enter).
        let mut cells = blank((kind.word().into(), theme.warning));
        cells[1] = ("not opened".into(), theme.warning);
        cells[5] = (visible(why).into_owned(), theme.muted);
        return cells;
    }
    if let VerifyState::Refused(kind, why) = &r.verify {
        // What it is, that it was not opened, and why (cut with `…`; in full behind Enter).
        let mut cells = blank((kind.word().into(), theme.warning));
        cells[1] = ("not opened".into(), theme.warning);
        cells[5] = (visible(why).into_owned(), theme.muted);
        return cells;
    }
    if let VerifyState::Wal(w) = &r.verify {
        let (frames, end) = match w {
            Ok(w) => (
                w.valid_frames.to_string(),
                w.offset
                    .map_or_else(String::new, |x| format!("stops at byte {x}")),
            ),
            Err(e) => (String::new(), visible(e).into_owned()),
        };
        let mut cells = blank(("node WAL".into(), theme.muted));
        cells[3] = (frames, base);
        cells[5] = (end, theme.muted);
        return cells;
    }
    match r.listing.as_ref().map(|l| &l.kind) {
        Some(ListingKind::Bundle {
            bundle_id,
            tenant_id,
            nodes,
            entries,
            created_at,
            ..
        }) => [
            (visible(bundle_id).into_owned(), base),
            (visible(tenant_id).into_owned(), base),
            (nodes.to_string(), base),
            (entries.to_string(), base),
            (r.signer(), base),
            (visible(created_at).into_owned(), base),
        ],
        // The reason in full is on the status line and behind Enter; here it is cut with `…`.
        Some(ListingKind::NotBundle { reason, .. }) => {
            blank((visible(reason).into_owned(), theme.muted))
        }
        None => blank((
            match r.verify {
                VerifyState::Waiting => "settling…",
                _ => "reading…",
            }
            .into(),
            theme.muted,
        )),
    }
}

impl crate::tui::screen::Screen for BundlesScreen {
    fn draw(&mut self, f: &mut Frame, area: Rect, ctx: &crate::tui::screen::Ctx) {
        let dir = ctx.config.dir.display().to_string();
        self.store_column = ctx.config.db.is_some();
        self.render(f, area, ctx.theme, &dir);
    }

    fn title_right(&self, ctx: &crate::tui::screen::Ctx) -> String {
        format!("{} ", crate::text::visible_path(&ctx.config.dir))
    }

    fn context_line(&self) -> String {
        self.summary()
    }

    fn page(&self) -> usize {
        self.page.max(1)
    }

    fn move_by(&mut self, d: isize) {
        BundlesScreen::move_by(self, d)
    }

    fn home(&mut self) {
        self.selected = 0;
    }

    fn back(&mut self) -> bool {
        if self.filter.text.is_empty() {
            return false;
        }
        self.refilter(|f| f.text.clear());
        true
    }

    fn click_rows(&self) -> Option<crate::tui::screen::ClickRows> {
        Some(crate::tui::screen::ClickRows {
            area: self.table_area,
            offset: self.offset,
            selected: self.selected,
            len: self.view().len(),
        })
    }

    fn copy_value(&self) -> Option<(&'static str, String)> {
        let row = self.selected_row()?;
        match row.listing.as_ref().map(|l| &l.kind) {
            Some(crate::core::bundle::catalog::ListingKind::Bundle { bundle_id, .. }) => {
                Some(("bundle id", bundle_id.clone()))
            }
            _ => Some(("file", row.path.display().to_string())),
        }
    }

    fn busy(&self) -> bool {
        self.rows
            .iter()
            .any(|r| matches!(r.verify, VerifyState::Running(_)))
    }

    fn progress(&self) -> u64 {
        self.rows.iter().fold(0u64, |acc, r| match &r.verify {
            VerifyState::Running(c) => {
                acc.wrapping_add(c.load(std::sync::atomic::Ordering::Relaxed) >> 16)
            }
            _ => acc,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn row(name: &str) -> BundleRow {
        BundleRow {
            path: PathBuf::from(name),
            stamp: crate::core::inbox::FileStamp {
                size: 0,
                modified: None,
            },
            listing: None,
            verify: VerifyState::Pending,
            index: None,
            header: None,
            imported: None,
            new: false,
        }
    }

    #[test]
    fn rows_are_found_by_path_after_the_list_changes() {
        let mut s = BundlesScreen {
            rows: ["a", "b", "c"].into_iter().map(row).collect(),
            ..BundlesScreen::default()
        };
        s.row_mut(Path::new("b")).unwrap().new = true;
        assert!(s.rows[1].new);
        // A poll replaces and reorders the rows: the index is stale, and still answers right.
        s.rows = ["c", "b", "d"].into_iter().map(row).collect();
        s.row_mut(Path::new("d")).unwrap().new = true;
        assert!(s.rows[2].new);
        s.rows.swap(0, 2);
        assert_eq!(s.row_mut(Path::new("c")).unwrap().path, PathBuf::from("c"));
        assert!(s.rows[2].path == Path::new("c"));
        assert!(s.row_mut(Path::new("a")).is_none(), "a vanished");
    }

    /// Narrow lists leave whole columns out (least needed first) instead of squeezing every
    /// column until values are cut in silence; FILE, STATE and SIZE always stay.
    #[test]
    fn narrow_lists_leave_whole_columns_out() {
        let need =
            |cols: &[Col]| cols.iter().map(|c| c.width() as usize).sum::<usize>() + cols.len() - 1;
        for width in [40u16, 80, 100, 120, 159, 200] {
            let cols = fitting_columns(width, false);
            assert!(cols.contains(&Col::File) && cols.contains(&Col::State));
            assert!(cols.contains(&Col::Size) && !cols.contains(&Col::Store));
            if width >= 80 {
                assert!(need(&cols) <= width as usize, "{width}: {cols:?}");
            }
        }
        assert_eq!(
            fitting_columns(80, false),
            [
                Col::File,
                Col::State,
                Col::Bundle,
                Col::Tenant,
                Col::Entries,
                Col::Size
            ]
        );
        assert_eq!(fitting_columns(200, true).len(), Col::ALL.len());
        assert!(!fitting_columns(120, false).contains(&Col::Created));
    }
}
