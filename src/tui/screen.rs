//! The [`Screen`] trait: what every console screen does for the app (draw itself, move its cursor,
//! say where the user is, what `y` copies, what `/` searches), as gitui's components and the
//! ratatui component template do. The app holds one value per screen and asks the current one
//! through this trait instead of matching on the screen's id everywhere.

use super::action::Action;
use super::config::ConsoleConfig;
use super::theme::Theme;
use ratatui::layout::Rect;
use ratatui::Frame;
use std::path::PathBuf;

/// What a screen may read from the rest of the console while drawing.
pub struct Ctx<'a> {
    pub theme: &'a Theme,
    pub config: &'a ConsoleConfig,
    /// The bundle selected on the Bundles screen (path, signer label), for screens that act on it.
    pub bundle: Option<(PathBuf, String)>,
}

impl Ctx<'_> {
    /// `store PATH ` for the title bar, or nothing without a store.
    pub fn store_label(&self) -> String {
        self.config
            .db
            .as_ref()
            .map(|p| format!("store {} ", crate::text::visible_path(p)))
            .unwrap_or_default()
    }
}

/// Where a screen's list was last drawn, for mouse clicks (`console --mouse`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ClickRows {
    /// The list's lines: its header line first, then its rows (inside any border).
    pub area: Rect,
    /// The first row shown.
    pub offset: usize,
    pub selected: usize,
    pub len: usize,
}

/// One console screen.
pub trait Screen {
    /// Draws the screen's body.
    fn draw(&mut self, f: &mut Frame, area: Rect, ctx: &Ctx);

    /// The right side of the title bar (what the screen shows: a directory, a file, the store).
    fn title_right(&self, _ctx: &Ctx) -> String {
        String::new()
    }

    /// The status bar's left side when there is no message: where the user is.
    fn context_line(&self) -> String;

    /// Rows one PgUp/PgDn moves.
    fn page(&self) -> usize;

    /// Moves the selection by `d` rows (clamped).
    fn move_by(&mut self, d: isize);

    /// The first row.
    fn home(&mut self) {
        self.move_by(-(isize::MAX / 2));
    }

    /// The last row.
    fn end(&mut self) {
        self.move_by(isize::MAX / 2);
    }

    /// Scrolls the detail panel by `d` lines (J/K), where there is one.
    fn scroll_detail(&mut self, _d: isize) {}

    /// Handles an action that needs nothing outside the screen (switching a list, a toggle);
    /// false when the action is not the screen's own (the app then handles it).
    fn handle(&mut self, _a: Action) -> bool {
        false
    }

    /// Esc: closes or clears something of the screen's own (a diff, a filter); false when there
    /// is nothing to close (the app then goes back).
    fn back(&mut self) -> bool {
        false
    }

    /// Where the screen's list was last drawn (see [`ClickRows`]), for the default [`Self::click`].
    fn click_rows(&self) -> Option<ClickRows> {
        None
    }

    /// A mouse click at a terminal position; true when it fell on the list. A click on a row
    /// selects it (as moving there with the keys would); on the header or past the last row it
    /// selects nothing.
    fn click(&mut self, col: u16, row: u16) -> bool {
        let Some(at) = self.click_rows() else {
            return false;
        };
        let Some(hit) = crate::tui::widgets::table_click(at.area, at.offset, col, row) else {
            return false;
        };
        if let Some(target) = hit.filter(|&t| t < at.len) {
            self.move_by(target as isize - at.selected as isize);
        }
        true
    }

    /// What `y` copies: (what it is, the value).
    fn copy_value(&self) -> Option<(&'static str, String)> {
        None
    }

    /// The rows a `/` search runs over and the cursor's row.
    fn search_span(&self) -> (usize, usize) {
        (0, 0)
    }

    /// Which list a `/` search runs over now (e.g. a plan's token and its tab): a background
    /// search whose list is no longer the one shown is stopped and its result dropped.
    fn search_list(&self) -> (u64, usize) {
        (0, 0)
    }

    /// The rows of [`Screen::search_span`] for a background search: each row's text, read
    /// without the screen (sharing its data), so the UI thread never walks the list. `None`
    /// when there is nothing to search.
    fn search_rows(&self) -> Option<super::search::RowText> {
        None
    }

    /// Selects row `at` (a search hit or `:goto seq`).
    fn search_select(&mut self, _at: usize) {}

    /// Whether the status bar hints the key of `a` now: false for an action that would only
    /// answer that it does not apply (no conflict to diff, a plan that cannot be imported).
    fn hint_applies(&self, _a: Action) -> bool {
        true
    }

    /// True while background work runs whose progress the screen shows.
    fn busy(&self) -> bool {
        false
    }

    /// A number that moves when the screen's visible progress moves (to redraw only then).
    fn progress(&self) -> u64 {
        0
    }
}
