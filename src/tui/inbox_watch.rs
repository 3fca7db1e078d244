//! The drop-directory watcher of `airlock console --inbox DIR`: a thread of its own (never the
//! UI thread) rescans the inbox when the filesystem reports a change, and again while a file is
//! still settling, and sends every new picture to the app's message channel.
//!
//! Changes are reported by inotify through the `notify` crate; where an inotify watch cannot be
//! set up (no inotify, its watch limit reached, a network filesystem the user asked to poll with
//! `--inbox-poll`) notify's `PollWatcher` looks at the folder every [`POLL_INTERVAL`] instead.
//! Which files exist and when one has settled are the engine's rules (`core::inbox`), and so are
//! the entries refused: a symbolic link, FIFO, socket or device is never opened nor followed, only
//! reported with what it is ([`inbox::odd_entries`]).

use crate::core::inbox::{self, SettleTracker};
use crate::tui::tasks::TaskMsg;
use notify::Watcher;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// How often the polling fallback looks at the folder.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// A rescan with no event at all (a missed event must not hide a file for ever).
const IDLE_RESCAN: Duration = Duration::from_secs(30);

/// How the console was asked to watch an inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxSettings {
    pub dir: PathBuf,
    /// How long a file must stay unchanged before it is verified.
    pub settle: Duration,
    /// Poll instead of inotify (`--inbox-poll`).
    pub poll: bool,
}

/// How changes are noticed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchKind {
    Inotify,
    /// Polling, and why (asked for, or the inotify error).
    Poll(String),
}

impl WatchKind {
    /// A few words for the screen's header.
    pub fn label(&self) -> String {
        match self {
            WatchKind::Inotify => "watching (inotify)".into(),
            WatchKind::Poll(_) => format!("polling every {} s", POLL_INTERVAL.as_secs()),
        }
    }
}

/// One picture of the inbox, as the watcher sends it.
pub type InboxPicture = inbox::Picture;

/// Lists the inbox once: the candidates observed by `tracker` and the refused entries.
fn picture(
    dir: &std::path::Path,
    tracker: &mut SettleTracker,
    now: Instant,
) -> Result<InboxPicture, String> {
    inbox::picture(dir, tracker, now).map_err(|e| e.to_string())
}

/// What wakes the watcher thread.
enum Wake {
    Changed,
    Rescan,
    Stop,
}

/// A running watcher; dropping it stops the thread.
pub struct InboxWatch {
    wake: Sender<Wake>,
    pub kind: WatchKind,
    pub settings: InboxSettings,
}

impl InboxWatch {
    /// Starts watching `settings.dir`, reporting [`TaskMsg::InboxScanned`] on `tx`.
    pub fn start(
        settings: InboxSettings,
        tx: UnboundedSender<TaskMsg>,
    ) -> Result<InboxWatch, String> {
        InboxWatch::start_with(settings, tx, inotify_watcher)
    }

    /// [`InboxWatch::start`] with the inotify watcher made by `inotify` (a test makes it fail).
    fn start_with(
        settings: InboxSettings,
        tx: UnboundedSender<TaskMsg>,
        inotify: MakeWatcher,
    ) -> Result<InboxWatch, String> {
        let (wake, woken) = channel();
        let (watcher, kind) = make_watcher(&settings, &wake, inotify)?;
        let dir = settings.dir.clone();
        let settle = settings.settle;
        std::thread::Builder::new()
            .name("airlock-inbox".into())
            .spawn(move || {
                // Kept alive for as long as the thread runs; it stops when dropped.
                let _watcher = watcher;
                watch_loop(&dir, settle, &woken, &tx);
            })
            .map_err(|e| format!("starting the inbox watcher: {e}"))?;
        Ok(InboxWatch {
            wake,
            kind,
            settings,
        })
    }

    /// Rescans now (the `r` key).
    pub fn rescan(&self) {
        let _ = self.wake.send(Wake::Rescan);
    }
}

impl Drop for InboxWatch {
    fn drop(&mut self) {
        let _ = self.wake.send(Wake::Stop);
    }
}

/// Wakes the watcher thread on every filesystem event.
#[derive(Clone)]
struct WakeOnEvent(Sender<Wake>);

impl notify::EventHandler for WakeOnEvent {
    fn handle_event(&mut self, _event: notify::Result<notify::Event>) {
        let _ = self.0.send(Wake::Changed);
    }
}

/// Makes a watcher of `dir` that calls the handler on each event.
type MakeWatcher = fn(WakeOnEvent, &std::path::Path) -> notify::Result<Box<dyn Watcher + Send>>;

/// The platform's event watcher (inotify on Linux) on `dir`, not recursive.
fn inotify_watcher(
    handler: WakeOnEvent,
    dir: &std::path::Path,
) -> notify::Result<Box<dyn Watcher + Send>> {
    let config = notify::Config::default().with_follow_symlinks(false);
    let mut w = notify::RecommendedWatcher::new(handler, config)?;
    w.watch(dir, notify::RecursiveMode::NonRecursive)?;
    Ok(Box::new(w))
}

/// An inotify watcher on the folder, else (or when asked) a polling one.
fn make_watcher(
    settings: &InboxSettings,
    wake: &Sender<Wake>,
    inotify: MakeWatcher,
) -> Result<(Box<dyn Watcher + Send>, WatchKind), String> {
    let handler = WakeOnEvent(wake.clone());
    let mode = notify::RecursiveMode::NonRecursive;
    let why = if settings.poll {
        "--inbox-poll".to_string()
    } else {
        match inotify(handler.clone(), &settings.dir) {
            Ok(w) => return Ok((w, WatchKind::Inotify)),
            Err(e) => {
                tracing::warn!(error = %e, "inbox: inotify unavailable, polling instead");
                e.to_string()
            }
        }
    };
    // A link in the inbox is not followed, not even to look at its target's metadata.
    let config = notify::Config::default()
        .with_poll_interval(POLL_INTERVAL)
        .with_follow_symlinks(false);
    let mut poll = notify::PollWatcher::new(handler, config)
        .map_err(|e| format!("watching the inbox: {e}"))?;
    poll.watch(&settings.dir, mode).map_err(|e| {
        format!(
            "watching the inbox {}: {e}",
            crate::text::visible_path(&settings.dir)
        )
    })?;
    Ok((Box::new(poll), WatchKind::Poll(why)))
}

/// Scans, reports a changed picture, and sleeps until an event, a file may have settled, or the
/// idle rescan; ends on `Stop` or when the app is gone.
fn watch_loop(
    dir: &std::path::Path,
    settle: Duration,
    woken: &Receiver<Wake>,
    tx: &UnboundedSender<TaskMsg>,
) {
    let mut tracker = SettleTracker::new(settle);
    let mut last: Option<Result<InboxPicture, String>> = None;
    loop {
        let now = Instant::now();
        let result = picture(dir, &mut tracker, now);
        let wait = match &result {
            // Just past the moment the earliest copying file could settle.
            Ok(p) => tracker
                .next_check(&p.files, now)
                .map(|d| d + Duration::from_millis(10))
                .unwrap_or(IDLE_RESCAN),
            Err(_) => POLL_INTERVAL,
        };
        if last.as_ref() != Some(&result) {
            if tx.send(TaskMsg::InboxScanned(result.clone())).is_err() {
                return;
            }
            last = Some(result);
        }
        match woken.recv_timeout(wait) {
            Ok(Wake::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Ok(w @ (Wake::Changed | Wake::Rescan)) => {
                // `r`: the picture is sent even when unchanged (the app examines again).
                if matches!(w, Wake::Rescan) {
                    last = None;
                }
                // One rescan for a burst of events (a copy writes many times a second).
                std::thread::sleep(Duration::from_millis(50));
                while let Ok(w) = woken.try_recv() {
                    match w {
                        Wake::Stop => return,
                        Wake::Rescan => last = None,
                        Wake::Changed => {}
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::inbox::FileState;

    fn no_inotify(_: WakeOnEvent, _: &std::path::Path) -> notify::Result<Box<dyn Watcher + Send>> {
        Err(notify::Error::generic("inotify watch limit reached"))
    }

    /// A picture lists a FIFO and a symbolic link as refused (what each is), not as files to
    /// verify; the link's target is not listed.
    #[test]
    fn a_picture_lists_fifos_and_links_as_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("t.json"), b"{}").unwrap();
        std::fs::write(dir.path().join("b.json"), b"{}").unwrap();
        std::os::unix::fs::symlink(outside.path().join("t.json"), dir.path().join("l.json"))
            .unwrap();
        crate::core::file_input::make_fifo(&dir.path().join("p.json"));
        let mut tracker = SettleTracker::new(Duration::from_millis(10));
        let p = picture(dir.path(), &mut tracker, Instant::now()).unwrap();
        let files: Vec<_> = p.files.iter().map(|f| f.path.clone()).collect();
        assert_eq!(files, [dir.path().join("b.json")]);
        let refused: Vec<_> = p.refused.iter().map(|o| (o.path.clone(), o.kind)).collect();
        assert_eq!(
            refused,
            [
                (dir.path().join("l.json"), inbox::OddKind::Symlink),
                (dir.path().join("p.json"), inbox::OddKind::Fifo),
            ]
        );
    }

    /// When the inotify watcher cannot be made, the folder is polled instead (and the screen is
    /// told why), and dropped files still arrive and settle.
    #[test]
    fn falls_back_to_polling_when_inotify_fails() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let settings = InboxSettings {
            dir: dir.path().to_path_buf(),
            settle: Duration::from_millis(100),
            poll: false,
        };
        let watch = InboxWatch::start_with(settings, tx, no_inotify).unwrap();
        assert_eq!(
            watch.kind,
            WatchKind::Poll("inotify watch limit reached".into())
        );
        assert!(watch.kind.label().contains("polling"));
        std::fs::write(dir.path().join("b.json"), b"{}").unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(TaskMsg::InboxScanned(Ok(p))) = rx.try_recv() {
                if p.files.iter().any(|f| f.state == FileState::Settled) {
                    assert_eq!(p.files[0].path, dir.path().join("b.json"));
                    break;
                }
            }
            assert!(Instant::now() < deadline, "the polled file never settled");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(watch);
    }
}
