//! End to end: the real binary in a pseudo-terminal. Open a directory of bundles, filter to the
//! broken one, open it, jump to its first finding, read the finding's kind on screen, quit, and
//! check that the terminal was restored (alternate screen left, raw mode off).

mod common;
mod tui_common;

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tui_common::review_dir;

struct Pty {
    master: std::fs::File,
    slave: std::fs::File,
}

fn open_pty(cols: u16, rows: u16) -> Pty {
    let (master, slave) = common::open_pty(cols, rows);
    Pty { master, slave }
}

fn termios(fd: i32) -> libc::termios {
    // SAFETY: tcgetattr fills a zeroed termios for a valid descriptor.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        assert_eq!(libc::tcgetattr(fd, &mut t), 0);
        t
    }
}

struct Screen {
    out: Arc<Mutex<Vec<u8>>>,
}

impl Screen {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn len(&self) -> usize {
        self.out.lock().unwrap().len()
    }

    /// Waits until `needle` appears in the output written after byte `from`.
    fn wait_for(&self, needle: &str, from: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            {
                let out = self.out.lock().unwrap();
                let tail = String::from_utf8_lossy(&out[from.min(out.len())..]).into_owned();
                if tail.contains(needle) {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{needle:?} never appeared on screen; output so far:\n{}",
                tui_common::printable(&self.text())
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A console running in a fresh pseudo-terminal.
struct Running {
    pty: Pty,
    child: std::process::Child,
    screen: Screen,
    keys: std::fs::File,
    home: tempfile::TempDir,
}

impl Drop for Running {
    /// A failed assertion must not leave the console running in its pty.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Running {
    fn start(dir: &std::path::Path, extra: &[&str]) -> Running {
        Running::start_with(dir, extra, &[])
    }

    fn start_with(dir: &std::path::Path, extra: &[&str], env: &[(&str, &str)]) -> Running {
        Running::start_as(dir, extra, env, None)
    }

    /// [`Running::start_with`] as user `uid` (its home made writable for it).
    fn start_as(
        dir: &std::path::Path,
        extra: &[&str],
        env: &[(&str, &str)],
        uid: Option<u32>,
    ) -> Running {
        let home = tempfile::tempdir().unwrap();
        if uid.is_some() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let pty = open_pty(140, 36);
        let before = termios(pty.master.as_raw_fd());
        assert_ne!(
            before.c_lflag & libc::ICANON,
            0,
            "a fresh pty starts cooked"
        );
        let slave_fd = pty.slave.as_raw_fd();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_airlock"));
        cmd.arg("console")
            .arg("--dir")
            .arg(dir)
            .args(extra)
            .env("TERM", "xterm-256color")
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path())
            .env("AIRLOCK_LOG", home.path().join("console.log"))
            .env_remove("NO_COLOR")
            .envs(env.iter().copied())
            .stdin(Stdio::from(pty.slave.try_clone().unwrap()))
            .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
            .stderr(Stdio::from(pty.slave.try_clone().unwrap()));
        if let Some(uid) = uid {
            cmd.uid(uid).gid(uid);
        }
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::ioctl(slave_fd, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start airlock console");
        let out = Arc::new(Mutex::new(Vec::new()));
        let mut reader = pty.master.try_clone().unwrap();
        let sink = out.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let keys = pty.master.try_clone().unwrap();
        Running {
            pty,
            child,
            screen: Screen { out },
            keys,
            home,
        }
    }

    fn press(&mut self, s: &str) {
        self.keys.write_all(s.as_bytes()).unwrap();
        self.keys.flush().unwrap();
        std::thread::sleep(Duration::from_millis(60));
    }

    /// Writes `key` and returns how long until `needle` is drawn after it.
    fn key_to_screen(&mut self, key: &str, needle: &str) -> Duration {
        let mark = self.screen.len();
        let t0 = Instant::now();
        self.keys.write_all(key.as_bytes()).unwrap();
        self.keys.flush().unwrap();
        self.screen.wait_for(needle, mark);
        t0.elapsed()
    }

    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "the console did not quit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The alternate screen was left and raw mode is off again.
    fn assert_restored(&self) {
        std::thread::sleep(Duration::from_millis(100));
        let text = self.screen.text();
        let entered = text.find("\x1b[?1049h").unwrap();
        let left = text
            .rfind("\x1b[?1049l")
            .expect("the alternate screen was left");
        assert!(left > entered);
        let after = termios(self.pty.master.as_raw_fd());
        assert_ne!(
            after.c_lflag & libc::ICANON,
            0,
            "raw mode is off again (canonical)"
        );
        assert_ne!(
            after.c_lflag & libc::ECHO,
            0,
            "raw mode is off again (echo)"
        );
    }
}

#[test]
fn open_a_broken_bundle_find_its_break_and_quit_cleanly() {
    let dir = review_dir("pty");
    let mut run = Running::start(&dir, &[]);
    run.screen.wait_for("\x1b[?1049h", 0);
    run.screen.wait_for("payload-modified.json", 0);
    run.screen.wait_for("✗ 2 findings", 0);

    let mark = run.screen.len();
    run.press("/deleted");
    run.screen.wait_for("deleted", mark);
    run.press("\r"); // end the filter
    let mark = run.screen.len();
    run.press("\r"); // open the bundle: a broken one opens at its first finding
    run.screen.wait_for("manifest-mismatch", mark);
    run.screen.wait_for("(entries deleted)", mark);
    run.screen.wait_for("FINDING", mark);

    run.press("q"); // back to Bundles
    run.press("q"); // quit
    let status = run.wait_exit();
    assert!(status.success(), "exit status {status:?}");
    run.assert_restored();
    // Logs went to the log file, never to the screen.
    assert!(!run.screen.text().contains("console start"));
    let log = std::fs::read_to_string(run.home.path().join("console.log")).unwrap();
    assert!(log.contains("console start"), "{log}");
}

/// A key pressed after the console sat idle is drawn at once, not on the next timer tick (the
/// directory poll is every 2 s; two keys 3 s apart cannot both land just before a tick). The
/// bound is generous (a loaded CI machine); the benchmark `bench/console_keys.sh` measures p99.
#[test]
fn keys_after_idle_are_drawn_at_once() {
    let dir = review_dir("pty-latency");
    let mut run = Running::start(&dir, &[]);
    run.screen.wait_for("✗ 2 findings", 0);
    // The help overlay's filter echoes each typed letter before its cursor.
    let mark = run.screen.len();
    run.press("?");
    run.screen.wait_for("WHAT IT DOES", mark);
    let mut worst = Duration::ZERO;
    for key in ["w", "z", "v"] {
        std::thread::sleep(Duration::from_secs(3));
        let took = run.key_to_screen(key, &format!("{key}▏"));
        worst = worst.max(took);
    }
    assert!(
        worst < Duration::from_millis(700),
        "a key after 3 s idle took {worst:?} to reach the screen"
    );
    run.press("\x1b"); // clears the filter
    run.press("\x1b"); // closes help
    run.press("q");
    assert!(run.wait_exit().success());
}

/// NO_COLOR with an explicit --theme: the theme is drawn as chosen (an explicit argument overrides
/// NO_COLOR), so its selection and verdict styles survive.
#[test]
fn no_color_with_an_explicit_theme_keeps_the_theme() {
    let dir = review_dir("pty-nocolor");
    let mut run = Running::start_with(&dir, &["--theme", "dark"], &[("NO_COLOR", "1")]);
    run.screen.wait_for("✗ 2 findings", 0);
    let text = run.screen.text();
    assert!(
        text.contains("\x1b[38;") || text.contains("\x1b[48;"),
        "colours were dropped: {}",
        tui_common::printable(&text[..text.len().min(2000)])
    );
    run.press("q");
    assert!(run.wait_exit().success());
}

/// SIGTERM, SIGHUP and SIGQUIT restore the terminal (raw mode off, alternate screen left) as
/// Ctrl-C does, and the process ends with 128 + the signal's number.
#[test]
fn termination_signals_restore_the_terminal() {
    let dir = review_dir("pty-signals");
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        let mut run = Running::start(&dir, &[]);
        run.screen.wait_for("✗ 2 findings", 0);
        // SAFETY: kill with a child's pid and a valid signal number.
        assert_eq!(unsafe { libc::kill(run.child.id() as i32, sig) }, 0);
        let status = run.wait_exit();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.code(),
            Some(128 + sig),
            "signal {sig}: exit status {status:?} (signal {:?})",
            status.signal()
        );
        run.assert_restored();
    }
}

/// `console --inbox DIR` in a real terminal: a bundle dropped into the watched folder is
/// verified, and `i` then `y` imports it and files it to done/ with its report.
#[test]
fn inbox_mode_files_a_dropped_bundle() {
    let dir = tui_common::fixture_dir("pty-inbox");
    let inbox = dir.display().to_string();
    let mut run = Running::start(&dir, &["--inbox", &inbox, "--inbox-settle-ms", "200"]);
    run.screen.wait_for("watching (inotify)", 0);
    let mark = run.screen.len();
    tui_common::copy_vector(&dir, "bundles/two-nodes.json", "two-nodes.json");
    // (NEW, which needs the watcher's first picture before the drop, is checked in tui_console.)
    run.screen.wait_for("✓ ok", mark);
    let mark = run.screen.len();
    run.press("i");
    run.screen.wait_for("Import and file to done/?", mark);
    run.press("y");
    // (The message is drawn over the previous one cell by cell: watch the folder instead.)
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.join("done/two-nodes.json").is_file() {
        assert!(Instant::now() < deadline, "never filed to done/");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(dir.join("done/two-nodes.json.triage.json").is_file());
    assert!(dir.join("done/two-nodes.json.triage.md").is_file());
    run.press("q");
    assert!(run.wait_exit().success());
    run.assert_restored();
}

/// A store the user cannot write (a copy on a read-only medium): the console opens it read-only,
/// as with `--read-only`, says why, and its screens read it, instead of failing on each. Run as
/// `nobody` when the tests run as root (root ignores file modes).
#[test]
fn a_store_the_user_cannot_write_is_reviewed_read_only() {
    use std::os::unix::fs::PermissionsExt;
    let root = unsafe { libc::geteuid() } == 0;
    let tmp = tempfile::tempdir().unwrap();
    let ws = airlock::demo::build_workspace(&tmp.path().join("demo")).unwrap();
    let ro = tmp.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let db = ro.join("airlock.db");
    std::fs::copy(&ws.db, &db).unwrap();
    let mode = |p: &std::path::Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
    };
    mode(tmp.path(), 0o755);
    mode(&db, if root { 0o644 } else { 0o444 });
    mode(&ro, if root { 0o755 } else { 0o555 });
    let bundles = tmp.path().join("bundles");
    std::fs::create_dir(&bundles).unwrap();
    mode(&bundles, 0o755);
    let db_arg = db.to_str().unwrap().to_string();
    let mut run = Running::start_as(&bundles, &["--db", &db_arg], &[], root.then_some(65534));
    run.screen.wait_for("opened it read-only", 0);
    run.screen.wait_for("READ-ONLY", 0);
    let mark = run.screen.len();
    run.press("4");
    run.screen.wait_for("acme", mark);
    run.press("q"); // back to Bundles
    run.press("q"); // quit
    run.wait_exit();
    mode(&ro, 0o755);
    let left: Vec<_> = std::fs::read_dir(&ro)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["airlock.db"], "nothing made beside the store");
}
