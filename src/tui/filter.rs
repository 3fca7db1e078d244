//! The `/` text filter of a list: typed into while editing, case-insensitive substring match.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The character a key types into a text field: a printable character without Ctrl or Alt
/// (`C-u`, `C-d` are commands, never the letters `u`, `d`).
pub fn typed_char(k: &KeyEvent) -> Option<char> {
    match k.code {
        KeyCode::Char(c)
            if !c.is_control()
                && !k
                    .modifiers
                    .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
        {
            Some(c)
        }
        _ => None,
    }
}

/// A list's text filter.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub text: String,
    pub editing: bool,
}

/// What a key did to the filter while editing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKey {
    /// The text changed (re-filter and reset the selection).
    Changed,
    /// Editing ended (Enter or an arrow), the text stays.
    Done,
    /// Not a filter key.
    Ignored,
}

impl ListFilter {
    /// Starts editing a new filter.
    pub fn start(&mut self) {
        self.editing = true;
        self.text.clear();
    }

    /// Whether the filter shows anything (being edited or non-empty).
    pub fn shown(&self) -> bool {
        self.editing || !self.text.is_empty()
    }

    /// Handles a key while editing: Esc clears, Enter/arrows finish, Backspace and characters edit.
    pub fn key(&mut self, k: &KeyEvent) -> FilterKey {
        match k.code {
            KeyCode::Esc => {
                self.editing = false;
                self.text.clear();
                FilterKey::Changed
            }
            KeyCode::Enter | KeyCode::Down | KeyCode::Up => {
                self.editing = false;
                FilterKey::Done
            }
            KeyCode::Backspace => {
                self.text.pop();
                FilterKey::Changed
            }
            _ => match typed_char(k) {
                Some(c) => {
                    self.text.push(c);
                    FilterKey::Changed
                }
                None => FilterKey::Ignored,
            },
        }
    }

    /// The `filter /text▏` spans shown in a list's header while the filter is in use.
    pub fn spans(&self, theme: &crate::tui::theme::Theme) -> Vec<ratatui::text::Span<'static>> {
        use ratatui::text::Span;
        if !self.shown() {
            return Vec::new();
        }
        let mut spans = vec![
            Span::styled("   filter /", theme.key),
            // Its end, where typing happens, within 24 columns (`…` before it when cut).
            Span::styled(
                crate::tui::widgets::input_tail(&crate::text::visible(&self.text), 24),
                theme.accent,
            ),
        ];
        if self.editing {
            spans.push(Span::styled("▏", theme.accent));
        }
        spans
    }

    /// Case-insensitive substring match against a row's searchable text (already lowercase).
    pub fn matches(&self, haystack_lowercase: &str) -> bool {
        self.text.is_empty() || haystack_lowercase.contains(&self.text.to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn edits_matches_and_clears() {
        let mut f = ListFilter::default();
        f.start();
        assert_eq!(f.key(&key(KeyCode::Char('B'))), FilterKey::Changed);
        assert_eq!(f.key(&key(KeyCode::Char('r'))), FilterKey::Changed);
        assert!(f.matches("chain-break.json"));
        assert!(!f.matches("signed.json"));
        assert_eq!(f.key(&key(KeyCode::Backspace)), FilterKey::Changed);
        assert_eq!(f.key(&key(KeyCode::Enter)), FilterKey::Done);
        assert!(!f.editing && f.shown());
        f.editing = true;
        assert_eq!(f.key(&key(KeyCode::Esc)), FilterKey::Changed);
        assert!(!f.shown() && f.matches("anything"));
        assert_eq!(f.key(&key(KeyCode::F(2))), FilterKey::Ignored);
    }
}
