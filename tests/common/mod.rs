//! Helpers shared by the tests that drive the real `airlock` binary: what a run printed, the
//! exit-status-and-message check, the URL a spawned server announces, a graceful stop.
#![allow(dead_code)]

/// Makes a FIFO at `path` (what every opener must refuse without waiting on it).
#[cfg(unix)]
pub fn make_fifo(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("a path without NUL");
    // SAFETY: mkfifo reads the NUL-terminated path it is given and nothing else.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

use std::io::{BufRead, BufReader};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

/// Everything a run printed: stdout, then stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Asserts the run exited with `code` and printed `needle` (showing the output when not).
pub fn assert_exit(o: &Output, code: i32, needle: &str) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(code), "{t}");
    assert!(t.contains(needle), "expected {needle:?} in:\n{t}");
}

/// The `http://` address a server child announces on its first line of stdout (its stdout must be
/// piped; it is taken).
pub fn announced_url(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout piped"))
        .read_line(&mut line)
        .unwrap();
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string()
}

/// SIGTERM, then the exit status once the child has stopped (a graceful shutdown exits 0); fails
/// when it has not stopped `within`.
pub fn terminate(child: &mut Child, within: Duration) -> i32 {
    // SAFETY: signalling our own child process by its id.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        assert!(
            Instant::now() < deadline,
            "the child did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
