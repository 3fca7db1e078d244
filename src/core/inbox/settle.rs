//! Which files of the inbox are there, and which have stopped growing.
//!
//! A file is *settled* when its size and modification time were seen unchanged for the whole
//! settle interval; until then it is [`FileState::Copying`] (a copy in progress, a download, an
//! upload still arriving) and is not verified. Candidates are the regular files directly in the
//! inbox whose names do not start with `.` (copy tools such as rsync write to hidden temporary
//! names); the decision folders (`done/`, ...) are folders and so never listed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// What a file looked like when it was listed (to notice changes cheaply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub size: u64,
    pub modified: Option<SystemTime>,
}

/// Reads a file's stamp (size 0 and no time when it cannot be read).
pub fn stamp_of(path: &Path) -> FileStamp {
    let meta = std::fs::metadata(path).ok();
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

/// Lists the inbox's candidate files and observes each: the files with their settle state,
/// sorted by path.
pub fn scan(
    dir: &Path,
    tracker: &mut SettleTracker,
    now: Instant,
) -> Result<Vec<InboxFile>, crate::core::bundle::catalog::ListError> {
    let paths = crate::core::bundle::catalog::files_in(dir)?;
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
    Ok(files)
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
