//! Crash-safe file output: write beside the target, fsync, then rename over it, so a reader (or a
//! crash) never sees a half-written bundle, key or export.

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
#[error("cannot write {path}: {source}")]
pub struct WriteFileError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl AtomicFile {
    pub fn create(target: &Path) -> Result<AtomicFile, WriteFileError> {
        Self::create_with_mode(target, None)
    }

    /// Like [`AtomicFile::create`], with Unix permission bits (e.g. 0o600 for private keys).
    pub fn create_with_mode(
        target: &Path,
        mode: Option<u32>,
    ) -> Result<AtomicFile, WriteFileError> {
        let err = |source| WriteFileError {
            path: target.to_path_buf(),
            source,
        };
        if target.is_dir() {
            return Err(err(std::io::Error::other(
                "it is a directory; give a file path",
            )));
        }
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
        let file = opts.open(&tmp).map_err(err)?;
        Ok(AtomicFile {
            target: target.to_path_buf(),
            tmp,
            out: BufWriter::with_capacity(1 << 20, file),
        })
    }

    pub fn writer(&mut self) -> &mut BufWriter<File> {
        &mut self.out
    }

    /// Flushes, syncs and renames into place.
    pub fn commit(mut self) -> Result<(), WriteFileError> {
        let target = self.target.clone();
        let err = |source| WriteFileError {
            path: target.clone(),
            source,
        };
        self.out.flush().map_err(err)?;
        self.out.get_ref().sync_all().map_err(err)?;
        std::fs::rename(&self.tmp, &self.target).map_err(err)?;
        if let Some(dir) = self.target.parent().filter(|p| !p.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        self.tmp = PathBuf::new();
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

/// Writes `bytes` to `target` atomically.
pub fn write_atomic(target: &Path, bytes: &[u8]) -> Result<(), WriteFileError> {
    let mut f = AtomicFile::create(target)?;
    f.writer()
        .write_all(bytes)
        .map_err(|source| WriteFileError {
            path: target.to_path_buf(),
            source,
        })?;
    f.commit()
}

/// Like [`write_atomic`], readable and writable by the owner only (0600): trust store, signing
/// configuration, outbox exports.
pub fn write_atomic_private(target: &Path, bytes: &[u8]) -> Result<(), WriteFileError> {
    let mut f = AtomicFile::create_with_mode(target, Some(0o600))?;
    f.writer()
        .write_all(bytes)
        .map_err(|source| WriteFileError {
            path: target.to_path_buf(),
            source,
        })?;
    f.commit()
}

/// Opens `path` for reading only if it is a regular file. The open is non-blocking, so a FIFO or a
/// device cannot hang the caller before the type is known; the type comes from the open file
/// (`fstat`), so it cannot be swapped between the check and the read. Blocking mode is restored for
/// the reads that follow.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a FIFO, socket or device)"
        };
        return Err(std::io::Error::other(format!(
            "it is {what}; give a regular file"
        )));
    }
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: fcntl on a descriptor this function owns; no memory is passed.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
    }
    Ok(file)
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

/// Reads at most `cap` bytes from `reader`; more is an error that names the limit. Never pre-sizes
/// from a length the file claims.
pub fn read_capped(reader: impl std::io::Read, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    reader.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::other(format!(
            "it is larger than the {} limit",
            human_limit(cap)
        )));
    }
    Ok(bytes)
}

/// The next line (without its `\n`) of at most `cap` bytes; `None` at the end of the input. A longer
/// line is an error, read no further than the limit.
pub fn read_line_capped(
    reader: &mut impl std::io::BufRead,
    cap: u64,
) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::{BufRead, Read};
    let mut line = Vec::new();
    let n = reader
        .by_ref()
        .take(cap.saturating_add(1))
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if line.len() as u64 > cap {
        return Err(std::io::Error::other(format!(
            "the line is longer than the {} limit",
            human_limit(cap)
        )));
    }
    Ok(Some(line))
}

/// A regular file's bytes, at most `cap` of them.
pub fn read_regular_capped(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    read_capped(open_regular(path)?, cap)
}

/// `64 MiB`, `256 KiB`, ... for limits in messages.
pub fn human_limit(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// Largest payload file or JSONL line `jobs enqueue` reads.
pub const MAX_PAYLOAD_BYTES: u64 = 16 << 20;
/// Largest inclusion-proof file `chain verify-proof` reads.
pub const MAX_PROOF_BYTES: u64 = 16 << 20;
/// Largest trust store or signing configuration file.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn fifos_devices_and_long_inputs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(open_regular(&fifo)
            .unwrap_err()
            .to_string()
            .contains("FIFO"));
        assert!(open_regular(Path::new("/dev/zero")).is_err());
        assert!(refuse_non_regular(Path::new("/dev/null")).is_err());
        assert!(refuse_non_regular(&dir.path().join("new")).is_ok());
        use std::io::Read;
        let err = read_capped(std::io::repeat(0).take(100), 10).unwrap_err();
        assert!(err.to_string().contains("10 bytes limit"), "{err}");
    }
}
