//! Reading inputs safely: regular files only (a FIFO or device cannot hang the reader), sizes
//! capped and never pre-sized from what a file claims, and a byte count for progress displays.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Fills as much of `buf` as `file` has from `offset` (positioned reads, retried when
/// interrupted); returns how many bytes were read, fewer than `buf.len()` only at the file's end.
pub fn read_up_to_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Opens `path` for reading only if it is a regular file. The open is non-blocking, so a FIFO or a
/// device cannot hang the caller before the type is known; the type comes from the open file
/// (`fstat`), so it cannot be swapped between the check and the read. Blocking mode is restored for
/// the reads that follow. A non-regular file is an `InvalidInput` error that says what it is.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    open_regular_with(path, &mut opts)
}

/// [`open_regular`] with the caller's options (e.g. read and write for a log the caller appends
/// to): the same non-blocking open and `fstat` check, so a FIFO or device is refused, not waited on.
/// The options' custom flags are replaced by `O_NONBLOCK` for the open.
pub fn open_regular_with(path: &Path, opts: &mut std::fs::OpenOptions) -> std::io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = match opts.open(path) {
        // Opening a directory for writing fails before the check below could name it.
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "it is a directory; give a regular file",
            ))
        }
        other => other?,
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a FIFO, socket or device)"
        };
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is {what}; give a regular file"),
        ));
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

/// Reads at most `cap` bytes from `reader`; more is a `FileTooLarge` error that names the limit.
/// Never pre-sizes from a length the file claims.
pub fn read_capped(reader: impl std::io::Read, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    reader.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("it is larger than the {} limit", human_limit(cap)),
        ));
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
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("the line is longer than the {} limit", human_limit(cap)),
        ));
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
/// Most jobs one `jobs enqueue --jsonl` call takes (they are enqueued in one transaction and held
/// in memory until then): an endless stream on stdin is refused, not read until memory runs out.
pub const MAX_JSONL_JOBS: usize = 1_000_000;
/// Most bytes one `jobs enqueue --jsonl` call reads (every line, blank ones included).
pub const MAX_JSONL_BYTES: u64 = 256 << 20;
/// Most lines, blank ones included, one `jobs enqueue --jsonl` call reads (an endless stream of
/// empty lines ends here, in seconds, not after hundreds of millions of them).
pub const MAX_JSONL_LINES: usize = 4 * MAX_JSONL_JOBS;
/// Largest inclusion-proof file `chain verify-proof` reads.
pub const MAX_PROOF_BYTES: u64 = 16 << 20;
/// Largest trust store or signing configuration file.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// A reader that adds every byte it reads to a shared counter (verify and import progress).
pub struct ProgressReader<'a, R> {
    inner: R,
    counter: Option<&'a AtomicU64>,
}

impl<'a, R> ProgressReader<'a, R> {
    /// Counts into `counter` when one is given.
    pub fn new(inner: R, counter: Option<&'a AtomicU64>) -> Self {
        ProgressReader { inner, counter }
    }
}

impl<R: std::io::Read> std::io::Read for ProgressReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(c) = self.counter {
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(n)
    }
}

/// Makes a FIFO at `path` (tests of what every opener does with one).
#[cfg(all(test, unix))]
pub(crate) fn make_fifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("a path without NUL");
    // SAFETY: mkfifo reads the NUL-terminated path it is given and nothing else.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn fifos_devices_and_long_inputs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        make_fifo(&fifo);
        assert!(open_regular(&fifo)
            .unwrap_err()
            .to_string()
            .contains("FIFO"));
        let dev = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(dev.kind(), std::io::ErrorKind::InvalidInput);
        assert!(dev.to_string().contains("not a regular file"), "{dev}");
        // Opened for writing too, a FIFO is refused without waiting for a reader.
        let mut rw = std::fs::OpenOptions::new();
        rw.read(true).write(true);
        assert!(open_regular_with(&fifo, &mut rw)
            .unwrap_err()
            .to_string()
            .contains("FIFO"));
        use std::io::Read;
        let err = read_capped(std::io::repeat(0).take(100), 10).unwrap_err();
        assert!(err.to_string().contains("10 bytes limit"), "{err}");
        assert_eq!(err.kind(), std::io::ErrorKind::FileTooLarge);
    }

    #[test]
    fn the_progress_reader_counts_every_byte_read() {
        use std::io::Read;
        let counter = AtomicU64::new(0);
        let mut out = Vec::new();
        ProgressReader::new(&b"twelve bytes"[..], Some(&counter))
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, b"twelve bytes");
        assert_eq!(counter.load(Ordering::Relaxed), 12);
    }
}
