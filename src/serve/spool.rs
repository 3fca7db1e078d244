//! The upload spool: each pushed bundle is streamed into a directory of its own
//! (`<spool>/.upload-XXXXXX/bundle.json`) that lives until its import has finished, even when the
//! client disconnects first. Each directory holds `.lock`, locked (`flock`) by the serve that owns
//! it for as long as the upload lives; the kernel releases the lock when that process ends, so
//! directories a killed or crashed serve left behind are told apart from the uploads of a serve
//! still running on the same spool (two serves of one PostgreSQL store in one directory) and are
//! removed at start-up ([`sweep_stale`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Prefix of the upload directories.
const PREFIX: &str = ".upload-";
/// The lock file inside each.
const LOCK: &str = ".lock";
/// A directory without a lock file is a serve's between creating it and locking it (or an older
/// serve's): left alone while younger than this.
const UNLOCKED_GRACE: Duration = Duration::from_secs(60);

/// The spool directory could not be made ready at start.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot use the upload spool {}: {message}",
    crate::text::visible_path(path)
)]
pub struct SpoolError {
    pub path: PathBuf,
    pub message: String,
}

/// Makes the spool directory ready before serve opens its store: true when it was made now
/// (false when it was there). Something there that is not a directory is refused, naming it.
pub fn prepare(spool_dir: &Path) -> Result<bool, SpoolError> {
    let err = |message: String| SpoolError {
        path: spool_dir.to_path_buf(),
        message,
    };
    match std::fs::metadata(spool_dir) {
        Ok(m) if m.is_dir() => Ok(false),
        Ok(_) => Err(err(
            "it is there but not a directory; serve spools pushed bundles there (beside the store): move that file aside and start serve again".to_string(),
        )),
        Err(_) => std::fs::create_dir_all(spool_dir).map(|()| true).map_err(|e| {
            err(format!(
                "cannot create the directory ({e}); serve spools pushed bundles there (beside the store): make it writable for this user, or move the store somewhere writable"
            ))
        }),
    }
}

/// One upload's directory, removed (with the bundle) when dropped.
pub struct Spool {
    dir: tempfile::TempDir,
    /// Held for the upload's life: the directory is live.
    _lock: File,
}

impl Spool {
    /// A new, locked upload directory in `spool_dir`.
    pub fn create(spool_dir: &Path) -> std::io::Result<Spool> {
        let dir = tempfile::Builder::new()
            .prefix(PREFIX)
            .tempdir_in(spool_dir)?;
        let lock = File::create(dir.path().join(LOCK))?;
        lock.try_lock().map_err(std::io::Error::from)?;
        Ok(Spool { dir, _lock: lock })
    }

    /// Where the bundle goes.
    pub fn bundle_path(&self) -> PathBuf {
        self.dir.path().join("bundle.json")
    }
}

/// Removes the upload directories in `spool_dir` that no running serve holds (left by a serve
/// that was killed or crashed mid-upload); returns how many were removed.
pub fn sweep_stale(spool_dir: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(spool_dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let is_upload = name.to_str().is_some_and(|n| n.starts_with(PREFIX));
        if !is_upload || !entry.file_type()?.is_dir() {
            continue;
        }
        if is_stale(&entry.path()) {
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(removed)
}

/// No process holds the directory's lock (or, without a lock file, it is older than the grace).
fn is_stale(dir: &Path) -> bool {
    match File::open(dir.join(LOCK)) {
        // Taking the lock proves its owner is gone; it is released when `f` closes.
        Ok(f) => f.try_lock().is_ok(),
        Err(_) => std::fs::metadata(dir)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > UNLOCKED_GRACE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_uploads_no_serve_holds_are_swept() {
        let root = tempfile::tempdir().unwrap();
        let live = Spool::create(root.path()).unwrap();
        std::fs::write(live.bundle_path(), "{}").unwrap();
        // What a killed serve left: its lock file, no longer locked.
        let dead = root.path().join(".upload-dead01");
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(LOCK), "").unwrap();
        std::fs::write(dead.join("bundle.json"), "{}").unwrap();
        // Just created by another serve, not yet locked: within the grace.
        let young = root.path().join(".upload-young1");
        std::fs::create_dir(&young).unwrap();
        // Not an upload.
        std::fs::create_dir(root.path().join("keep")).unwrap();
        assert_eq!(sweep_stale(root.path()).unwrap(), 1);
        assert!(!dead.exists());
        assert!(young.exists() && live.bundle_path().exists());
        assert!(root.path().join("keep").exists());
        let path = live.bundle_path();
        drop(live);
        assert!(!path.exists());
    }
}
