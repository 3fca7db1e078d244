//! The file under the writer: positioned writes and fdatasync. [`FaultyFile`] wraps a real file
//! and fails on command, so tests and drills can watch the writer's failure semantics.

use super::error::WalError;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What the writer thread (and its preallocation helper) need from the file. Positioned I/O
/// only, so the writer and the helper can share it.
pub trait WalFile: Send + Sync + 'static {
    /// Writes all of `buf` at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// fdatasync.
    fn sync_data(&self) -> io::Result<()>;
    /// Current length.
    fn len(&self) -> io::Result<u64>;
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Writes zeros over `[offset, offset + len)` (not yet synced).
    fn zero_fill(&self, offset: u64, len: u64) -> io::Result<()> {
        buffered_zero_fill(self, offset, len)
    }
}

/// Bytes written per zero-fill call.
const ZERO_PIECE: usize = 1 << 20;
/// Alignment of direct I/O offsets, lengths and buffers.
const DIRECT_ALIGN: u64 = 4096;

fn buffered_zero_fill<F: WalFile + ?Sized>(f: &F, offset: u64, len: u64) -> io::Result<()> {
    let zeros = vec![0u8; (len as usize).min(ZERO_PIECE)];
    let mut at = offset;
    while at < offset + len {
        let n = ((offset + len - at) as usize).min(zeros.len());
        f.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

impl WalFile for File {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(self, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    /// Zeros through a second, `O_DIRECT` descriptor of the same file where the file system
    /// allows it: the zeros never sit dirty in the page cache, so the writer's fdatasync of its
    /// own frames does not also write them. Unaligned edges (and file systems without direct I/O)
    /// use ordinary writes.
    fn zero_fill(&self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset + len;
        let a = offset.next_multiple_of(DIRECT_ALIGN).min(end);
        let b = (end / DIRECT_ALIGN * DIRECT_ALIGN).max(a);
        buffered_zero_fill(self, offset, a - offset)?;
        if b > a && !direct_zero_fill(self, a, b)? {
            buffered_zero_fill(self, a, b - a)?;
        }
        buffered_zero_fill(self, b, end - b)
    }
}

/// Zero-fills the aligned range `[a, b)` with direct I/O; `Ok(false)` when direct I/O is not
/// available here (nothing was written then).
fn direct_zero_fill(file: &File, a: u64, b: u64) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    let Ok(direct) = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(proc_path)
    else {
        return Ok(false);
    };
    let raw = vec![0u8; ZERO_PIECE + DIRECT_ALIGN as usize];
    let pad = raw.as_ptr().align_offset(DIRECT_ALIGN as usize);
    let zeros = &raw[pad..pad + ZERO_PIECE];
    let mut at = a;
    while at < b {
        let n = ((b - at) as usize).min(ZERO_PIECE);
        match FileExt::write_all_at(&direct, &zeros[..n], at) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && at == a => return Ok(false),
            Err(e) => return Err(e),
        }
        at += n as u64;
    }
    Ok(true)
}

/// When a [`FaultyFile`] fails: the Nth write or sync call from now (0 = never), with `errno`.
#[derive(Debug, Default)]
pub struct FaultPlan {
    fail_write_at: AtomicU64,
    fail_sync_at: AtomicU64,
    writes: AtomicU64,
    syncs: AtomicU64,
    errno: AtomicU64,
}

impl FaultPlan {
    pub fn new() -> Arc<FaultPlan> {
        Arc::new(FaultPlan::default())
    }
    /// Fail the `n`th write from now (1 = the next one) and every write after it.
    pub fn fail_write_after(&self, n: u64, errno: i32) {
        self.errno.store(errno as u64, Ordering::SeqCst);
        let base = self.writes.load(Ordering::SeqCst);
        self.fail_write_at.store(base + n, Ordering::SeqCst);
    }
    /// Fail the `n`th fdatasync from now (1 = the next one) and every one after it.
    pub fn fail_sync_after(&self, n: u64, errno: i32) {
        self.errno.store(errno as u64, Ordering::SeqCst);
        let base = self.syncs.load(Ordering::SeqCst);
        self.fail_sync_at.store(base + n, Ordering::SeqCst);
    }
    /// Write calls made so far (failed ones included).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }
    /// fdatasync calls made so far (failed ones included).
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }
    fn check(&self, count: &AtomicU64, at: &AtomicU64) -> io::Result<()> {
        let n = count.fetch_add(1, Ordering::SeqCst) + 1;
        let at = at.load(Ordering::SeqCst);
        if at != 0 && n >= at {
            return Err(io::Error::from_raw_os_error(
                self.errno.load(Ordering::SeqCst) as i32,
            ));
        }
        Ok(())
    }
}

/// A real file whose writes or syncs fail when its [`FaultPlan`] says so.
pub struct FaultyFile {
    pub inner: File,
    pub plan: Arc<FaultPlan>,
}

impl WalFile for FaultyFile {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.plan
            .check(&self.plan.writes, &self.plan.fail_write_at)?;
        WalFile::write_all_at(&self.inner, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.plan.check(&self.plan.syncs, &self.plan.fail_sync_at)?;
        self.inner.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        WalFile::len(&self.inner)
    }
}

/// Takes the advisory write lock of the log (one writer per log, across processes). A reader's
/// instant look (`wal inspect` asking whether a writer is live) is waited out, not taken for a
/// writer ([`crate::core::file_lock`]).
pub fn lock_exclusive(file: &File, path: &Path) -> Result<(), WalError> {
    use crate::core::file_lock::{try_exclusive, Exclusive};
    match try_exclusive(file) {
        Ok(Exclusive::Taken) => Ok(()),
        Ok(Exclusive::HeldByAnother) => Err(WalError::Locked {
            path: path.to_path_buf(),
            readers_only: false,
        }),
        Ok(Exclusive::LooksWithoutPause) => Err(WalError::Locked {
            path: path.to_path_buf(),
            readers_only: true,
        }),
        Err(e) => Err(WalError::io("lock", path, e)),
    }
}
