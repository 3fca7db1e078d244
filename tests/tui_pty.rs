//! End to end: the real binary in a pseudo-terminal. Open a directory of bundles, filter to the
//! broken one, open it, jump to its first finding, read the finding's kind on screen, quit, and
//! check that the terminal was restored (alternate screen left, raw mode off).

mod tui_common;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Pty {
    master: std::fs::File,
    slave: OwnedFd,
}

fn open_pty(cols: u16, rows: u16) -> Pty {
    let mut master = -1;
    let mut slave = -1;
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two new file descriptors into the out-pointers.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    assert_eq!(rc, 0, "openpty failed: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are fresh and owned by nobody else.
    unsafe {
        Pty {
            master: std::fs::File::from_raw_fd(master),
            slave: OwnedFd::from_raw_fd(slave),
        }
    }
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

#[test]
fn open_a_broken_bundle_find_its_break_and_quit_cleanly() {
    let dir = tui_common::fixture_dir("pty");
    tui_common::copy_vector(&dir, "bundles/two-nodes.json", "two-nodes.json");
    tui_common::copy_vector(&dir, "tamper/entries-deleted.json", "entries-deleted.json");
    tui_common::copy_vector(
        &dir,
        "tamper/payload-modified.json",
        "payload-modified.json",
    );
    let home = tempfile::tempdir().unwrap();

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
        .arg(&dir)
        .env("TERM", "xterm-256color")
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path())
        .env("AIRLOCK_LOG", home.path().join("console.log"))
        .env_remove("NO_COLOR")
        .stdin(Stdio::from(pty.slave.try_clone().unwrap()))
        .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
        .stderr(Stdio::from(pty.slave.try_clone().unwrap()));
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
    let mut child = cmd.spawn().expect("start airlock console");
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
    let screen = Screen { out };
    let mut keys = pty.master.try_clone().unwrap();
    let mut press = |s: &str| {
        keys.write_all(s.as_bytes()).unwrap();
        keys.flush().unwrap();
        std::thread::sleep(Duration::from_millis(60));
    };

    screen.wait_for("\x1b[?1049h", 0);
    screen.wait_for("payload-modified.json", 0);
    screen.wait_for("✗ 2 findings", 0);

    let mark = screen.len();
    press("/deleted");
    screen.wait_for("deleted", mark);
    press("\r"); // end the filter
    let mark = screen.len();
    press("\r"); // open the bundle
    screen.wait_for("manifest-mismatch", mark);
    let mark = screen.len();
    press("n");
    screen.wait_for("(entries deleted)", mark);
    screen.wait_for("FINDING", mark);

    press("q"); // back to Bundles
    press("q"); // quit
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the console did not quit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status:?}");
    std::thread::sleep(Duration::from_millis(100));
    let text = screen.text();
    let entered = text.find("\x1b[?1049h").unwrap();
    let left = text
        .rfind("\x1b[?1049l")
        .expect("the alternate screen was left");
    assert!(left > entered);
    let after = termios(pty.master.as_raw_fd());
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
    // Logs went to the log file, never to the screen.
    assert!(!text.contains("console start"));
    let log = std::fs::read_to_string(home.path().join("console.log")).unwrap();
    assert!(log.contains("console start"), "{log}");
}
