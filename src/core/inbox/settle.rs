//! Which files of the inbox are there, and which have stopped growing.
//!
//! A file is *settled* when its size and modification time were seen unchanged for the whole
//! settle interval; until then it is [`FileState::Copying`] (a copy in progress, a download, an
//! upload still arriving) and is not verified. Candidates are the regular files directly in the
//! inbox whose names do not start with `.` (copy tools such as rsync write to hidden temporary
//! names); the decision folders (`done/`, ...) are folders and so never listed.
//!
//! Anything else directly in the inbox (a symbolic link, a FIFO, a socket, a device) is not a
//! candidate and is never opened or followed: a FIFO opened for reading waits for a writer
//! forever, and a link could make the inbox read (and file away) something outside it. Each is
//! reported by [`odd_entries`] with what it is and why it is left alone; nothing moves it (the
//! operator removes it, or drops the file itself instead of a link).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// What a file looked like when it was listed (to notice changes cheaply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub size: u64,
    pub modified: Option<SystemTime>,
}

/// Reads a file's stamp (size 0 and no time when it cannot be read). A symbolic link is not
/// followed: its stamp is the link's own, so a file swapped for a link is seen to change.
pub fn stamp_of(path: &Path) -> FileStamp {
    let meta = std::fs::symlink_metadata(path).ok();
    FileStamp {
        size: meta.as_ref().map(|m| m.len()).unwrap_or(0),
        modified: meta.and_then(|m| m.modified().ok()),
    }
}

/// Whether a file may be verified yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileState {
    /// Changed within the settle interval: still being written.
    Copying,
    /// Unchanged for the settle interval: ready to verify.
    Settled,
}

/// One file of the inbox as last seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxFile {
    pub path: PathBuf,
    pub stamp: FileStamp,
    pub state: FileState,
}

/// Remembers, per file, since when its stamp has been unchanged.
#[derive(Debug)]
pub struct SettleTracker {
    interval: Duration,
    /// Keyed by file names an outsider chooses: std's seeded hashing keeps it linear.
    seen: HashMap<PathBuf, (FileStamp, Instant)>,
}

impl SettleTracker {
    pub fn new(interval: Duration) -> SettleTracker {
        SettleTracker {
            interval,
            seen: HashMap::new(),
        }
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Records that `path` looked like `stamp` at `now`, and says whether it has settled: the
    /// same stamp seen for at least the interval. A changed stamp starts the interval again.
    pub fn observe(&mut self, path: &Path, stamp: FileStamp, now: Instant) -> FileState {
        match self.seen.get_mut(path) {
            Some((seen, since)) if *seen == stamp => {
                if now.saturating_duration_since(*since) >= self.interval {
                    FileState::Settled
                } else {
                    FileState::Copying
                }
            }
            Some(entry) => {
                *entry = (stamp, now);
                FileState::Copying
            }
            None => {
                self.seen.insert(path.to_path_buf(), (stamp, now));
                FileState::Copying
            }
        }
    }

    /// Forgets every file not in `present` (moved away or deleted).
    pub fn retain(&mut self, present: &std::collections::HashSet<&Path>) {
        self.seen.retain(|p, _| present.contains(p.as_path()));
    }

    /// How long until the earliest copying file could settle (for a timer), or `None`.
    pub fn next_check(&self, files: &[InboxFile], now: Instant) -> Option<Duration> {
        files
            .iter()
            .filter(|f| f.state == FileState::Copying)
            .filter_map(|f| self.seen.get(&f.path))
            .map(|(_, since)| {
                self.interval
                    .saturating_sub(now.saturating_duration_since(*since))
            })
            .min()
    }
}

/// What an entry of the inbox that is neither a regular file nor a folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OddKind {
    Symlink,
    Fifo,
    Socket,
    BlockDevice,
    CharDevice,
    Other,
}

impl OddKind {
    fn of(t: std::fs::FileType) -> OddKind {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if t.is_fifo() {
                return OddKind::Fifo;
            }
            if t.is_socket() {
                return OddKind::Socket;
            }
            if t.is_block_device() {
                return OddKind::BlockDevice;
            }
            if t.is_char_device() {
                return OddKind::CharDevice;
            }
        }
        if t.is_symlink() {
            OddKind::Symlink
        } else {
            OddKind::Other
        }
    }

    /// The word a listing shows.
    pub fn word(self) -> &'static str {
        match self {
            OddKind::Symlink => "symlink",
            OddKind::Fifo => "fifo",
            OddKind::Socket => "socket",
            OddKind::BlockDevice => "block-device",
            OddKind::CharDevice => "char-device",
            OddKind::Other => "not-a-file",
        }
    }
}

/// An entry of the inbox that is not a candidate (a symbolic link, FIFO, socket or device): left
/// where it is, never opened, never followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OddEntry {
    pub path: PathBuf,
    pub kind: OddKind,
    /// What it is and why it is left alone (a link's target shown with its bytes visible).
    pub reason: String,
}

fn odd_reason(path: &Path, kind: OddKind) -> String {
    let what = match kind {
        OddKind::Symlink => {
            let to = std::fs::read_link(path)
                .map(|t| crate::core::text::visible_path(&t))
                .unwrap_or_else(|_| "?".into());
            return format!("a symbolic link (to {to}): not followed, so nothing outside the inbox is read or filed; drop the file itself into the inbox, not a link");
        }
        OddKind::Fifo => "a FIFO (named pipe)",
        OddKind::Socket => "a socket",
        OddKind::BlockDevice => "a block device",
        OddKind::CharDevice => "a character device",
        OddKind::Other => "not a regular file",
    };
    format!("{what}: not a bundle; never opened (reading it could wait forever); the inbox takes regular files only, remove it")
}

/// The inbox's entries, not following links: the candidate files (regular, not hidden) and the
/// odd entries (anything else but folders), each sorted by path.
fn list_inbox(
    dir: &Path,
) -> Result<(Vec<PathBuf>, Vec<OddEntry>), crate::core::bundle::catalog::ListError> {
    let err = |source| crate::core::bundle::catalog::ListError {
        path: dir.to_path_buf(),
        source,
    };
    let (mut files, mut odd) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        if entry.file_name().as_encoded_bytes().first() == Some(&b'.') {
            continue;
        }
        // The entry's own type (lstat): a link is a link, whatever it points at.
        let t = entry.file_type().map_err(err)?;
        let path = entry.path();
        if t.is_file() {
            files.push(path);
        } else if !t.is_dir() {
            let kind = OddKind::of(t);
            let reason = odd_reason(&path, kind);
            odd.push(OddEntry { path, kind, reason });
        }
    }
    files.sort();
    odd.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, odd))
}

/// The inbox's entries that are not candidates: symbolic links, FIFOs, sockets, devices (see the
/// module documentation), sorted by path. Nothing is opened or followed.
pub fn odd_entries(dir: &Path) -> Result<Vec<OddEntry>, crate::core::bundle::catalog::ListError> {
    Ok(list_inbox(dir)?.1)
}

/// Lists the inbox's candidate files (regular files only: a symbolic link is not followed) and
/// observes each: the files with their settle state, sorted by path.
pub fn scan(
    dir: &Path,
    tracker: &mut SettleTracker,
    now: Instant,
) -> Result<Vec<InboxFile>, crate::core::bundle::catalog::ListError> {
    let (paths, _) = list_inbox(dir)?;
    Ok(observe(paths, tracker, now))
}

/// One picture of the inbox, from one listing: what [`scan`] gives and what [`odd_entries`] gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picture {
    /// The candidate files (regular, not hidden) with their settle state, sorted by path.
    pub files: Vec<InboxFile>,
    /// The entries refused (symbolic links, FIFOs, sockets, devices) with what each is and why:
    /// listed only, never opened or followed. Sorted by path.
    pub refused: Vec<OddEntry>,
}

/// [`scan`] and [`odd_entries`] from one listing of `dir` (the console's watcher).
pub fn picture(
    dir: &Path,
    tracker: &mut SettleTracker,
    now: Instant,
) -> Result<Picture, crate::core::bundle::catalog::ListError> {
    let (paths, refused) = list_inbox(dir)?;
    let files = observe(paths, tracker, now);
    Ok(Picture { files, refused })
}

/// Observes each listed candidate with `tracker` (and forgets the ones no longer listed).
fn observe(paths: Vec<PathBuf>, tracker: &mut SettleTracker, now: Instant) -> Vec<InboxFile> {
    let files: Vec<InboxFile> = paths
        .into_iter()
        .map(|path| {
            let stamp = stamp_of(&path);
            let state = tracker.observe(&path, stamp, now);
            InboxFile { path, stamp, state }
        })
        .collect();
    let present: std::collections::HashSet<&Path> =
        files.iter().map(|f| f.path.as_path()).collect();
    tracker.retain(&present);
    files
}

/// One look at the inbox for a caller without a watcher (`airlock inbox scan`): two scans the
/// settle interval apart, so a file that changed in between is reported as still copying.
pub fn scan_twice(
    dir: &Path,
    settle: Duration,
) -> Result<Vec<InboxFile>, crate::core::bundle::catalog::ListError> {
    let mut tracker = SettleTracker::new(settle);
    scan(dir, &mut tracker, Instant::now())?;
    std::thread::sleep(settle);
    scan(dir, &mut tracker, Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(size: u64) -> FileStamp {
        FileStamp {
            size,
            modified: None,
        }
    }

    #[test]
    fn a_file_settles_only_after_an_unchanged_interval() {
        let mut t = SettleTracker::new(Duration::from_secs(2));
        let p = Path::new("inbox/a.json");
        let t0 = Instant::now();
        assert_eq!(t.observe(p, stamp(10), t0), FileState::Copying);
        let t1 = t0 + Duration::from_millis(1999);
        assert_eq!(t.observe(p, stamp(10), t1), FileState::Copying);
        assert_eq!(
            t.observe(p, stamp(10), t0 + Duration::from_secs(2)),
            FileState::Settled
        );
    }

    #[test]
    fn growth_or_a_new_time_starts_the_interval_again() {
        let mut t = SettleTracker::new(Duration::from_secs(1));
        let p = Path::new("inbox/a.json");
        let t0 = Instant::now();
        t.observe(p, stamp(10), t0);
        // Grew just before it would have settled: waits a whole interval from now.
        let t1 = t0 + Duration::from_millis(900);
        assert_eq!(t.observe(p, stamp(20), t1), FileState::Copying);
        let t2 = t0 + Duration::from_millis(1500);
        assert_eq!(t.observe(p, stamp(20), t2), FileState::Copying);
        // Same size, touched: not settled either.
        let touched = FileStamp {
            size: 20,
            modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(5)),
        };
        assert_eq!(t.observe(p, touched, t2), FileState::Copying);
        assert_eq!(
            t.observe(p, touched, t2 + Duration::from_secs(1)),
            FileState::Settled
        );
        let files = [InboxFile {
            path: p.to_path_buf(),
            stamp: touched,
            state: FileState::Copying,
        }];
        assert_eq!(
            t.next_check(&files, t2 + Duration::from_millis(400)),
            Some(Duration::from_millis(600))
        );
    }

    #[test]
    fn scan_lists_visible_files_only_and_forgets_removed_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.json"), b"{}").unwrap();
        std::fs::write(dir.path().join(".partial.json"), b"{").unwrap();
        std::fs::create_dir(dir.path().join("done")).unwrap();
        let mut t = SettleTracker::new(Duration::from_millis(10));
        let t0 = Instant::now();
        let first = scan(dir.path(), &mut t, t0).unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].path, dir.path().join("b.json"));
        assert_eq!(first[0].state, FileState::Copying);
        let later = scan(dir.path(), &mut t, t0 + Duration::from_millis(10)).unwrap();
        assert_eq!(later[0].state, FileState::Settled);
        std::fs::remove_file(dir.path().join("b.json")).unwrap();
        assert!(scan(dir.path(), &mut t, t0).unwrap().is_empty());
        assert!(t.seen.is_empty(), "a removed file is forgotten");
    }
}
