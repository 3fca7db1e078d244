//! Helpers shared by the tests that drive the real `airlock` binary: what a run printed, the
//! exit-status-and-message check, the URL a spawned server announces, a running `serve` child
//! ready for requests, a graceful stop.
#![allow(dead_code)]

/// A pseudo-terminal of `cols` x `rows` (0 x 0: the kernel's default): its master and slave
/// sides.
#[cfg(unix)]
pub fn open_pty(cols: u16, rows: u16) -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (-1, -1);
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let size: *const libc::winsize = if cols == 0 { std::ptr::null() } else { &ws };
    // SAFETY: openpty writes two new descriptors into the out-pointers; `size` is null or
    // points at `ws`, alive across the call.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned here alone.
    unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    }
}

/// Makes a FIFO at `path` (what every opener must refuse without waiting on it).
#[cfg(unix)]
pub fn make_fifo(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("a path without NUL");
    // SAFETY: mkfifo reads the NUL-terminated path it is given and nothing else.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` with RLIMIT_FSIZE = `limit` bytes and SIGXFSZ ignored, so writes past the limit
/// fail with EFBIG (as on a full disk) instead of killing the process.
#[cfg(unix)]
pub fn with_file_size_limit(mut cmd: Command, limit: u64) -> Output {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls (setrlimit, signal) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    cmd.output().expect("run airlock")
}

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

/// A blocking HTTP client for a test server on loopback: no proxy, 30 s timeout.
pub fn http_client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Waits (30 s at most) until the server at `url` answers `/readyz` with 200 (its start-up chain
/// verification has finished).
pub fn wait_ready(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !http_client()
        .get(format!("{url}/readyz"))
        .send()
        .is_ok_and(|r| r.status() == 200)
    {
        assert!(Instant::now() < deadline, "serve at {url} is not ready");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running server child (`airlock serve`) at `url`, ready for requests; killed when dropped.
pub struct Server {
    pub child: Child,
    pub url: String,
}

impl Server {
    /// Spawns `cmd` (its stdout is taken for the announced address; the caller sets stderr) and
    /// waits until it is ready.
    pub fn spawn(cmd: &mut Command) -> Server {
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let url = announced_url(&mut child);
        let s = Server { child, url };
        wait_ready(&s.url);
        s
    }

    /// SIGTERM, and the exit status of a graceful shutdown (within 20 s).
    pub fn stop(mut self) -> i32 {
        terminate(&mut self.child, Duration::from_secs(20))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the tests run as root (which ignores file modes: a file only readable is written).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Makes `cmd` run as `nobody` when the tests run as root, so that file modes apply to it.
pub fn unprivileged(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    if is_root() {
        cmd.uid(65534).gid(65534);
    }
    cmd
}

/// Runs `cmd` to its end, stdout and stderr captured; kills it and fails when it has not ended
/// `within` (a server that started where it should have refused to).
pub fn output_within(cmd: &mut Command, within: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + within;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("still running after {within:?}:\n{}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}
