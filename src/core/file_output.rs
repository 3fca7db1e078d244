//! Crash-safe file output: write beside the target, fsync, then rename over it, so a reader (or a
//! crash) never sees a half-written bundle, key or export; and a refusal to write over anything but
//! a regular file.

use crate::core::text::ShowPath;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// A file being written; it replaces `target` only on [`AtomicFile::commit`].
pub struct AtomicFile {
    target: PathBuf,
    tmp: PathBuf,
    out: BufWriter<File>,
}

/// Why an output file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}", crate::core::text::visible_path(.path))]
pub struct WriteFileError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl AtomicFile {
    /// A file that will replace `target`. A symbolic link is followed to the file it names (the
    /// rename would otherwise put a detached copy in place of the link and leave the real file
    /// as it was); a link that names nothing is replaced itself. Replacing a file keeps its
    /// permission bits; a new one gets the default (0666 less the umask).
    pub fn create(target: &Path) -> Result<AtomicFile, WriteFileError> {
        Self::create_with_mode(target, None)
    }

    /// Like [`AtomicFile::create`], a new file taking the permission bits of `like` (a log's
    /// side files: what may read the log may read them, and nothing else).
    pub fn create_like(target: &Path, like: &Path) -> Result<AtomicFile, WriteFileError> {
        Self::create_with_mode(target, permissions_of(like))
    }

    /// Like [`AtomicFile::create`], with Unix permission bits (e.g. 0o600 for private keys).
    pub fn create_with_mode(
        target: &Path,
        mode: Option<u32>,
    ) -> Result<AtomicFile, WriteFileError> {
        let target = &resolve_link(target).unwrap_or_else(|_| target.to_path_buf());
        Self::create_here(target, mode.or_else(|| permissions_of(target)))
    }

    /// A file that will take the name `target` itself: a symbolic link there is replaced, never
    /// followed (the rename replaces the link's own entry). For a file airlock names inside a
    /// folder the operator gave, where a link planted by whoever may write that folder would
    /// otherwise have a process (root's timer) overwrite any file it names.
    pub fn create_no_follow(target: &Path) -> Result<AtomicFile, WriteFileError> {
        let link = std::fs::symlink_metadata(target).is_ok_and(|m| m.file_type().is_symlink());
        Self::create_here(target, if link { None } else { permissions_of(target) })
    }

    fn create_here(target: &Path, mode: Option<u32>) -> Result<AtomicFile, WriteFileError> {
        let err = |source| WriteFileError {
            path: target.to_path_buf(),
            source,
        };
        // A device, FIFO or socket is never replaced: the rename would put a regular file in
        // place of `/dev/null` (as root) or of a pipe someone reads.
        refuse_non_regular(target).map_err(err)?;
        let dir = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(
            ".{name}.tmp-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            if let Some(m) = mode {
                opts.mode(m);
            }
        }
        let file = opts
            .open(&tmp)
            .map_err(|e| err(folder_not_writable(dir, e)))?;
        // Exactly these bits, whatever the umask took from the open's mode.
        #[cfg(unix)]
        if let Some(m) = mode {
            use std::os::unix::fs::PermissionsExt;
            if let Err(e) = file.set_permissions(std::fs::Permissions::from_mode(m)) {
                let _ = std::fs::remove_file(&tmp);
                return Err(err(e));
            }
        }
        Ok(AtomicFile {
            target: target.to_path_buf(),
            tmp,
            out: BufWriter::with_capacity(1 << 20, file),
        })
    }

    pub fn writer(&mut self) -> &mut BufWriter<File> {
        &mut self.out
    }

    /// Where the file goes on commit.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Flushes, syncs and renames into place.
    pub fn commit(self) -> Result<(), WriteFileError> {
        self.finish(false)
    }

    /// Like [`AtomicFile::commit`], but never replaces anything: when `target` exists (a dangling
    /// symlink included) the error is [`std::io::ErrorKind::AlreadyExists`] and nothing changed.
    /// The name is taken with a hard link, which fails rather than replace, so no check-then-rename
    /// race lets a file made meanwhile be overwritten.
    pub fn commit_new(self) -> Result<(), WriteFileError> {
        self.finish(true)
    }

    fn finish(mut self, no_replace: bool) -> Result<(), WriteFileError> {
        let target = self.target.clone();
        let err = |source| WriteFileError {
            path: target.clone(),
            source,
        };
        self.out.flush().map_err(err)?;
        self.out.get_ref().sync_all().map_err(err)?;
        if no_replace {
            std::fs::hard_link(&self.tmp, &self.target).map_err(err)?;
            let _ = std::fs::remove_file(&self.tmp);
        } else {
            std::fs::rename(&self.tmp, &self.target).map_err(err)?;
        }
        self.tmp = PathBuf::new();
        if let Some(dir) = self.target.parent().filter(|p| !p.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The permission bits of the file at `path` (a link followed), if it exists.
pub fn permissions_of(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path)
            .ok()
            .map(|m| m.permissions().mode() & 0o7777)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// `path`, or the file it names when it is a symbolic link (links of links followed); an error
/// when it is a link whose target cannot be resolved (a dangling link).
pub fn resolve_link(path: &Path) -> std::io::Result<PathBuf> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path),
        _ => Ok(path.to_path_buf()),
    }
}

/// An error creating a new file in `dir` (a temporary file beside a target, a lock file) said as
/// what it means when the folder refuses new files: an atomic replace writes a new file beside the
/// target and renames it over, so a writable file in a folder that is not writable still cannot be
/// replaced, and the bare "Permission denied" would point at the file. The kind is kept.
pub fn folder_not_writable(dir: &Path, e: std::io::Error) -> std::io::Error {
    let why = match e.kind() {
        std::io::ErrorKind::PermissionDenied => "is not writable by this user",
        std::io::ErrorKind::ReadOnlyFilesystem => "is on a read-only file system",
        _ => return e,
    };
    std::io::Error::new(
        e.kind(),
        format!(
            "the folder {} {why} ({e}); replacing a file atomically writes a new file beside it and renames it over the old one, so the folder must be writable: make it writable (as its owner: `chmod u+w {}`) or use a location in a writable folder",
            crate::core::text::visible_path(dir),
            crate::core::text::shell_word(dir)
        ),
    )
}

/// Writes `bytes` to `target` atomically.
pub fn write_atomic(target: &Path, bytes: &[u8]) -> Result<(), WriteFileError> {
    write_atomic_with_mode(target, bytes, None)
}

/// Like [`write_atomic`], for a name airlock chooses inside a folder it was given (`metrics
/// --textfile DIR` writes `DIR/airlock.prom`): a symbolic link at `target` is replaced by the
/// file, never written through ([`AtomicFile::create_no_follow`]).
pub fn write_atomic_no_follow(target: &Path, bytes: &[u8]) -> Result<(), WriteFileError> {
    fill(AtomicFile::create_no_follow(target)?, target, bytes, false)
}

/// Like [`write_atomic`], but never replaces an existing `target` ([`AtomicFile::commit_new`]:
/// an error of kind `AlreadyExists`, nothing written).
pub fn write_new(target: &Path, bytes: &[u8]) -> Result<(), WriteFileError> {
    write_file(target, bytes, None, true)
}

/// Like [`write_atomic`], readable and writable by the owner only (0600): trust store, signing
/// configuration, outbox exports.
pub fn write_atomic_private(target: &Path, bytes: &[u8]) -> Result<(), WriteFileError> {
    write_atomic_with_mode(target, bytes, Some(0o600))
}

/// Like [`write_atomic`], a new file taking the permission bits of `like`
/// ([`AtomicFile::create_like`]).
pub fn write_atomic_like(target: &Path, bytes: &[u8], like: &Path) -> Result<(), WriteFileError> {
    write_atomic_with_mode(target, bytes, permissions_of(like))
}

fn write_atomic_with_mode(
    target: &Path,
    bytes: &[u8],
    mode: Option<u32>,
) -> Result<(), WriteFileError> {
    write_file(target, bytes, mode, false)
}

/// Writes `bytes` beside `target` with `mode`, then commits: replacing `target`, or with
/// `no_replace` taking its name only while nothing has it ([`AtomicFile::commit_new`]).
fn write_file(
    target: &Path,
    bytes: &[u8],
    mode: Option<u32>,
    no_replace: bool,
) -> Result<(), WriteFileError> {
    fill(
        AtomicFile::create_with_mode(target, mode)?,
        target,
        bytes,
        no_replace,
    )
}

/// Writes `bytes` into `f` (for `target`), then commits it ([`write_file`]).
fn fill(
    mut f: AtomicFile,
    target: &Path,
    bytes: &[u8],
    no_replace: bool,
) -> Result<(), WriteFileError> {
    f.writer()
        .write_all(bytes)
        .map_err(|source| WriteFileError {
            path: target.to_path_buf(),
            source,
        })?;
    match no_replace {
        true => f.commit_new(),
        false => f.commit(),
    }
}

/// Fails unless `path` is missing or a regular file (for outputs and stores that would otherwise
/// create side files next to a device, e.g. `--outbox /dev/null`).
pub fn refuse_non_regular(path: &Path) -> std::io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(std::io::Error::other(if m.is_dir() {
            "it is a directory; give a file path"
        } else {
            "it is not a regular file (a FIFO, socket or device); give a file path"
        })),
        _ => Ok(()),
    }
}

/// Makes `path` ready to be opened as a private database file (the embedded store, the relay's
/// outbox): refuses a directory or a device (`flag` names the option in the message), creates the
/// parent directories, and creates a missing file with mode 0600 (SQLite's `-wal` and `-shm`
/// follow its mode). Returns what went wrong, for the caller's open error.
pub fn prepare_private_file(path: &Path, flag: &str) -> Result<(), String> {
    refuse_non_regular(path).map_err(|e| format!("{e} with {flag}"))?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.shown()))?;
    }
    if !path.exists() {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        opts.open(path)
            .map_err(|e| format!("cannot create the file: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_refused_as_outputs_and_a_commit_replaces_the_target() {
        assert!(refuse_non_regular(Path::new("/dev/null")).is_err());
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("new");
        assert!(refuse_non_regular(&target).is_ok());
        write_atomic(&target, b"one").unwrap();
        write_atomic_private(&target, b"two").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// A name airlock chooses in a folder it was given never writes through a link planted there
    /// (`metrics --textfile DIR` overwrote the file `DIR/airlock.prom` linked to, as root any
    /// file): the link is replaced by the file, its target untouched.
    #[test]
    fn a_no_follow_write_replaces_a_link_not_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = dir.path().join("airlock.prom");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        write_atomic_no_follow(&link, b"metrics").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read(&link).unwrap(), b"metrics");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    /// Replacing a file through a symbolic link replaces the file it names (the link stays), and
    /// keeps that file's permission bits; a file made beside another takes that one's bits.
    #[test]
    fn a_replace_follows_a_link_and_keeps_the_permission_bits() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::write(&real, b"old").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        assert_eq!(permissions_of(&real), Some(0o640));
        let beside = dir.path().join("beside");
        write_atomic_like(&beside, b"x", &real).unwrap();
        assert_eq!(permissions_of(&beside), Some(0o640));
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            3,
            "no temp file left"
        );
    }

    /// `write_new` never replaces a name, not even one made after the write began (the race a
    /// check before `write_atomic` leaves open), nor a dangling symlink; nothing is left behind.
    #[test]
    fn a_new_file_never_replaces_an_existing_name() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("proof.json");
        write_new(&target, b"one").unwrap();
        let e = write_new(&target, b"two").unwrap_err();
        assert_eq!(e.source.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"one");
        // Another writer takes the name while this one is writing.
        let late = dir.path().join("late.json");
        let mut f = AtomicFile::create(&late).unwrap();
        f.writer().write_all(b"mine").unwrap();
        std::fs::write(&late, b"theirs").unwrap();
        let e = f.commit_new().unwrap_err();
        assert_eq!(e.source.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read(&late).unwrap(), b"theirs");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
        assert!(write_new(&link, b"x").is_err());
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert!(!dir.path().join("nowhere").exists());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            3,
            "no temp file left"
        );
    }

    /// An atomic write never renames over a FIFO (or a device: `--out /dev/null` run as root
    /// replaced /dev/null with a 0600 regular file); it is refused before anything is written.
    #[test]
    fn an_atomic_write_never_replaces_a_fifo_or_device() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let e = write_atomic_private(&fifo, b"x").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(AtomicFile::create(&fifo).is_err());
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }
}
