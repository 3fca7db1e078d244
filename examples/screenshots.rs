//! Renders every console screen and overlay with the real renderer (ratatui TestBackend) on a
//! freshly built demo workspace, and writes each as an SVG (`scripts/screenshots.sh` turns them
//! into the PNGs in `screenshots/`).
//!
//! `cargo run --example screenshots -- OUT_DIR [THEME]`

use airlock::tui::app::{settle, App, ConsoleConfig};
use airlock::tui::tasks::{TaskInbox, Tasks};
use airlock::tui::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use ratatui::Terminal;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const W: u16 = 150;
const H: u16 = 42;
const CELL_W: f64 = 8.4;
const CELL_H: f64 = 18.0;
const FONT: f64 = 14.0;
const DEFAULT_FG: &str = "#c8ccd4";
const DEFAULT_BG: &str = "#1d2021";

fn hex(c: Color, default: &str) -> String {
    let named = |i: u8| -> &'static str {
        [
            "#1d2021", "#cc241d", "#98971a", "#d79921", "#458588", "#b16286", "#689d6a", "#a89984",
            "#928374", "#fb4934", "#b8bb26", "#fabd2f", "#83a598", "#d3869b", "#8ec07c", "#ebdbb2",
        ][i as usize]
    };
    match c {
        Color::Reset => default.to_string(),
        Color::Black => named(0).into(),
        Color::Red => named(1).into(),
        Color::Green => named(2).into(),
        Color::Yellow => named(3).into(),
        Color::Blue => named(4).into(),
        Color::Magenta => named(5).into(),
        Color::Cyan => named(6).into(),
        Color::Gray => named(7).into(),
        Color::DarkGray => named(8).into(),
        Color::LightRed => named(9).into(),
        Color::LightGreen => named(10).into(),
        Color::LightYellow => named(11).into(),
        Color::LightBlue => named(12).into(),
        Color::LightMagenta => named(13).into(),
        Color::LightCyan => named(14).into(),
        Color::White => named(15).into(),
        Color::Rgb(r, g, b) => format!("#{r:02x}{g:02x}{b:02x}"),
        Color::Indexed(i) if i < 16 => named(i).into(),
        Color::Indexed(i) => {
            let v = 8 + (i.saturating_sub(232) as u32) * 10;
            format!("#{v:02x}{v:02x}{v:02x}")
        }
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The buffer as SVG: one background rect per styled cell run, one text element per run.
fn to_svg(buf: &Buffer, light: bool) -> String {
    let (dfg, dbg) = if light {
        ("#383a42", "#fafafa")
    } else {
        (DEFAULT_FG, DEFAULT_BG)
    };
    let w = buf.area.width as f64 * CELL_W;
    let h = buf.area.height as f64 * CELL_H;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\n<rect width=\"100%\" height=\"100%\" fill=\"{dbg}\"/>\n<g font-family=\"DejaVu Sans Mono, monospace\" font-size=\"{FONT}\" xml:space=\"preserve\">\n"
    );
    for y in 0..buf.area.height {
        let mut x = 0;
        while x < buf.area.width {
            let cell = &buf[(x, y)];
            let reversed = cell.modifier.contains(Modifier::REVERSED);
            let (mut fg, mut bg) = (hex(cell.fg, dfg), hex(cell.bg, dbg));
            if reversed {
                std::mem::swap(&mut fg, &mut bg);
            }
            let start = x;
            let mut text = String::new();
            let mut xs = Vec::new();
            while x < buf.area.width {
                let c = &buf[(x, y)];
                if c.fg != cell.fg || c.bg != cell.bg || c.modifier != cell.modifier {
                    break;
                }
                let sym = c.symbol();
                if !sym.trim().is_empty() {
                    for ch in sym.chars() {
                        text.push(ch);
                        xs.push(format!("{:.1}", x as f64 * CELL_W));
                    }
                }
                x += 1;
            }
            let top = y as f64 * CELL_H;
            if bg != dbg {
                let _ = writeln!(
                    out,
                    "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{CELL_H}\" fill=\"{bg}\"/>",
                    start as f64 * CELL_W,
                    (x - start) as f64 * CELL_W
                );
            }
            if !text.is_empty() {
                let mut attrs = String::new();
                if cell.modifier.contains(Modifier::BOLD) {
                    attrs.push_str(" font-weight=\"bold\"");
                }
                if cell.modifier.contains(Modifier::UNDERLINED) {
                    attrs.push_str(" text-decoration=\"underline\"");
                }
                if cell.modifier.contains(Modifier::DIM) {
                    attrs.push_str(" opacity=\"0.6\"");
                }
                // One element per cell keeps the grid exact whatever the font's advance.
                let _ = write!(out, "<g fill=\"{fg}\"{attrs}>");
                for (ch, x) in text.chars().zip(&xs) {
                    let _ = write!(
                        out,
                        "<text x=\"{x}\" y=\"{:.1}\">{}</text>",
                        top + CELL_H * 0.75,
                        esc(&ch.to_string())
                    );
                }
                out.push_str("</g>\n");
            }
        }
    }
    out.push_str("</g>\n</svg>\n");
    out
}

struct Shot {
    app: App,
    inbox: TaskInbox,
    out: PathBuf,
    light: bool,
}

impl Shot {
    fn keys(&mut self, keys: &[KeyCode]) {
        for k in keys {
            self.app.handle_key(KeyEvent::new(*k, KeyModifiers::NONE));
            settle(&mut self.app, &mut self.inbox);
        }
    }

    fn text(&mut self, s: &str) {
        let codes: Vec<KeyCode> = s.chars().map(KeyCode::Char).collect();
        self.keys(&codes);
    }

    fn save(&mut self, name: &str) {
        let mut t = Terminal::new(TestBackend::new(W, H)).unwrap();
        t.draw(|f| self.app.draw(f)).unwrap();
        let svg = to_svg(t.backend().buffer(), self.light);
        let path = self.out.join(format!("{name}.svg"));
        std::fs::write(&path, svg).unwrap();
        println!("{}", path.display());
    }
}

/// A console on the demo workspace with `config`, trusting the demo's trust store.
fn demo_console(
    ws: &airlock::demo::DemoWorkspace,
    config: ConsoleConfig,
    theme_name: &str,
    rt: &tokio::runtime::Handle,
) -> (App, TaskInbox) {
    let trust = airlock::core::trust::TrustStore::open(&ws.trust_store)
        .unwrap()
        .trust_set();
    let (tasks, inbox) = Tasks::new(rt.clone());
    let theme = Theme::select(Some(theme_name), false).unwrap();
    (
        App::new(config, theme, tasks, std::sync::Arc::new(trust)),
        inbox,
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().unwrap_or_else(|| "target/screenshots".into()));
    let theme_name = args.next().unwrap_or_else(|| "dark".into());
    std::fs::create_dir_all(&out).unwrap();
    let out = std::path::absolute(&out).unwrap();
    // Build the demo in a scratch directory and work from there, so titles show a short path.
    let work = tempfile::tempdir().unwrap();
    std::env::set_current_dir(work.path()).unwrap();
    let ws = airlock::demo::build_workspace(Path::new("airlock-demo")).unwrap();
    let rt = airlock::tui::tasks::console_runtime().unwrap();
    let config = ConsoleConfig::for_demo(&ws, "http://127.0.0.1:9".into());
    let (mut app, inbox) = demo_console(&ws, config, &theme_name, rt.handle());
    app.poll_dir();
    let mut s = Shot {
        app,
        inbox,
        out,
        light: theme_name == "light",
    };
    settle(&mut s.app, &mut s.inbox);
    s.save("1-bundles");
    s.text("/chain-break");
    s.keys(&[KeyCode::Enter]);
    s.save("1-bundles-filter");
    s.keys(&[KeyCode::Enter]);
    s.text("n");
    s.save("2-chain-entries-deleted");
    s.keys(&[KeyCode::Esc]);
    s.text("/forged");
    s.keys(&[KeyCode::Enter, KeyCode::Enter]);
    s.keys(&[KeyCode::Down; 7]);
    s.save("2-chain-forged-signature");
    s.text("?");
    s.save("help-overlay");
    s.keys(&[KeyCode::Esc]);
    s.text(":find");
    s.save("command-palette");
    s.keys(&[KeyCode::Esc]);
    // Merge preview of bundles 1, 4 and 5: new entries, duplicates of the chain, the conflict.
    s.text("1");
    s.keys(&[KeyCode::Esc, KeyCode::Home]);
    s.text(" ");
    s.keys(&[KeyCode::Down, KeyCode::Down]);
    s.text("  m");
    s.save("3-merge-preview");
    s.keys(&[KeyCode::Enter]);
    s.save("3-merge-conflict-diff");
    s.keys(&[KeyCode::Esc, KeyCode::Left, KeyCode::Left]);
    s.keys(&[KeyCode::Down; 12]);
    s.save("3-merge-merged-order");
    // Bundle 1 alone: an importable plan and its confirmation.
    s.text("1");
    s.keys(&[KeyCode::Home, KeyCode::Down, KeyCode::Down, KeyCode::Down]);
    s.text("  m");
    s.text("i");
    s.save("3-merge-confirm-import");
    s.text("n");
    // Bundles 1 and 2 (a chain break): the forced import spells out what is dropped.
    s.text("1");
    s.keys(&[KeyCode::Home, KeyCode::Down]);
    s.text(" mF");
    s.save("3-merge-confirm-force");
    s.text("n");
    // The scheduler chain of the demo store: verified, a proof, the snapshots.
    s.text("4v");
    s.keys(&[KeyCode::Down; 4]);
    s.text("p");
    s.save("4-scheduler-proof");
    s.text("s");
    s.save("4-scheduler-snapshots");
    s.text("5");
    s.keys(&[KeyCode::Down; 8]);
    s.save("5-outbox");
    s.text("ff");
    s.save("5-outbox-conflicts");
    s.text("x");
    s.save("5-outbox-confirm-cancel");
    s.keys(&[KeyCode::Esc]);
    s.text("6");
    s.keys(&[KeyCode::Down]);
    s.save("6-keys");
    s.text("t");
    s.save("6-keys-confirm-trust");
    // Trusting it is a change: the Activity screen shows it from the store's audit log.
    s.text("y");
    s.text("7");
    s.save("7-activity");
    // The portable export's notification: delivered to one webhook, refused by one that is down,
    // dead-lettered by one that answered 503 six times; then the dead-letter queue.
    s.text("8v");
    s.save("8-notifications");
    s.text("v");
    s.save("8-notifications-dead-letters");
    // The gates' WALs folded: the cancellation that beat a completion, with its lanes.
    s.text("0");
    s.keys(&[KeyCode::Down; 3]);
    s.save("0-ledger");
    // gate-b's log (Enter on it in the Bundles list): its frames, then the torn tail at the end.
    s.text("1/gate-b");
    s.keys(&[KeyCode::Enter, KeyCode::Enter]);
    s.keys(&[KeyCode::Down; 2]);
    s.save("9-wal");
    s.keys(&[KeyCode::End]);
    s.save("9-wal-torn-tail");
    // `o`: the workspace's logs, to open another (Esc goes back to gate-b's).
    s.text("o");
    s.save("9-wal-list");
    s.keys(&[KeyCode::Esc]);
    inbox_shots(&mut s, &ws, &theme_name, rt.handle());
    drop(work);
}

/// Inbox mode (`console --inbox DIR`): two files dropped after the console started (NEW), one
/// verified, one still being copied, and a FIFO (refused, never opened); then the reject
/// confirmation.
fn inbox_shots(
    s: &mut Shot,
    ws: &airlock::demo::DemoWorkspace,
    theme_name: &str,
    rt: &tokio::runtime::Handle,
) {
    use std::time::{Duration, Instant};
    let dir = PathBuf::from("inbox");
    std::fs::create_dir_all(&dir).unwrap();
    let config = ConsoleConfig {
        dir: dir.clone(),
        ..ConsoleConfig::for_demo(ws, "http://127.0.0.1:9".into())
    };
    (s.app, s.inbox) = demo_console(ws, config, theme_name, rt);
    s.app
        .watch_inbox(airlock::tui::inbox_watch::InboxSettings {
            dir: dir.clone(),
            settle: Duration::from_millis(1500),
            poll: false,
        })
        .unwrap();
    let pump = |s: &mut Shot, done: &dyn Fn(&App) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(&s.app) && Instant::now() < deadline {
            while let Ok(msg) = s.inbox.rx.try_recv() {
                s.app.handle_msg(msg);
            }
            settle(&mut s.app, &mut s.inbox);
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let state = |app: &App, name: &str| {
        app.bundles
            .rows
            .iter()
            .find(|r| r.file_name() == name)
            .map(|r| r.state_label(&Theme::default()).0)
    };
    pump(s, &|a| a.bundles.listed_once);
    let name = "01-edge-ab.signed.json";
    std::fs::copy(ws.bundles.join(name), dir.join(name)).unwrap();
    pump(s, &|a| state(a, name).is_some_and(|l| l.starts_with('✓')));
    let slow = "07-edge-h.json";
    let whole = std::fs::read(ws.bundles.join("06-edge-g.untrusted.json")).unwrap();
    std::fs::write(dir.join(slow), &whole[..whole.len() / 3]).unwrap();
    pump(s, &|a| state(a, slow).is_some());
    // Something that is not a regular file: listed as refused, never opened.
    let fifo = std::ffi::CString::new(format!("{}/08-edge-pipe.json", dir.display())).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path it is given and nothing else.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
    pump(s, &|a| state(a, "08-edge-pipe.json").is_some());
    s.app.message = None;
    s.save("1-inbox");
    s.keys(&[KeyCode::Home]);
    s.text("x");
    s.save("1-inbox-confirm-reject");
    s.text("n");
}
