//! Filing a decided file away: `DIR/<folder>/NAME` with `NAME.triage.json` and `NAME.triage.md`
//! beside it, by renames that never replace anything.
//!
//! Order (each step a rename within the inbox's filesystem, so nothing is ever half-written
//! under its final name):
//! 1. the report is written complete under a private name in `<folder>/.staging/`;
//! 2. a free name is picked: `NAME`, else `NAME-1.ext`, `NAME-2.ext`, ... (the file and both
//!    report names free);
//! 3. the two report files are renamed to `NAME.triage.json` / `NAME.triage.md`, then the file
//!    itself to `NAME`, each refusing to replace an existing file (`renameat2(RENAME_NOREPLACE)`,
//!    else a hard link and unlink). A name taken meanwhile puts the reports back and tries the
//!    next name;
//! 4. both folders are synced.
//!
//! A crash before step 3 leaves the file in the inbox (and a stray report in `.staging/`); after
//! it, the file is filed. The file is never copied, so it is never lost or half-written.

use super::settle::{stamp_of, FileStamp};
use super::{shown, Disposition, InboxError};
use crate::core::triage::{write_report, TriageReport};
use crate::core::trust::SigningKey;
use std::ffi::{OsStr, OsString};
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Names tried in a folder before giving up.
const MAX_TRIES: u32 = 10_000;

/// Where a file was filed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filed {
    /// The file's new path.
    pub file: PathBuf,
    /// Its triage report (JSON envelope) and the Markdown beside it.
    pub json: PathBuf,
    pub markdown: PathBuf,
    /// The key id that signed the report, when one did.
    pub signed_by: Option<String>,
}

/// The report files that go beside a file named `name`: `name.triage.json`, `name.triage.md`.
pub fn report_names(name: &OsStr) -> (OsString, OsString) {
    let with = |suffix: &str| {
        let mut n = name.to_owned();
        n.push(suffix);
        n
    };
    (with(".triage.json"), with(".triage.md"))
}

/// Is `name` one of the report files filed beside a file?
pub fn is_report_name(name: &str) -> bool {
    name.ends_with(".triage.json") || name.ends_with(".triage.md")
}

/// How many files each decision folder holds (reports and hidden files not counted; a missing
/// folder holds none).
pub fn filed_counts(inbox: &Path) -> Vec<(Disposition, usize)> {
    Disposition::ALL
        .iter()
        .map(|d| {
            let n = crate::core::bundle::catalog::files_in(&inbox.join(d.folder()))
                .map(|files| {
                    files
                        .iter()
                        .filter(|p| {
                            !p.file_name()
                                .is_some_and(|n| is_report_name(&n.to_string_lossy()))
                        })
                        .count()
                })
                .unwrap_or(0);
            (*d, n)
        })
        .collect()
}

/// The `n`th name tried for `name`: `name` itself, then `stem-n.ext` (`stem-n` without an
/// extension; a leading dot is part of the stem).
/// The `n`th name tried for `name` in a decision folder: `b.json`, `b-1.json`, ... The name's
/// bytes are kept as they are (a name that is not UTF-8 keeps its bytes, not U+FFFD).
fn candidate(name: &OsStr, n: u32) -> OsString {
    if n == 0 {
        return name.to_owned();
    }
    let b = name.as_bytes();
    let (stem, ext) = match b.iter().rposition(|&c| c == b'.').filter(|&i| i > 0) {
        Some(i) => b.split_at(i),
        None => (b, &b[b.len()..]),
    };
    let mut out = stem.to_vec();
    out.extend_from_slice(format!("-{n}").as_bytes());
    out.extend_from_slice(ext);
    OsString::from_vec(out)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InboxError + '_ {
    move |source| InboxError::Io {
        path: shown(path),
        source,
    }
}

/// Moves `file` (directly in `inbox`, still as it was when verified: `expected`) to the
/// disposition's folder with `report` beside it, signed with `key` when given.
pub fn file_away(
    inbox: &Path,
    file: &Path,
    expected: FileStamp,
    disposition: Disposition,
    report: &TriageReport,
    key: Option<&SigningKey>,
) -> Result<Filed, InboxError> {
    let name = file
        .file_name()
        .filter(|_| file.parent() == Some(inbox))
        .map(OsStr::to_owned)
        .ok_or_else(|| InboxError::NotInInbox {
            path: shown(file),
            inbox: shown(inbox),
        })?;
    let meta = std::fs::symlink_metadata(file).map_err(io(file))?;
    if meta.is_dir() {
        return Err(InboxError::NotInInbox {
            path: shown(file),
            inbox: shown(inbox),
        });
    }
    // Only a regular file is ever moved: one swapped for a link, FIFO, socket or device since it
    // was verified is left where it is, even when its size and time match the verified stamp.
    if !meta.is_file() {
        return Err(InboxError::NotRegular { path: shown(file) });
    }
    if stamp_of(file) != expected {
        return Err(InboxError::Changed { path: shown(file) });
    }
    let folder = inbox.join(disposition.folder());
    ensure_folder(&folder)?;
    let staging = folder.join(".staging");
    ensure_folder(&staging)?;
    let stem = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let written = write_report(report, &staging, &stem, key)?;
    let placed = place(file, &name, &folder, &written.json, &written.markdown);
    if placed.is_err() {
        let _ = std::fs::remove_file(&written.json);
        let _ = std::fs::remove_file(&written.markdown);
    }
    let _ = std::fs::remove_dir(&staging);
    let (file_to, json, markdown) = placed.map_err(|e| match e {
        PlaceError::Io(path, source) if source.raw_os_error() == Some(libc::EXDEV) => {
            InboxError::CrossDevice {
                path: shown(&path),
                folder: disposition.folder(),
            }
        }
        PlaceError::Io(path, source) => io(&path)(source),
        PlaceError::NoFreeName => InboxError::NoFreeName {
            path: shown(file),
            folder: disposition.folder(),
            tries: MAX_TRIES,
        },
    })?;
    sync_dir(&folder)?;
    sync_dir(inbox)?;
    Ok(Filed {
        file: file_to,
        json,
        markdown,
        signed_by: written.signed_by,
    })
}

enum PlaceError {
    Io(PathBuf, std::io::Error),
    NoFreeName,
}

/// Renames the staged reports and then the file to the first free name in `folder`.
fn place(
    file: &Path,
    name: &OsStr,
    folder: &Path,
    staged_json: &Path,
    staged_md: &Path,
) -> Result<(PathBuf, PathBuf, PathBuf), PlaceError> {
    for n in 0..MAX_TRIES {
        let cand = candidate(name, n);
        let (json_name, md_name) = report_names(&cand);
        let (to, json, md) = (
            folder.join(&cand),
            folder.join(json_name),
            folder.join(md_name),
        );
        if to.symlink_metadata().is_ok()
            || json.symlink_metadata().is_ok()
            || md.symlink_metadata().is_ok()
        {
            continue;
        }
        let taken = |e: &std::io::Error| e.kind() == ErrorKind::AlreadyExists;
        match rename_noreplace(staged_json, &json) {
            Ok(()) => {}
            Err(e) if taken(&e) => continue,
            Err(e) => return Err(PlaceError::Io(json, e)),
        }
        let put_back = |placed: &[(&Path, &Path)]| {
            for (from, to) in placed {
                let _ = rename_noreplace(to, from);
            }
        };
        match rename_noreplace(staged_md, &md) {
            Ok(()) => {}
            Err(e) => {
                put_back(&[(staged_json, &json)]);
                if taken(&e) {
                    continue;
                }
                return Err(PlaceError::Io(md, e));
            }
        }
        match rename_noreplace(file, &to) {
            Ok(()) => return Ok((to, json, md)),
            Err(e) => {
                put_back(&[(staged_json, &json), (staged_md, &md)]);
                if taken(&e) {
                    continue;
                }
                return Err(PlaceError::Io(file.to_path_buf(), e));
            }
        }
    }
    Err(PlaceError::NoFreeName)
}

/// Makes `folder` if it is missing; refuses a non-folder (a file, or a link that could lead
/// out of the inbox's filesystem).
fn ensure_folder(folder: &Path) -> Result<(), InboxError> {
    match std::fs::create_dir(folder) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            let meta = std::fs::symlink_metadata(folder).map_err(io(folder))?;
            if meta.is_dir() {
                Ok(())
            } else {
                Err(InboxError::NotAFolder {
                    path: shown(folder),
                })
            }
        }
        Err(e) => Err(io(folder)(e)),
    }
}

/// Renames `from` to `to` unless `to` exists (then `AlreadyExists`): atomic on Linux
/// (`renameat2` with `RENAME_NOREPLACE`); where the filesystem lacks it, a hard link (which
/// refuses an existing name) and an unlink of the old name.
pub fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| std::io::Error::new(ErrorKind::InvalidInput, "NUL in a path"))
        };
        let (f, t) = (c(from)?, c(to)?);
        // SAFETY: both are valid NUL-terminated paths; AT_FDCWD resolves them like rename(2).
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                f.as_ptr(),
                libc::AT_FDCWD,
                t.as_ptr(),
                libc::RENAME_NOREPLACE as _,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
            return Err(e);
        }
    }
    std::fs::hard_link(from, to)?;
    std::fs::remove_file(from)
}

/// Makes a folder's entries durable (renames into and out of it).
fn sync_dir(dir: &Path) -> Result<(), InboxError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::triage::{Decision, TriageReport};

    fn report(note: &str) -> TriageReport {
        TriageReport::for_unreadable(
            "inbox/x",
            "not a bundle",
            Decision {
                action: "reject".into(),
                note: note.into(),
            },
        )
    }

    fn drop_file(inbox: &Path, name: &str, body: &[u8]) -> (PathBuf, FileStamp) {
        let p = inbox.join(name);
        std::fs::write(&p, body).unwrap();
        (p.clone(), stamp_of(&p))
    }

    /// A file swapped for a FIFO or a symbolic link whose size and time match the verified stamp
    /// (both can be set by whoever drops files) used to be moved all the same; it now stays where
    /// it is and nothing is filed.
    #[cfg(unix)]
    #[test]
    fn a_fifo_or_link_with_the_verified_stamp_is_never_moved() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = dir.path().join("inbox");
        std::fs::create_dir(&inbox).unwrap();
        let fifo = inbox.join("p.json");
        crate::core::file_input::make_fifo(&fifo);
        let outside = dir.path().join("outside.json");
        std::fs::write(&outside, b"{}").unwrap();
        let link = inbox.join("l.json");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        for (path, d) in [
            (&fifo, Disposition::Reject),
            (&link, Disposition::Quarantine),
        ] {
            let stamp = stamp_of(path);
            let e = file_away(&inbox, path, stamp, d, &report(""), None).unwrap_err();
            assert!(matches!(e, InboxError::NotRegular { .. }), "{e}");
            assert!(
                std::fs::symlink_metadata(path).is_ok(),
                "{} moved",
                path.display()
            );
            let folder = inbox.join(d.folder());
            let filed = std::fs::read_dir(&folder).map(|r| r.count()).unwrap_or(0);
            assert_eq!(filed, 0, "something was filed in {}", folder.display());
        }
        assert_eq!(std::fs::read(&outside).unwrap(), b"{}");
    }

    #[test]
    fn candidates_keep_the_extension() {
        let c = |name: &str, n| candidate(OsStr::new(name), n);
        assert_eq!(c("b.json", 0), "b.json");
        assert_eq!(c("b.json", 2), "b-2.json");
        assert_eq!(c("a.b.alb", 1), "a.b-1.alb");
        assert_eq!(c("noext", 3), "noext-3");
        assert_eq!(c(".hidden", 1), ".hidden-1");
        // Bytes that are not UTF-8 stay as they are: two such names stay two names.
        let odd = OsStr::from_bytes(b"h4-\xff\xfe.json");
        assert_eq!(candidate(odd, 1).as_bytes(), b"h4-\xff\xfe-1.json");
        assert_ne!(
            candidate(odd, 0),
            candidate(OsStr::from_bytes(b"h4-\xfe\xff.json"), 0)
        );
    }

    /// A file whose name is not UTF-8 is filed under its own name (bytes kept), with the reports
    /// named after it; the report records the name with those bytes as `\xNN`.
    #[test]
    fn a_name_that_is_not_utf8_is_filed_under_its_own_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let inbox = tmp.path();
        let name = OsStr::from_bytes(b"h4-\xff\xfe.json");
        let p = inbox.join(name);
        std::fs::write(&p, b"x").unwrap();
        let stamp = stamp_of(&p);
        let shown = crate::core::text::visible_path(&p);
        assert!(shown.ends_with("h4-\\xff\\xfe.json"), "{shown}");
        let d = Disposition::Reject;
        let r = TriageReport::for_unreadable(
            &shown,
            "not a bundle",
            Decision {
                action: d.word().into(),
                note: "odd name".into(),
            },
        );
        let filed = file_away(inbox, &p, stamp, d, &r, None).unwrap();
        let folder = inbox.join(d.folder());
        assert_eq!(filed.file, folder.join(name));
        assert_eq!(
            filed.json,
            folder.join(OsStr::from_bytes(b"h4-\xff\xfe.json.triage.json"))
        );
        assert!(filed.file.is_file() && filed.markdown.is_file());
        let (_, back) = crate::core::triage::read_envelope(&filed.json).unwrap();
        assert_eq!(back.inputs, vec![shown]);
    }

    #[test]
    fn each_decision_moves_to_its_folder_with_the_report_beside_it() {
        let tmp = tempfile::tempdir().unwrap();
        let inbox = tmp.path();
        for d in Disposition::ALL {
            let (p, stamp) = drop_file(inbox, "b.json", d.word().as_bytes());
            let filed = file_away(inbox, &p, stamp, d, &report(d.word()), None).unwrap();
            let folder = inbox.join(d.folder());
            assert_eq!(filed.file, folder.join("b.json"));
            assert_eq!(filed.json, folder.join("b.json.triage.json"));
            assert_eq!(filed.markdown, folder.join("b.json.triage.md"));
            assert!(!p.exists(), "moved, not copied");
            assert_eq!(std::fs::read(&filed.file).unwrap(), d.word().as_bytes());
            let (_, back) = crate::core::triage::read_envelope(&filed.json).unwrap();
            assert_eq!(back.decision.note, d.word());
            let md = std::fs::read_to_string(&filed.markdown).unwrap();
            assert!(md.contains("not a bundle"), "{md}");
            // Nothing left behind in the staging folder.
            assert!(!folder.join(".staging").exists());
        }
    }

    #[test]
    fn a_taken_name_gets_a_suffix_and_nothing_is_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let inbox = tmp.path();
        let done = inbox.join("done");
        std::fs::create_dir(&done).unwrap();
        std::fs::write(done.join("b.json"), b"earlier").unwrap();
        // Only the report name of the next candidate is taken: that candidate is skipped too.
        std::fs::write(done.join("b-1.json.triage.md"), b"someone's notes").unwrap();
        let (p, stamp) = drop_file(inbox, "b.json", b"new");
        let filed = file_away(inbox, &p, stamp, Disposition::Import, &report("x"), None).unwrap();
        assert_eq!(filed.file, done.join("b-2.json"));
        assert_eq!(filed.json, done.join("b-2.json.triage.json"));
        assert_eq!(std::fs::read(done.join("b.json")).unwrap(), b"earlier");
        assert_eq!(
            std::fs::read(done.join("b-1.json.triage.md")).unwrap(),
            b"someone's notes"
        );
        assert_eq!(std::fs::read(&filed.file).unwrap(), b"new");
        let counts = filed_counts(inbox);
        assert_eq!(
            counts,
            [
                (Disposition::Import, 2),
                (Disposition::Reject, 0),
                (Disposition::Quarantine, 0)
            ]
        );
    }

    #[test]
    fn rename_noreplace_refuses_an_existing_target() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        let e = rename_noreplace(&a, &b).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&a).unwrap(), b"a");
        assert_eq!(std::fs::read(&b).unwrap(), b"b");
        std::fs::remove_file(&b).unwrap();
        rename_noreplace(&a, &b).unwrap();
        assert!(!a.exists() && std::fs::read(&b).unwrap() == b"a");
    }

    #[test]
    fn a_changed_or_foreign_file_is_refused_and_stays() {
        let tmp = tempfile::tempdir().unwrap();
        let inbox = tmp.path().join("inbox");
        std::fs::create_dir(&inbox).unwrap();
        let (p, stamp) = drop_file(&inbox, "b.json", b"12");
        std::fs::write(&p, b"12345").unwrap();
        let e = file_away(&inbox, &p, stamp, Disposition::Reject, &report("x"), None).unwrap_err();
        assert!(matches!(e, InboxError::Changed { .. }), "{e}");
        assert!(p.exists() && !inbox.join("rejected/b.json").exists());
        let outside = tmp.path().join("o.json");
        std::fs::write(&outside, b"o").unwrap();
        let e = file_away(
            &inbox,
            &outside,
            stamp_of(&outside),
            Disposition::Reject,
            &report("x"),
            None,
        )
        .unwrap_err();
        assert!(matches!(e, InboxError::NotInInbox { .. }), "{e}");
        assert!(outside.exists());
    }

    #[test]
    fn a_folder_name_taken_by_a_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let inbox = tmp.path();
        std::fs::write(inbox.join("quarantine"), b"not a folder").unwrap();
        let (p, stamp) = drop_file(inbox, "b.json", b"x");
        let e = file_away(
            inbox,
            &p,
            stamp,
            Disposition::Quarantine,
            &report("x"),
            None,
        )
        .unwrap_err();
        assert!(matches!(e, InboxError::NotAFolder { .. }), "{e}");
        assert!(p.exists(), "the file stays in the inbox");
    }

    #[test]
    fn a_failed_move_takes_the_reports_back() {
        let tmp = tempfile::tempdir().unwrap();
        let folder = tmp.path().join("done");
        let staging = folder.join(".staging");
        std::fs::create_dir_all(&staging).unwrap();
        let (sj, sm) = (staging.join("r.json"), staging.join("r.md"));
        std::fs::write(&sj, b"{}").unwrap();
        std::fs::write(&sm, b"# r").unwrap();
        // The file vanished before its rename: the reports must not stay under its name.
        let gone = tmp.path().join("gone.json");
        let placed = place(&gone, OsStr::new("gone.json"), &folder, &sj, &sm);
        assert!(matches!(placed, Err(PlaceError::Io(..))));
        assert!(!folder.join("gone.json.triage.json").exists());
        assert!(!folder.join("gone.json.triage.md").exists());
        assert!(
            sj.exists() && sm.exists(),
            "back in staging, for the caller to remove"
        );
    }
}
