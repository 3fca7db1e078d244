//! Semantic colour slots loaded from `themes/*.toml`. Screens ask for a meaning (`ok`, `finding`,
//! `selection`, ...), never for a colour, and every meaning is also carried by a glyph and text.

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

/// The built-in themes, by name (the files in `themes/`).
pub const BUILTIN: [(&str, &str); 4] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("monochrome", include_str!("../../themes/monochrome.toml")),
];

/// Every slot a theme must define.
pub const SLOTS: [&str; 16] = [
    "base",
    "title",
    "tab",
    "tab_active",
    "status",
    "key",
    "header",
    "border",
    "muted",
    "accent",
    "ok",
    "pending",
    "warning",
    "finding",
    "conflict",
    "selection",
];

/// A loaded theme: one style per semantic slot.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub base: Style,
    pub title: Style,
    pub tab: Style,
    pub tab_active: Style,
    pub status: Style,
    pub key: Style,
    pub header: Style,
    pub border: Style,
    pub muted: Style,
    pub accent: Style,
    pub ok: Style,
    pub pending: Style,
    pub warning: Style,
    pub finding: Style,
    pub conflict: Style,
    pub selection: Style,
    /// Draw for a Linux VT or serial console: ASCII glyphs and 16 colours (`--ascii`,
    /// `TERM=linux`/`vt100`).
    pub ascii: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: String,
    slots: BTreeMap<String, SlotDef>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SlotDef {
    fg: Option<String>,
    bg: Option<String>,
    #[serde(default)]
    modifiers: Vec<String>,
}

/// Why a theme could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    #[error("unknown theme {0:?}: use one of dark, light, high-contrast, monochrome, or a path to a .toml file")]
    Unknown(String),
    #[error("cannot read theme file {path}: {message}")]
    Io { path: String, message: String },
    #[error("theme {origin}: {message}")]
    Invalid { origin: String, message: String },
}

fn parse_color(s: &str) -> Result<Color, String> {
    Color::from_str(s).map_err(|_| {
        format!(
            "{s:?} is not a colour (use a name such as \"green\", \"#rrggbb\", 0-255 or \"reset\")"
        )
    })
}

fn parse_modifier(s: &str) -> Result<Modifier, String> {
    Ok(match s {
        "bold" => Modifier::BOLD,
        "dim" => Modifier::DIM,
        "italic" => Modifier::ITALIC,
        "underlined" | "underline" => Modifier::UNDERLINED,
        "reversed" | "reverse" => Modifier::REVERSED,
        "crossed_out" => Modifier::CROSSED_OUT,
        other => {
            return Err(format!(
                "{other:?} is not a modifier (bold, dim, italic, underlined, reversed, crossed_out)"
            ))
        }
    })
}

impl Theme {
    /// Parses a theme from TOML text; `origin` names it in error messages.
    pub fn from_toml(text: &str, origin: &str) -> Result<Theme, ThemeError> {
        let invalid = |message: String| ThemeError::Invalid {
            origin: crate::text::visible(origin).into_owned(),
            message,
        };
        let file: ThemeFile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        for key in file.slots.keys() {
            if !SLOTS.contains(&key.as_str()) {
                return Err(invalid(format!(
                    "unknown slot [slots.{key}] (slots: {})",
                    SLOTS.join(", ")
                )));
            }
        }
        let mut styles = Vec::with_capacity(SLOTS.len());
        for slot in SLOTS {
            let def = file
                .slots
                .get(slot)
                .ok_or_else(|| invalid(format!("missing slot {slot} under [slots]")))?;
            let mut style = Style::default();
            if let Some(fg) = &def.fg {
                style = style.fg(parse_color(fg).map_err(|m| invalid(format!("{slot}.fg: {m}")))?);
            }
            if let Some(bg) = &def.bg {
                style = style.bg(parse_color(bg).map_err(|m| invalid(format!("{slot}.bg: {m}")))?);
            }
            for m in &def.modifiers {
                style = style.add_modifier(
                    parse_modifier(m).map_err(|e| invalid(format!("{slot}.modifiers: {e}")))?,
                );
            }
            styles.push(style);
        }
        let s = |i: usize| styles[i];
        Ok(Theme {
            name: file.name,
            base: s(0),
            title: s(1),
            tab: s(2),
            tab_active: s(3),
            status: s(4),
            key: s(5),
            header: s(6),
            border: s(7),
            muted: s(8),
            accent: s(9),
            ok: s(10),
            pending: s(11),
            warning: s(12),
            finding: s(13),
            conflict: s(14),
            selection: s(15),
            ascii: false,
        })
    }

    /// A built-in theme by name.
    pub fn builtin(name: &str) -> Result<Theme, ThemeError> {
        let (_, text) = BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| ThemeError::Unknown(name.to_string()))?;
        Theme::from_toml(text, name)
    }

    /// The theme for a run: `--theme NAME|FILE` when given; otherwise monochrome when `NO_COLOR`
    /// is set (non-empty), else dark.
    pub fn select(spec: Option<&str>, no_color: bool) -> Result<Theme, ThemeError> {
        match spec {
            Some(s) if BUILTIN.iter().any(|(n, _)| *n == s) => Theme::builtin(s),
            Some(s) if s.ends_with(".toml") || s.contains('/') || Path::new(s).is_file() => {
                let text = std::fs::read_to_string(s).map_err(|e| ThemeError::Io {
                    path: crate::text::visible(s).into_owned(),
                    message: e.to_string(),
                })?;
                Theme::from_toml(&text, s)
            }
            Some(s) => Err(ThemeError::Unknown(crate::text::visible(s).into_owned())),
            None if no_color => Theme::builtin("monochrome"),
            None => Theme::builtin("dark"),
        }
    }

    /// `NO_COLOR` set to a non-empty value (no-color.org).
    pub fn no_color_env() -> bool {
        std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
    }
}

impl Default for Theme {
    fn default() -> Self {
        Theme::builtin("dark").expect("the built-in dark theme parses")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_theme_parses() {
        for (name, _) in BUILTIN {
            let t = Theme::builtin(name).unwrap();
            assert_eq!(t.name, name);
        }
    }

    #[test]
    fn monochrome_uses_no_colour_and_no_color_selects_it() {
        let t = Theme::select(None, true).unwrap();
        assert_eq!(t.name, "monochrome");
        for style in [t.base, t.ok, t.finding, t.selection, t.status, t.conflict] {
            assert_eq!(style.fg, None);
            assert_eq!(style.bg, None);
        }
        assert!(t.selection.add_modifier.contains(Modifier::REVERSED));
        assert_eq!(Theme::select(None, false).unwrap().name, "dark");
        assert_eq!(Theme::select(Some("light"), true).unwrap().name, "light");
    }

    #[test]
    fn bad_themes_name_the_problem() {
        let e = Theme::select(Some("neon"), false).unwrap_err().to_string();
        assert!(e.contains("unknown theme"), "{e}");
        let e = Theme::from_toml("name = \"x\"\n[slots]\nok = { fg = \"nope\" }\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown slot") || e.contains("missing slot") || e.contains("colour"),
            "{e}"
        );
        let mut text = String::from("name = \"x\"\n[slots]\n");
        for s in SLOTS {
            text.push_str(&format!("{s} = {{}}\n"));
        }
        assert!(Theme::from_toml(&text, "x").is_ok());
        let bad = text.replace("ok = {}", "ok = { fg = \"chartreuse-ish\" }");
        let e = Theme::from_toml(&bad, "x").unwrap_err().to_string();
        assert!(e.contains("ok.fg"), "{e}");
    }
}
