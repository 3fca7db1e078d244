//! File names that are not plain text, through the real binary: a name with a control character
//! and a byte that is not UTF-8 is shown escaped (`\x1b`, `\xff`) by every area that names a file
//! it was given (notify settings, portable export, the ledger, triage reports) and is sent escaped
//! by `jobs push`, as `jobs import` names a local file. These messages used `Path::display()`,
//! which shows such a byte as U+FFFD (two different names then look the same) and a control
//! character raw wherever nothing else escapes it.
#![cfg(unix)]

mod common;

use common::text;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The hostile part of every file name here: an escape sequence and a byte that is not UTF-8.
const HOSTILE: &[u8] = b"\x1b[31m\xff";
/// How it must be shown.
const SHOWN: &str = "\\x1b[31m\\xff";

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    /// `prefix` + the hostile bytes + `suffix`, in the work directory.
    fn hostile(&self, prefix: &str, suffix: &str) -> PathBuf {
        let mut name = prefix.as_bytes().to_vec();
        name.extend_from_slice(HOSTILE);
        name.extend_from_slice(suffix.as_bytes());
        self.dir.path().join(OsStr::from_bytes(&name))
    }
    fn run(&self, args: &[&OsStr]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(args)
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("AIRLOCK_DB", self.dir.path().join("airlock.db"))
            .env("AIRLOCK_NODE_ID", "site-a")
            .env_remove("AIRLOCK_CONFIG")
            .env_remove("AIRLOCK_SIGNING_KEY")
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// The run failed naming `name` escaped: no raw escape, no U+FFFD.
fn names_it_escaped(o: &Output, name: &str) {
    let t = text(o);
    assert_ne!(o.status.code(), Some(0), "{t}");
    assert!(t.contains(&format!("{name}{SHOWN}")), "{t}");
    assert!(!t.contains('\u{1b}') && !t.contains('\u{fffd}'), "{t}");
}

#[test]
fn a_webhook_secret_file_is_named_escaped() {
    let env = Env::new();
    let secret = env.hostile("s", "");
    let o = env.run(&[
        os("notify"),
        os("run"),
        os("--once"),
        os("--webhook"),
        os("http://127.0.0.1:9/h"),
        os("--webhook-secret-file"),
        secret.as_os_str(),
    ]);
    names_it_escaped(&o, "s");
}

#[test]
fn a_portable_export_directory_is_named_escaped() {
    let env = Env::new();
    let vector = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vectors/merge/a.json");
    let o = env.run(&[os("jobs"), os("import"), vector.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A file where the directory should be.
    let out = env.hostile("f", "");
    std::fs::write(&out, b"").unwrap();
    let o = env.run(&[
        os("jobs"),
        os("export"),
        os("--portable"),
        os("--tenant"),
        os("acme"),
        os("-o"),
        out.as_os_str(),
    ]);
    names_it_escaped(&o, "f");
    assert!(text(&o).contains("is not a directory"), "{}", text(&o));
}

#[test]
fn a_ledger_wal_is_named_escaped() {
    let env = Env::new();
    let wal = env.hostile("w", ".alwl");
    let o = env.run(&[os("ledger"), os("checkpoint"), wal.as_os_str()]);
    names_it_escaped(&o, "w");
    assert!(text(&o).contains("no ledger WAL at"), "{}", text(&o));
    let o = env.run(&[os("ledger"), os("fold"), wal.as_os_str()]);
    names_it_escaped(&o, "w");
}

#[test]
fn a_triage_report_is_named_escaped() {
    let env = Env::new();
    let report = env.hostile("r", ".json");
    let o = env.run(&[os("triage"), os("verify"), report.as_os_str()]);
    names_it_escaped(&o, "r");
    // A file that is there but is not a report: named the same way.
    std::fs::write(&report, b"{}").unwrap();
    let o = env.run(&[os("triage"), os("verify"), report.as_os_str()]);
    names_it_escaped(&o, "r");
    assert!(text(&o).contains("not a triage report"), "{}", text(&o));
}

/// The request line of the one request a server receives (it then closes without an answer).
fn one_request_line() -> (String, std::sync::mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf) {
                Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        let line = String::from_utf8_lossy(&head)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string();
        let _ = tx.send(line);
        let _ = s.write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n");
    });
    (format!("http://{addr}"), rx)
}

/// `jobs push` sends the bundle's file name for the serve to report and store: it sent
/// `Path::display()` of it (U+FFFD for the byte, the control character raw), where `jobs import`
/// stores the escaped name.
#[test]
fn jobs_push_sends_the_file_name_escaped() {
    let env = Env::new();
    let bundle = env.hostile("b", ".json");
    std::fs::write(&bundle, b"{}").unwrap();
    let (url, line) = one_request_line();
    let mut name = OsString::from("b");
    name.push(OsStr::from_bytes(HOSTILE));
    name.push(".json");
    let o = env.run(&[os("jobs"), os("push"), &name, os("--to"), os(&url)]);
    let line = line.recv().unwrap();
    assert!(
        line.contains("file=b%5Cx1b%5B31m%5Cxff.json&"),
        "{line}\n{}",
        text(&o)
    );
}

/// `jobs push` of a file that cannot be read, and a token file that does not hold a token, name
/// the file escaped: the push built its message from `Path::display()` (U+FFFD for the byte).
#[test]
fn jobs_push_names_an_unreadable_bundle_and_a_bad_token_file_escaped() {
    let env = Env::new();
    let missing = env.hostile("gone", ".json");
    let o = env.run(&[
        os("jobs"),
        os("push"),
        missing.as_os_str(),
        os("--to"),
        os("http://127.0.0.1:9"),
    ]);
    names_it_escaped(&o, "gone");
    let bundle = env.dir.path().join("b.json");
    std::fs::write(&bundle, b"{}").unwrap();
    let token = env.hostile("token", "");
    std::fs::write(&token, b"short\n").unwrap();
    let o = env.run(&[
        os("jobs"),
        os("push"),
        bundle.as_os_str(),
        os("--to"),
        os("http://127.0.0.1:9"),
        os("--token-file"),
        token.as_os_str(),
    ]);
    names_it_escaped(&o, "token");
}
