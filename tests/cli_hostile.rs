//! A hostile-input audit of the command line, through the real binary: standard input that is a
//! terminal, endless input streams, control characters in mistyped arguments, paths that are not
//! there, a 0-byte store, limits of 0, and a stored row that cannot be read. Each test names what
//! was wrong before: it waited forever, read without end, printed raw escapes, made files or
//! answered with a misleading message.

mod common;
mod support;

use common::{assert_exit, text};
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A work directory with a store path of its own (not made until a command makes it).
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn db(&self) -> PathBuf {
        self.path("airlock.db")
    }
    /// Runs `args`: it must exit 2 saying `needle` and naming `name`, and leave the directory
    /// empty (a mistyped path made nothing).
    fn refuses_making_nothing(&self, args: &[&str], needle: &str, name: &str) {
        let o = self.run(args);
        assert_exit(&o, 2, needle);
        assert!(text(&o).contains(name), "{}", text(&o));
        let left: Vec<_> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{args:?} made {left:?}");
    }
    /// The binary with this directory's store, data directory and node id, and no configuration
    /// inherited from the environment.
    fn cmd<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.args(args)
            .env("XDG_DATA_HOME", self.path("data"))
            .env("AIRLOCK_DB", self.db())
            .env("AIRLOCK_NODE_ID", "site-a")
            .env_remove("AIRLOCK_CONFIG")
            .env_remove("AIRLOCK_SIGNING_KEY")
            .env_remove("AIRLOCK_REQUIRE_SIGNATURE")
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        c
    }
    fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        self.cmd(args).output().unwrap()
    }
}

/// Waits for `child` at most `within`; a child still running then is killed and the test fails
/// (the command hung).
fn finish_within(mut child: Child, within: Duration, what: &str) -> Output {
    let deadline = Instant::now() + within;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("{what}: still running after {within:?} (it hung)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `jobs enqueue -` and `--jsonl -` with a terminal as standard input used to wait for typing,
/// silently, forever; like `chain verify-proof -` they now refuse and say how to give the input.
#[test]
fn enqueue_from_standard_input_that_is_a_terminal_is_refused_not_waited_on() {
    let s = Scratch::new();
    for args in [
        &["jobs", "enqueue", "--tenant", "t", "-"][..],
        &["jobs", "enqueue", "--tenant", "t", "--jsonl", "-"],
    ] {
        let (_master, slave) = common::open_pty(0, 0);
        let child = s
            .cmd(args)
            .stdin(Stdio::from(slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let o = finish_within(child, Duration::from_secs(20), &format!("{args:?}"));
        assert_exit(&o, 2, "standard input is a terminal");
        assert!(text(&o).contains("pipe the input in"), "{}", text(&o));
        assert!(!s.db().exists(), "{args:?} made a store");
    }
}

/// Feeds `lines` copies of `line` to `jobs enqueue --jsonl -` and returns what it did.
fn enqueue_stream(s: &Scratch, line: &'static [u8], lines: usize) -> Output {
    let mut child = s
        .cmd(&["jobs", "enqueue", "--tenant", "t", "--jsonl", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let block: Vec<u8> = line.repeat(4096);
        let mut left = lines;
        while left > 0 {
            let n = left.min(4096);
            // The command may stop reading at its limit: a broken pipe ends the stream.
            if stdin.write_all(&block[..n * line.len()]).is_err() {
                return;
            }
            left -= n;
        }
    });
    let o = finish_within(child, Duration::from_secs(300), "jobs enqueue --jsonl -");
    writer.join().unwrap();
    o
}

/// `jobs enqueue --jsonl -` held every line in memory until its one transaction, without limit:
/// `yes '{}' | airlock jobs enqueue --jsonl -` grew by ~1 GB in seconds. One call now takes at most
/// 1,000,000 jobs and 4,000,000 lines (and 256 MiB); past that it stops reading, says what to
/// do, and writes nothing.
#[test]
fn a_jsonl_stream_past_its_limits_is_refused_and_nothing_is_enqueued() {
    let s = Scratch::new();
    let o = enqueue_stream(&s, b"{}\n", 1_000_001);
    assert_exit(&o, 2, "more than 1000000 jobs");
    assert!(text(&o).contains("nothing was enqueued"), "{}", text(&o));
    assert!(!s.db().exists(), "a refused stream made a store");

    let o = enqueue_stream(&s, b"\n", 4_000_001);
    assert_exit(&o, 2, "more than 4000000 lines");
    assert!(!s.db().exists(), "a refused stream made a store");
}

/// clap quotes a mistyped subcommand, argument or value as it came: on a terminal (or with
/// CLICOLOR_FORCE) an escape sequence in it reached the screen raw, set the window title or
/// cleared the screen. The quoted values are now shown with their control characters escaped.
#[test]
fn usage_errors_show_control_characters_in_arguments_escaped() {
    let s = Scratch::new();
    for (args, shown) in [
        (&["\u{1b}]0;pwned\u{7}bogus"][..], "\\x1b]0;pwned\\x07bogus"),
        (
            &["chain", "show", "-t", "acme", "--from", "1\u{1b}[2J"],
            "1\\x1b[2J",
        ),
        (
            &["jobs", "list", "--bogus\u{1b}[31m", "dir"],
            "--bogus\\x1b[31m",
        ),
        (
            &["outbox", "list", "--status", "q", "--limit", "x\ry"],
            "x\\ry",
        ),
    ] {
        let o = s.cmd(args).env("CLICOLOR_FORCE", "1").output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(shown),
            "{args:?}: expected {shown:?} in {err:?}"
        );
        // The only escape sequences left are clap's own colours (ESC [ ... m).
        for (i, _) in err.match_indices('\u{1b}') {
            let rest = &err[i + 1..];
            let sgr = rest.starts_with('[')
                && rest[1..].find('m').is_some_and(|m| {
                    rest[1..1 + m]
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == ';')
                });
            assert!(sgr, "{args:?}: a raw escape reached the output: {err:?}");
        }
        assert!(
            !err.contains('\u{7}') && !err.contains('\r'),
            "{args:?}: {err:?}"
        );
    }
}

/// `ledger checkpoint` of a mistyped path made an empty WAL there and a checkpoint beside it
/// ("covers LSN 1..=0", exit 0); without --node it blamed the missing node id. It now names the
/// missing log and makes nothing.
#[test]
fn a_checkpoint_of_a_ledger_that_is_not_there_is_refused_and_makes_nothing() {
    let s = Scratch::new();
    let wal = s.path("typo.alwl");
    for args in [
        vec!["ledger", "checkpoint", wal.to_str().unwrap()],
        vec![
            "ledger",
            "checkpoint",
            "--node",
            "gate-a",
            wal.to_str().unwrap(),
        ],
        vec![
            "ledger",
            "checkpoint",
            "--json",
            "--node",
            "gate-a",
            wal.to_str().unwrap(),
        ],
    ] {
        s.refuses_making_nothing(&args, "no ledger WAL at", "typo.alwl");
    }
}

/// A 0-byte file given as the store (a `touch`ed typo, or a store truncated to nothing) was taken
/// by the reading commands for a new store: they wrote the whole schema into it and answered "no
/// scheduler chains yet". They now refuse it and leave it as it was; `jobs enqueue` still makes a
/// store in it.
#[test]
fn a_zero_byte_store_is_refused_by_the_reading_commands_and_left_empty() {
    let s = Scratch::new();
    std::fs::write(s.db(), b"").unwrap();
    let bundle =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vectors/bundles/two-nodes.json");
    let cases: [Vec<std::ffi::OsString>; 5] = [
        vec!["chain".into(), "tenants".into()],
        vec!["chain".into(), "verify".into(), "-t".into(), "acme".into()],
        vec!["audit".into(), "verify".into()],
        vec!["notify".into(), "list".into()],
        vec![
            "jobs".into(),
            "import".into(),
            "--dry-run".into(),
            bundle.clone().into_os_string(),
        ],
    ];
    for args in cases {
        let o = s.run(&args);
        assert_exit(&o, 2, "is an empty file (0 bytes), not an airlock store");
        assert_eq!(std::fs::metadata(s.db()).unwrap().len(), 0, "{args:?}");
        assert!(!s.path("airlock.db-wal").exists(), "{args:?}");
    }
    let o = s.run(&["jobs", "enqueue", "--tenant", "t", "{\"a\":1}"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(std::fs::metadata(s.db()).unwrap().len() > 0);
}

/// `--db` naming a file that is not SQLite at all (a bundle given by mistake) was called a damaged
/// store, with `sqlite3 .recover` to run "before importing into it". It is now said to be no SQLite
/// database and no airlock store, with --db to check; the file is left as it was. A SQLite file
/// whose pages are damaged is still a damaged store.
#[test]
fn a_db_that_is_not_sqlite_is_named_so_not_a_damaged_store() {
    let s = Scratch::new();
    let bundle =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vectors/bundles/two-nodes.json");
    std::fs::copy(&bundle, s.db()).unwrap();
    let before = std::fs::read(s.db()).unwrap();
    for args in [
        &["chain", "tenants"][..],
        &["chain", "verify", "-t", "acme"],
        &["jobs", "enqueue", "--tenant", "t", "{\"a\":1}"],
    ] {
        let o = s.run(args);
        assert_exit(&o, 2, "is not a SQLite database");
        let t = text(&o);
        assert!(
            t.contains("not an airlock store") && t.contains("--db"),
            "{args:?}: {t}"
        );
        assert!(
            !t.contains("damaged") && !t.contains(".recover"),
            "{args:?}: {t}"
        );
        assert_eq!(std::fs::read(s.db()).unwrap(), before, "{args:?}");
    }
}

/// `--limit 0` listed nothing and said so as if there were nothing: "no envelopes" over a
/// non-empty outbox, "the audit log is empty". 0 is now refused as a usage error.
#[test]
fn a_limit_of_zero_is_a_usage_error_not_an_empty_listing() {
    let s = Scratch::new();
    let outbox = s.path("edge-outbox.sqlite3");
    support::seed(
        &outbox,
        &[support::envelope("POST", "/progress/", "{}", "k1")],
    );
    let o = s.run(&[
        OsStr::new("outbox"),
        OsStr::new("--outbox"),
        outbox.as_os_str(),
        OsStr::new("list"),
        OsStr::new("--limit"),
        OsStr::new("0"),
    ]);
    assert_exit(&o, 2, "--limit");
    assert!(!text(&o).contains("no envelopes"), "{}", text(&o));

    let o = s.run(&["jobs", "enqueue", "--tenant", "t", "{\"a\":1}"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = s.run(&["audit", "list", "--limit", "0"]);
    assert_exit(&o, 2, "--limit");
    assert!(!text(&o).contains("is empty"), "{}", text(&o));
    // `chain show --limit 0` printed no entry and "... N more (--from 0)".
    let o = s.run(&["chain", "show", "--tenant", "t", "--limit", "0"]);
    assert_exit(&o, 2, "--limit");
    assert!(!text(&o).contains("more (--from"), "{}", text(&o));
}

/// An `--outbox` path that is a directory (or a FIFO) was reported as "no outbox at X: the relay
/// creates it when it starts"; it now says what is there.
#[test]
fn an_outbox_path_that_is_not_a_file_is_named_for_what_it_is() {
    let s = Scratch::new();
    let dir = s.path("outbox-dir");
    std::fs::create_dir(&dir).unwrap();
    let o = s.run(&[
        OsStr::new("outbox"),
        OsStr::new("--outbox"),
        dir.as_os_str(),
        OsStr::new("status"),
    ]);
    assert_exit(&o, 2, "is a directory, not an outbox file");
    assert!(!text(&o).contains("the relay creates it"), "{}", text(&o));
}

/// An envelope whose stored row cannot be read stops `outbox list`, `show` and `export`; the
/// error said "export the outbox and inspect it", which fails the same way. It now says where to
/// look instead, and nothing is changed.
#[test]
fn an_unreadable_envelope_row_gives_advice_that_can_be_followed() {
    let s = Scratch::new();
    let outbox = s.path("edge-outbox.sqlite3");
    let ids = support::seed(
        &outbox,
        &[support::envelope("POST", "/progress/", "{}", "k1")],
    );
    rusqlite::Connection::open(&outbox)
        .unwrap()
        .execute(
            "UPDATE envelopes SET headers = 'not json' WHERE id = ?1",
            [&ids[0]],
        )
        .unwrap();
    let export = s.path("export.json");
    for cmd in [
        vec!["list"],
        vec!["show", ids[0].as_str()],
        vec!["export", "--output", export.to_str().unwrap()],
    ] {
        let mut args = vec!["outbox", "--outbox", outbox.to_str().unwrap()];
        args.extend(cmd.iter().copied());
        let o = s.run(&args);
        assert_exit(&o, 2, "is unreadable");
        let t = text(&o);
        assert!(!t.contains("export the outbox"), "{cmd:?}: {t}");
        assert!(t.contains("sqlite3") && t.contains(&ids[0]), "{cmd:?}: {t}");
    }
    assert!(!export.exists());
}

/// SQLite takes `:memory:` for a private in-memory database: `--db :memory: jobs enqueue` said
/// "1 enqueued" and lost the job at exit, and `relay --outbox :memory:` answered 202 "queued" for
/// writes it then lost (SPEC 9: nothing acknowledged is lost). Both are refused before anything is
/// made, and so is a `file:` URI; `./:memory:` still names a file.
#[test]
fn an_in_memory_store_or_outbox_name_is_refused_before_anything_is_acknowledged() {
    let s = Scratch::new();
    for name in [":memory:", "file::memory:", "file:x.db?mode=memory"] {
        let o = s.run(&[
            "--db",
            name,
            "jobs",
            "enqueue",
            "--tenant",
            "t",
            "{\"a\":1}",
        ]);
        assert_exit(&o, 2, "not a file name");
        assert!(!text(&o).contains("enqueued"), "{}", text(&o));

        let child = s
            .cmd(&[
                "relay",
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                "http://127.0.0.1:9",
                "--outbox",
                name,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let o = finish_within(child, Duration::from_secs(20), "relay --outbox");
        assert_exit(&o, 2, "not a file name");
        let made: Vec<_> = std::fs::read_dir(s.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(made.is_empty(), "{name}: made {made:?}");
    }
    let o = s.run(&[
        "--db",
        "./:memory:",
        "jobs",
        "enqueue",
        "--tenant",
        "t",
        "{\"a\":1}",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(s.path(":memory:").metadata().unwrap().len() > 0);
}

/// `wal advance` of a mistyped path used to make a new log with a header, then refuse the
/// watermark ("covers frames not yet in the log"), or blame the missing node id without `--node`.
#[test]
fn advancing_a_wal_that_is_not_there_is_refused_and_makes_nothing() {
    let s = Scratch::new();
    let wal = s.path("nope.alwl");
    let w = wal.to_str().unwrap();
    for args in [
        vec!["wal", "advance", w, "--lsn", "5", "--state", "APPLIED"],
        vec![
            "wal", "advance", w, "--node", "n1", "--lsn", "5", "--state", "APPLIED",
        ],
    ] {
        s.refuses_making_nothing(&args, "no WAL at", "nope.alwl");
    }
}

/// `jobs verify -` and `jobs import -` said only "-: cannot read it: No such file or directory":
/// they now say that bundles are read from files, not standard input.
#[test]
fn a_bundle_named_dash_says_standard_input_is_not_read() {
    let s = Scratch::new();
    for args in [vec!["jobs", "verify", "-"], vec!["jobs", "import", "-"]] {
        let o = s.run(&args);
        assert_exit(&o, 2, "not standard input");
        assert!(!s.db().exists(), "{args:?} made a store");
    }
}

/// `ledger diff A B` with a mistyped A read it as an empty ledger and listed every LSN of B as
/// "missing in A" with nothing else: a typo looked like a real difference. It now says so.
#[test]
fn a_ledger_diff_of_a_copy_that_is_not_there_says_so() {
    let s = Scratch::new();
    let b = s.path("b.alwl");
    let o = s.run(&[
        "ledger",
        "append",
        b.to_str().unwrap(),
        "--node",
        "gate-a",
        "--event",
        r#"{"type":"JobCreated","job_id":"use1-1-g1-00001","spec":{},"assigned_dcs":["use1"],"fence_token":5}"#,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let typo = s.path("typo.alwl");
    let o = s.run(&[
        "ledger",
        "diff",
        typo.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(t.contains("typo.alwl does not exist"), "{t}");
    assert!(!typo.exists(), "diff made {}", typo.display());
}

/// A bundle file name with an escape sequence, a C1 CSI and a byte that is not UTF-8: `jobs verify`
/// and `jobs list` (text and JSON) showed the two last as U+FFFD (two different names looked the
/// same); they now show every byte, escaped, as `jobs import` does.
#[test]
fn a_file_name_that_is_not_utf8_shows_its_bytes_not_replacement_characters() {
    use std::os::unix::ffi::OsStrExt;
    let s = Scratch::new();
    let dir = s.path("in");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join(OsStr::from_bytes(b"evil\x1b[31m\xc2\x9b\xff.json"));
    let vector =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vectors/bundles/two-nodes.json");
    std::fs::copy(vector, &file).unwrap();
    let shown = r"evil\x1b[31m\x9b\xff.json";
    let clean = |o: &Output| {
        let t = text(o);
        assert!(!t.contains('\u{fffd}') && !t.contains('\u{1b}'), "{t}");
    };
    let verify = s.run(&[OsStr::new("jobs"), OsStr::new("verify"), file.as_os_str()]);
    assert_exit(&verify, 0, shown);
    clean(&verify);
    let list = s.run(&[
        OsStr::new("jobs"),
        OsStr::new("list"),
        OsStr::new("--source"),
        dir.as_os_str(),
    ]);
    assert_exit(&list, 0, shown);
    clean(&list);
    let json = s.run(&[
        OsStr::new("jobs"),
        OsStr::new("list"),
        OsStr::new("--json"),
        OsStr::new("--source"),
        dir.as_os_str(),
    ]);
    assert_exit(&json, 0, "");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v[0]["file"], shown, "{v}");
}
