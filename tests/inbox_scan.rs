//! `airlock inbox scan` and `core::inbox::scan` on an inbox holding more than regular files: a
//! FIFO, a socket and a symbolic link are reported as refused, with what each is and why, and left
//! where they are; none is opened (no hang on the FIFO) nor followed out of the inbox.
#![cfg(unix)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const VECTORS: &str = "../shared/vectors";

/// An inbox with `a.json` (a bundle), `pipe` (a FIFO), `sock` (a socket) and `link.json` (a link
/// to a bundle outside the inbox).
fn odd_inbox(root: &Path) -> (std::path::PathBuf, std::os::unix::net::UnixListener) {
    let inbox = root.join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    let bundle = Path::new(VECTORS).join("merge/a.json");
    std::fs::copy(&bundle, inbox.join("a.json")).unwrap();
    let outside = root.join("outside.json");
    std::fs::copy(Path::new(VECTORS).join("merge/b.json"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, inbox.join("link.json")).unwrap();
    common::make_fifo(&inbox.join("pipe"));
    let sock = std::os::unix::net::UnixListener::bind(inbox.join("sock")).unwrap();
    (inbox, sock)
}

/// Runs `airlock ARGS`, killed if it has not finished within 60 s (a FIFO opened for reading
/// would hang it).
fn run_bounded(root: &Path, args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .env("XDG_DATA_HOME", root.join("data"))
        .env("XDG_CONFIG_HOME", root.join("config"))
        .env_remove("AIRLOCK_REQUIRE_SIGNATURE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("airlock {args:?} hung (did it open the FIFO?)");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn inbox_scan_reports_a_fifo_socket_and_symlink_and_opens_none() {
    let dir = tempfile::tempdir().unwrap();
    let (inbox, _sock) = odd_inbox(dir.path());
    let o = run_bounded(
        dir.path(),
        &[
            "inbox".as_ref(),
            "scan".as_ref(),
            inbox.as_os_str(),
            "--settle-ms".as_ref(),
            "0".as_ref(),
            "--json".as_ref(),
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let files = v["files"].as_array().unwrap();
    let row = |name: &str| {
        files
            .iter()
            .find(|f| f["file"].as_str().unwrap().ends_with(&format!("/{name}")))
            .unwrap_or_else(|| panic!("{name} not listed: {v}"))
    };
    assert_eq!(row("a.json")["verdict"], "ok", "{v}");
    for (name, kind, why) in [
        ("pipe", "fifo", "FIFO"),
        ("sock", "socket", "socket"),
        ("link.json", "symlink", "not followed"),
    ] {
        let r = row(name);
        assert_eq!(r["state"], "refused", "{name}: {r}");
        assert_eq!(r["verdict"], kind, "{name}: {r}");
        assert!(r["reason"].as_str().unwrap().contains(why), "{name}: {r}");
    }
    assert_eq!(files.len(), 4, "{v}");
    // Left where they are.
    for name in ["pipe", "sock", "link.json"] {
        assert!(
            std::fs::symlink_metadata(inbox.join(name)).is_ok(),
            "{name}"
        );
    }
    // The human listing says the same, with the reasons.
    let o = run_bounded(
        dir.path(),
        &[
            "inbox".as_ref(),
            "scan".as_ref(),
            inbox.as_os_str(),
            "--settle-ms".as_ref(),
            "0".as_ref(),
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("refused") && text.contains("fifo"), "{text}");
    assert!(text.contains("a symbolic link (to "), "{text}");
}

/// The engine: `scan` lists regular files only (the link is not a candidate, so nothing decides on
/// what it points at), and `odd_entries` names the others.
#[test]
fn the_inbox_scan_never_lists_a_link_or_a_fifo_as_a_candidate() {
    use airlock::core::inbox::{self, OddKind, SettleTracker};
    let dir = tempfile::tempdir().unwrap();
    let (inbox, _sock) = odd_inbox(dir.path());
    let mut t = SettleTracker::new(Duration::from_millis(0));
    let files = inbox::scan(&inbox, &mut t, Instant::now()).unwrap();
    let names: Vec<_> = files.iter().map(|f| f.path.file_name().unwrap()).collect();
    assert_eq!(names, ["a.json"]);
    let odd = inbox::odd_entries(&inbox).unwrap();
    let kinds: Vec<(String, OddKind)> = odd
        .iter()
        .map(|o| {
            let name = o.path.file_name().unwrap().to_string_lossy().into_owned();
            (name, o.kind)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("link.json".to_string(), OddKind::Symlink),
            ("pipe".to_string(), OddKind::Fifo),
            ("sock".to_string(), OddKind::Socket),
        ]
    );
}
