//! Shared helpers for the console tests: fixture directories, an app on a real runtime, keys and
//! rendering into ratatui's TestBackend.
#![allow(dead_code)]

use airlock::core::bundle::{load_bundle, write_bundle};
use airlock::tui::app::{settle, App, ConsoleConfig};
use airlock::tui::tasks::{TaskInbox, Tasks};
use airlock::tui::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::{Path, PathBuf};

pub const VECTORS: &str = "../shared/vectors";

/// A fresh fixture directory under `target/tui-fixtures/NAME` (a fixed, relative path, so
/// snapshots do not depend on a temporary directory's name).
///
/// The name is claimed for the life of the test process, so uniqueness is checked rather than kept
/// by hand: a name claimed twice by tests of one binary, or held by another test binary running
/// at the same time (an exclusive lock on `NAME.lock`, dropped by the kernel when that process
/// exits), fails at once, naming it, instead of two tests racing over one folder.
pub fn fixture_dir(name: &str) -> PathBuf {
    use std::collections::HashMap;
    use std::fs::{File, TryLockError};
    use std::sync::Mutex;
    static CLAIMED: Mutex<Option<HashMap<String, File>>> = Mutex::new(None);
    let root = Path::new("target/tui-fixtures");
    std::fs::create_dir_all(root).unwrap();
    let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
    let claimed = claimed.get_or_insert_with(HashMap::new);
    assert!(
        !claimed.contains_key(name),
        "fixture directory name {name:?} is used by two tests of this binary: give one another name"
    );
    let lock = File::create(root.join(format!("{name}.lock"))).unwrap();
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => panic!(
            "fixture directory name {name:?} is in use by another test binary running now: give one another name"
        ),
        Err(TryLockError::Error(e)) => panic!("locking the fixture name {name:?}: {e}"),
    }
    claimed.insert(name.to_string(), lock);
    let dir = root.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn copy_vector(dir: &Path, rel: &str, as_name: &str) {
    std::fs::copy(Path::new(VECTORS).join(rel), dir.join(as_name)).unwrap();
}

/// A fixture directory ([`fixture_dir`]) holding a valid two-node bundle and two tampered copies
/// (entries deleted, a payload modified): a small review session.
pub fn review_dir(name: &str) -> PathBuf {
    let dir = fixture_dir(name);
    copy_vector(&dir, "bundles/two-nodes.json", "two-nodes.json");
    copy_vector(&dir, "tamper/entries-deleted.json", "entries-deleted.json");
    copy_vector(
        &dir,
        "tamper/payload-modified.json",
        "payload-modified.json",
    );
    dir
}

/// A bundle whose untrusted strings carry terminal escape sequences (a hostile file): the
/// valid vector with one payload, partition key and node id rewritten.
pub fn write_hostile_bundle(path: &Path) {
    let mut b = load_bundle(&Path::new(VECTORS).join("bundles/two-nodes.json")).unwrap();
    let e = &mut b.job_logs[0].entries[1];
    e.payload = "{\"note\":\"\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mred\u{9b}1m\"}".into();
    e.partition_key = Some("pk\u{1b}[H\u{202e}".into());
    b.header.tenant_id = "acme\u{1b}[5m".into();
    let f = std::fs::File::create(path).unwrap();
    write_bundle(f, &b).unwrap();
}

pub struct Console {
    pub app: App,
    pub inbox: TaskInbox,
    _rt: tokio::runtime::Runtime,
}

impl Console {
    pub fn open(dir: &Path) -> Console {
        Console::with_theme(dir, Theme::builtin("dark").unwrap(), false)
    }

    pub fn with_theme(dir: &Path, theme: Theme, read_only: bool) -> Console {
        // A fixed trust set (not the user's trust store): the vectors' test signer.
        let mut trust = airlock::core::trust::TrustSet::empty();
        let key = airlock::core::trust::load_verifying_key(
            &Path::new(VECTORS).join("keys/test-signer.pub.pem"),
        )
        .unwrap();
        trust.add_key("test-signer", key, "tests");
        Console::with_trust(dir, theme, read_only, trust)
    }

    /// A console over a demo workspace built in `root/demo`, trusting no key; the workspace says
    /// where its store, outbox and keys are.
    pub fn demo(root: &Path, read_only: bool) -> (Console, airlock::demo::DemoWorkspace) {
        let ws = airlock::demo::build_workspace(&root.join("demo")).unwrap();
        let c = Console::with_trust(
            &ws.bundles,
            Theme::default(),
            read_only,
            airlock::core::trust::TrustSet::empty(),
        );
        (c, ws)
    }

    /// A console over a demo workspace built in `root/demo`, trusting the workspace's own trust
    /// store (so its signed bundles verify and merge).
    pub fn trusted_demo(root: &Path) -> (Console, airlock::demo::DemoWorkspace) {
        let ws = airlock::demo::build_workspace(&root.join("demo")).unwrap();
        let trust = airlock::core::trust::TrustStore::open(&ws.trust_store)
            .unwrap()
            .trust_set();
        (
            Console::with_trust(&ws.bundles, Theme::default(), false, trust),
            ws,
        )
    }

    /// The status line's message (there must be one).
    pub fn message(&self) -> &str {
        &self.app.message.as_ref().expect("a status message").text
    }

    pub fn with_trust(
        dir: &Path,
        theme: Theme,
        read_only: bool,
        trust: airlock::core::trust::TrustSet,
    ) -> Console {
        let rt = airlock::tui::tasks::console_runtime().unwrap();
        let (tasks, inbox) = Tasks::new(rt.handle().clone());
        let trust = std::sync::Arc::new(trust);
        let config = ConsoleConfig {
            dir: dir.to_path_buf(),
            db: None,
            outbox: None,
            read_only,
            read_only_because: None,
            mouse: false,
            keys_dir: dir.join(".keys"),
            trust_store: dir.join(".trust.json"),
            upstream: "http://127.0.0.1:9".into(),
            wal: None,
            max_clock_skew: airlock::core::hlc::DEFAULT_MAX_CLOCK_SKEW,
        };
        let mut app = App::new(config, theme, tasks, trust);
        app.poll_dir();
        let mut c = Console {
            app,
            inbox,
            _rt: rt,
        };
        c.settle();
        c
    }

    pub fn settle(&mut self) {
        settle(&mut self.app, &mut self.inbox);
    }

    /// Presses keys given as text; `<Enter>`, `<Esc>`, `<Down>`, `<Up>`, `<Tab>`, `<End>` and
    /// `<PgDn>` name special keys. Background work is settled after each key.
    pub fn keys(&mut self, keys: &str) {
        for code in key_codes(keys) {
            self.app.handle_key(KeyEvent::new(code, KeyModifiers::NONE));
            self.settle();
        }
    }

    /// Presses keys like [`Console::keys`] but leaves background work running: what it
    /// reports is applied only by [`Console::pump`] or [`Console::settle`].
    pub fn keys_now(&mut self, keys: &str) {
        for code in key_codes(keys) {
            self.app.handle_key(KeyEvent::new(code, KeyModifiers::NONE));
        }
    }

    /// Applies the background results that have arrived, without waiting for more; true when
    /// there was one.
    pub fn pump(&mut self) -> bool {
        let mut any = false;
        while let Ok(msg) = self.inbox.rx.try_recv() {
            self.app.handle_msg(msg);
            any = true;
        }
        any
    }

    pub fn render(&mut self, w: u16, h: u16) -> Terminal<TestBackend> {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| self.app.draw(f)).unwrap();
        t
    }

    /// The rendered screen as plain lines.
    pub fn screen_text(&mut self, w: u16, h: u16) -> String {
        let t = self.render(w, h);
        buffer_text(t.backend().buffer())
    }
}

/// Keys given as text, as [`Console::keys`] reads them.
fn key_codes(keys: &str) -> Vec<KeyCode> {
    let mut out = Vec::new();
    let mut rest = keys;
    while !rest.is_empty() {
        let (code, len) = if let Some(end) = rest.strip_prefix('<').and_then(|r| r.find('>')) {
            let code = match &rest[1..end + 1] {
                "Enter" => KeyCode::Enter,
                "Esc" => KeyCode::Esc,
                "Down" => KeyCode::Down,
                "Up" => KeyCode::Up,
                "Tab" => KeyCode::Tab,
                "End" => KeyCode::End,
                "Home" => KeyCode::Home,
                "PgDn" => KeyCode::PageDown,
                "Right" => KeyCode::Right,
                "Left" => KeyCode::Left,
                "Backspace" => KeyCode::Backspace,
                other => panic!("unknown key <{other}>"),
            };
            (code, end + 2)
        } else {
            let c = rest.chars().next().unwrap();
            (KeyCode::Char(c), c.len_utf8())
        };
        out.push(code);
        rest = &rest[len..];
    }
    out
}

pub fn buffer_text(buf: &ratatui::buffer::Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// Finds the first cell where `text` starts on screen; returns (x, y).
pub fn find_text(buf: &ratatui::buffer::Buffer, text: &str) -> Option<(u16, u16)> {
    for y in 0..buf.area.height {
        let mut line = String::new();
        let mut xs = Vec::new();
        for x in 0..buf.area.width {
            let s = buf[(x, y)].symbol();
            for _ in s.chars() {
                xs.push(x);
            }
            line.push_str(s);
        }
        if let Some(byte) = line.find(text) {
            let ch = line[..byte].chars().count();
            return Some((xs[ch], y));
        }
    }
    None
}

/// Terminal output with escapes made visible (for failure messages).
pub fn printable(s: &str) -> String {
    airlock::text::visible(s).replace("\\x1b", "\n\\x1b")
}

/// Replaces what differs between runs (UUIDs, RFC 3339 times, loopback ports) with placeholders,
/// so screens over freshly made data can be snapshotted.
pub fn redact(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let is_hex = |c: char| c.is_ascii_hexdigit();
    let matches_shape = |at: usize, shape: &str, pred: &dyn Fn(char, char) -> bool| -> bool {
        shape
            .chars()
            .enumerate()
            .all(|(k, s)| chars.get(at + k).is_some_and(|&c| pred(s, c)))
    };
    let uuid = |s: char, c: char| if s == '-' { c == '-' } else { is_hex(c) };
    let time = |s: char, c: char| match s {
        'd' => c.is_ascii_digit(),
        other => other == c,
    };
    let mut i = 0;
    while i < chars.len() {
        if matches_shape(i, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", &uuid) {
            out.push_str("<uuid>");
            i += 36;
        } else if matches_shape(i, "dddd-dd-ddTdd:dd:dd.dddZ", &time) {
            out.push_str("<time>");
            i += 24;
        } else if matches_shape(i, "127.0.0.1:", &|s, c| s == c) {
            out.push_str("127.0.0.1:<port>");
            i += 10;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// True when drawn `text` shows `value` cut: a start of it (one character or more) right before
/// `…`, and the whole value nowhere (a squeezed table cell, marked as cut).
pub fn shows_cut(text: &str, value: &str) -> bool {
    let mut starts = value.char_indices().skip(1).map(|(at, _)| &value[..at]);
    starts.any(|head| text.contains(&format!("{head}…"))) && !text.contains(value)
}

/// The text of a drawn buffer as a terminal shows it, one line per row: a wide character's second
/// cell (hidden behind it) is left out, so `日本` reads as `日本`, not `日 本`.
pub fn shown_text(buf: &ratatui::buffer::Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut x = 0;
        while x < buf.area.width {
            let symbol = buf[(x, y)].symbol();
            out.push_str(symbol);
            x += (airlock::tui::widgets::text_width(symbol) as u16).max(1);
        }
        out.push('\n');
    }
    out
}
