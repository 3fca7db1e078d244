//! The console's bug fixes and daily-user features (issue 9), each driven through the real app
//! on a real runtime and drawn with ratatui's TestBackend.

mod tui_common;

use airlock::tui::screens::outbox::ReplayRun;
use std::sync::{Arc, Mutex};
use tui_common::Console;

fn review_dir(name: &str) -> std::path::PathBuf {
    let dir = tui_common::fixture_dir(name);
    tui_common::copy_vector(&dir, "bundles/two-nodes.json", "two-nodes.json");
    tui_common::copy_vector(&dir, "tamper/entries-deleted.json", "entries-deleted.json");
    tui_common::copy_vector(
        &dir,
        "tamper/payload-modified.json",
        "payload-modified.json",
    );
    dir
}

/// A running replay's progress is redrawn as it moves (counts and elapsed time).
#[test]
fn live_replay_progress_moves() {
    let mut c = Console::open(&review_dir("replay-progress"));
    let progress = Arc::new(Mutex::new(Default::default()));
    c.app.outbox.replay = Some(ReplayRun {
        progress: progress.clone(),
        started: std::time::Instant::now(),
        upstream: "http://127.0.0.1:9".into(),
    });
    assert!(c.app.busy());
    c.app.on_tick();
    {
        let mut p = progress.lock().unwrap();
        p.total = 400;
        p.attempted = 37;
        p.delivered = 37;
    }
    assert!(c.app.on_tick(), "the replay's counts moved: redraw");
}

/// A status message goes away when the screen changes or after a few seconds, so the key hints
/// come back.
#[test]
fn stale_status_messages_clear() {
    let mut c = Console::open(&review_dir("stale-message"));
    c.keys("3");
    c.app.message = Some(airlock::tui::widgets::bars::StatusMessage {
        level: airlock::tui::widgets::bars::Level::Info,
        text: "old news".into(),
        at: std::time::Instant::now(),
    });
    c.keys("1");
    assert!(c.app.message.is_none(), "cleared on screen change");
    c.app.message = Some(airlock::tui::widgets::bars::StatusMessage {
        level: airlock::tui::widgets::bars::Level::Info,
        text: "old news".into(),
        at: std::time::Instant::now(),
    });
    let later = std::time::Instant::now() + airlock::tui::app::MESSAGE_TTL;
    assert!(c.app.expire_message(later));
    assert!(c.app.message.is_none());
}
