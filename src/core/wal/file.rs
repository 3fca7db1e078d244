//! The file under the writer: positioned writes and fdatasync. [`FaultyFile`] wraps a real file
//! and fails on command, so tests and drills can watch the writer's failure semantics.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What the writer thread needs from its file.
pub trait WalFile: Send + 'static {
    /// Writes all of `buf` at `offset`.
    fn write_all_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// fdatasync.
    fn sync_data(&mut self) -> io::Result<()>;
    /// Current length.
    fn len(&self) -> io::Result<u64>;
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

impl WalFile for File {
    fn write_all_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(self, buf, offset)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
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
    fn write_all_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.plan
            .check(&self.plan.writes, &self.plan.fail_write_at)?;
        WalFile::write_all_at(&mut self.inner, buf, offset)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.plan.check(&self.plan.syncs, &self.plan.fail_sync_at)?;
        self.inner.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        WalFile::len(&self.inner)
    }
}
