//! Files airlock names itself inside a folder it was given (`jobs export --portable -o DIR`
//! writes `DIR/export-portable-bundle-v1.tgz`): a symbolic link planted under that name by whoever
//! may write the folder is replaced by the file, never written through. It was followed, so the
//! export overwrote whatever the link named (as root, any file).
#![cfg(unix)]

mod common;

use common::text;
use std::process::Command;

#[test]
fn a_portable_export_never_writes_through_a_planted_link() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(args)
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("AIRLOCK_DB", dir.path().join("airlock.db"))
            .env("AIRLOCK_NODE_ID", "site-a")
            .env_remove("AIRLOCK_CONFIG")
            .env_remove("AIRLOCK_SIGNING_KEY")
            .output()
            .unwrap()
    };
    let os = std::ffi::OsStr::new;
    let o = run(&[
        os("jobs"),
        os("enqueue"),
        os("--tenant"),
        os("acme"),
        os("{\"task\":1}"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let victim = dir.path().join("victim.conf");
    std::fs::write(&victim, b"precious\n").unwrap();
    let name = out.join("export-portable-bundle-v1.tgz");
    std::os::unix::fs::symlink(&victim, &name).unwrap();
    let o = run(&[
        os("jobs"),
        os("export"),
        os("--portable"),
        os("--tenant"),
        os("acme"),
        os("-o"),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n");
    assert!(!std::fs::symlink_metadata(&name).unwrap().is_symlink());
    assert!(std::fs::metadata(&name).unwrap().len() > 0);
}
