//! Recovery (SPEC 11): read frames from the header on; at the first offset X where a frame fails,
//! a zero tail is the clean end, a tail with no CRC-valid frame after X is torn (copied beside the
//! log, then cut), and anything else is refused naming X.

use super::error::WalError;
use super::frame::WalHlc;
use super::reader::{all_zero_from, Damage, FrameRef, ReadAt, WalReader};
use super::resync::next_crc_valid_frame;
use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

/// What recovery finds at the end of the valid frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The frames end at the end of the file, or only zeros (preallocated space) follow.
    Clean,
    /// Bytes from the offset on are a torn write: no CRC-valid frame follows; they are cut.
    TornTail,
    /// Damage followed by a valid frame (or a bad file header): the log is not opened.
    Refused,
}

impl Outcome {
    /// The SPEC name: `clean`, `torn-tail`, `refused`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Clean => "clean",
            Outcome::TornTail => "torn-tail",
            Outcome::Refused => "refused",
        }
    }
}

/// The result of reading a log to its end (and, after [`recover`], what was done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    pub outcome: Outcome,
    /// X: where the valid frames end, for torn-tail and refused (None when clean).
    pub offset: Option<u64>,
    /// Where the valid frames end (X, or the file end when clean without zeros).
    pub end: u64,
    pub file_len: u64,
    pub valid_frames: u64,
    /// Why the frame at `end` failed (None at the exact end of the file).
    pub damage: Option<Damage>,
    /// Clean because only zeros follow `end` (and there are some).
    pub zero_tail: bool,
    /// For a refusal: the first offset after X where a CRC-valid frame starts.
    pub next_valid_frame: Option<u64>,
    /// Bytes from X to the end of the file that a torn-tail recovery cuts.
    pub cut_bytes: Option<u64>,
    pub first_lsn: Option<u64>,
    pub last_lsn: Option<u64>,
    pub last_hlc: Option<WalHlc>,
    /// Where the torn tail was saved (set by [`recover`] when it cut one).
    pub saved_tail: Option<PathBuf>,
}

/// Reads every frame (handing each to `visit`) and classifies the end.
pub fn scan<S: ReadAt>(
    mut reader: WalReader<S>,
    mut visit: impl FnMut(&FrameRef<'_>),
) -> io::Result<Recovery> {
    let mut seen = Seen::default();
    while let Some(f) = reader.next_frame()? {
        seen.frame(f.lsn, f.hlc);
        visit(&f);
    }
    classify(&reader, seen)
}

/// [`scan`] handing each frame's bytes (header included) with its offset and LSN.
pub fn scan_raw<S: ReadAt>(
    mut reader: WalReader<S>,
    mut visit: impl FnMut(u64, u64, &[u8]),
) -> io::Result<Recovery> {
    let mut seen = Seen::default();
    while let Some((offset, lsn, bytes)) = reader.next_raw()? {
        let mut hlc = [0u8; 16];
        hlc.copy_from_slice(&bytes[16..32]);
        seen.frame(lsn, WalHlc::from_bytes(&hlc));
        visit(offset, lsn, bytes);
    }
    classify(&reader, seen)
}

/// What a scan saw of the valid frames.
#[derive(Default)]
struct Seen {
    valid: u64,
    first_lsn: Option<u64>,
    last: Option<(u64, WalHlc)>,
}

impl Seen {
    fn frame(&mut self, lsn: u64, hlc: WalHlc) {
        self.valid += 1;
        self.first_lsn.get_or_insert(lsn);
        self.last = Some((lsn, hlc));
    }
}

/// Classifies where the reader stopped (SPEC 11: clean end, torn tail, refused).
fn classify<S: ReadAt>(reader: &WalReader<S>, seen: Seen) -> io::Result<Recovery> {
    let file_len = reader.file_len();
    let stop = reader.stop().cloned().unwrap_or(super::reader::Stop {
        offset: file_len,
        damage: None,
    });
    let x = stop.offset;
    let mut r = Recovery {
        outcome: Outcome::Clean,
        offset: None,
        end: x,
        file_len,
        valid_frames: seen.valid,
        damage: stop.damage.clone(),
        zero_tail: false,
        next_valid_frame: None,
        cut_bytes: None,
        first_lsn: seen.first_lsn,
        last_lsn: seen.last.map(|l| l.0),
        last_hlc: seen.last.map(|l| l.1),
        saved_tail: None,
    };
    // A log being appended to while it is read (a live log: `wal inspect`, the console, anti-
    // entropy): the frame at `x` was still zeros, or half written, when it was read, and is whole
    // now. `x` is where this reading's picture of the log ends, not damage.
    // Only while a writer holds the log (a closed log's bytes do not change), and only what
    // reading a frame before or while it is written looks like (zeros, a frame cut short, a CRC
    // over half of it); the frame is checked afresh in full.
    let racing = reader.live()
        && matches!(
            stop.damage,
            Some(Damage::TooShort { .. } | Damage::PastEnd { .. } | Damage::Crc { .. })
        );
    if racing && frame_now_whole_at(reader.source(), x, file_len, seen.last.map(|l| l.0))? {
        r.damage = None;
        return Ok(r);
    }
    match &stop.damage {
        None => {}
        Some(Damage::BadHeader(_)) => {
            r.outcome = Outcome::Refused;
            r.offset = Some(0);
        }
        Some(_) if all_zero_from(reader.source(), x, file_len)? => r.zero_tail = true,
        // A writer copying a batch in: the bytes after `x` can land before those at `x`, and a
        // writer preempted in the middle of its copy leaves a frame cut short for a while.
        Some(_) if racing && settles_whole(reader.source(), x, file_len, &seen)? => {
            r.damage = None;
        }
        Some(_) => match next_crc_valid_frame(reader.source(), x, file_len, &mut 0)? {
            Some(next) => {
                r.outcome = Outcome::Refused;
                r.offset = Some(x);
                r.next_valid_frame = Some(next);
            }
            None => {
                r.outcome = Outcome::TornTail;
                r.offset = Some(x);
                r.cut_bytes = Some(file_len - x);
            }
        },
    }
    Ok(r)
}

/// How long a reader of a live log waits for a frame a writer is still copying in. A write of
/// one batch takes microseconds, but on a loaded machine the writer can be preempted in the
/// middle of it for many milliseconds (20 ms was seen to be too short at a load of 4 on 2 cores).
const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether the frame at `x` becomes whole within [`SETTLE_WAIT`] (checked every millisecond).
fn settles_whole<S: ReadAt>(src: &S, x: u64, len: u64, seen: &Seen) -> io::Result<bool> {
    let deadline = std::time::Instant::now() + SETTLE_WAIT;
    while std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
        if frame_now_whole_at(src, x, len, seen.last.map(|l| l.0))? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether a whole, CRC-valid frame with the next LSN (`last` + 1) is at `x` now.
fn frame_now_whole_at<S: ReadAt>(src: &S, x: u64, len: u64, last: Option<u64>) -> io::Result<bool> {
    use super::frame::{frame_crc, RawHeader, FRAME_HEADER_LEN, MAX_FRAME_LEN};
    let header = FRAME_HEADER_LEN as u64;
    if x + header > len {
        return Ok(false);
    }
    let mut h = [0u8; FRAME_HEADER_LEN];
    src.read_exact_at(&mut h, x)?;
    let raw = RawHeader::parse(&h);
    let total = u64::from(raw.total_len);
    if !(header..=MAX_FRAME_LEN).contains(&total) || total > len - x {
        return Ok(false);
    }
    if raw.lsn != last.map_or(1, |l| l + 1) {
        return Ok(false);
    }
    let mut frame = vec![0u8; total as usize];
    src.read_exact_at(&mut frame, x)?;
    Ok(frame_crc(&frame) == raw.crc32)
}

/// What recovery would do to the log at `path`, without changing it.
pub fn examine(path: &Path) -> Result<Recovery, WalError> {
    examine_counted(path, &std::sync::atomic::AtomicU64::new(0))
}

/// [`examine`], publishing in `read` how far it has read (bytes, for a progress display).
pub fn examine_counted(
    path: &Path,
    read: &std::sync::atomic::AtomicU64,
) -> Result<Recovery, WalError> {
    let reader = WalReader::open(path).map_err(|e| WalError::io("open", path, e))?;
    scan_raw(reader, |offset, _, frame| {
        read.store(
            offset + frame.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        )
    })
    .map_err(|e| WalError::io("read", path, e))
}

/// Recovers the log at `path` in place: a torn tail is copied beside the log and cut; damage
/// followed by valid frames is refused. The caller must hold the log exclusively.
pub fn recover(path: &Path) -> Result<Recovery, WalError> {
    recover_with(path, |_| {})
}

/// [`recover`] of a log no writer may have open: takes the log's writer lock first and is refused
/// with [`WalError::Locked`] while a writer holds it (a live log's newest frames, written while
/// they were being read, would otherwise look like a torn tail and be cut). `wal recover` and the
/// console's recover run this.
pub fn recover_exclusive(path: &Path) -> Result<Recovery, WalError> {
    let file = crate::core::file_input::open_regular_with(
        path,
        std::fs::OpenOptions::new().read(true).write(true),
    )
    .map_err(|e| WalError::io("open", path, e))?;
    super::file::lock_exclusive(&file, path)?;
    let r = recover(path);
    drop(file);
    r
}

/// [`recover`], handing every valid frame to `visit`.
pub fn recover_with(path: &Path, visit: impl FnMut(&FrameRef<'_>)) -> Result<Recovery, WalError> {
    let reader = WalReader::open(path).map_err(|e| WalError::io("open", path, e))?;
    let mut r = scan(reader, visit).map_err(|e| WalError::io("read", path, e))?;
    match r.outcome {
        Outcome::Clean => Ok(r),
        Outcome::Refused => Err(refusal(path, &r)),
        Outcome::TornTail => {
            let x = r.end;
            r.saved_tail = Some(save_tail(path, x).map_err(|e| tail_not_saved(path, x, e))?);
            cut(path, x)?;
            tracing::warn!(path = %path.display(), offset = x, cut = ?r.cut_bytes, "WAL torn tail cut");
            Ok(r)
        }
    }
}

/// Why a torn tail could not be saved, said so the operator knows the log is untouched (the cut
/// only follows a durable copy) and what to do about it.
fn tail_not_saved(path: &Path, x: u64, e: WalError) -> WalError {
    WalError::Invalid {
        path: path.to_path_buf(),
        message: format!(
            "the torn tail at offset {x} could not be saved beside the log ({e}); nothing was \
             cut and the log is unchanged. Make its directory writable with free space (or \
             copy the log to a directory that is) and run `airlock wal recover` again"
        ),
    }
}

/// The error that refuses a damaged log, naming the offset and the valid frame that follows.
pub fn refusal(path: &Path, r: &Recovery) -> WalError {
    WalError::Refused {
        path: path.to_path_buf(),
        offset: r.offset.unwrap_or(r.end),
        reason: r
            .damage
            .as_ref()
            .map(|d| d.to_string())
            .unwrap_or_else(|| "damaged frame".into()),
        next_valid: r.next_valid_frame,
    }
}

/// The name of the file a torn tail at `offset` is saved in: `<log>.torn-at-<offset>`.
pub fn torn_tail_path(log: &Path, offset: u64) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".torn-at-{offset}"));
    log.with_file_name(name)
}

/// Copies the torn bytes from `x` on beside the log, byte for byte, and syncs the copy and
/// directory: everything up to the end of the frame its header at `x` declares (all of it up to
/// the end of the file when that header is not whole), and any byte that is not zero after that;
/// only the preallocated zeros past both are left out. Streams in 1 MiB pieces: a torn tail is
/// never loaded whole.
fn save_tail(path: &Path, x: u64) -> Result<PathBuf, WalError> {
    use std::os::unix::fs::FileExt;
    let file =
        crate::core::file_input::open_regular(path).map_err(|e| WalError::io("open", path, e))?;
    let len = file
        .metadata()
        .map_err(|e| WalError::io("stat", path, e))?
        .len();
    let mut buf = vec![0u8; (1usize << 20).min((len - x) as usize)];
    let read = |buf: &mut [u8], at: u64| {
        FileExt::read_exact_at(&file, buf, at).map_err(|e| WalError::io("read", path, e))
    };
    // The torn frame's own extent: zeros inside it are its bytes (a length field, a zero byte of
    // the payload), not preallocation.
    let header_len = super::frame::FRAME_HEADER_LEN as u64;
    let mut keep_end = if len - x < header_len {
        len
    } else {
        let mut h = [0u8; super::frame::FRAME_HEADER_LEN];
        read(&mut h, x)?;
        let declared = u64::from(super::frame::RawHeader::parse(&h).total_len);
        len.min(x + declared.max(header_len))
    };
    let mut at = keep_end;
    while at < len {
        let n = ((len - at) as usize).min(buf.len());
        read(&mut buf[..n], at)?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b != 0) {
            keep_end = at + i as u64 + 1;
        }
        at += n as u64;
    }
    let target = free_tail_name(path, x);
    let mut out = crate::core::file_output::AtomicFile::create_like(&target, path)
        .map_err(|e| WalError::io("create", &target, e.source))?;
    let mut at = x;
    while at < keep_end {
        let n = ((keep_end - at) as usize).min(buf.len());
        read(&mut buf[..n], at)?;
        io::Write::write_all(out.writer(), &buf[..n])
            .map_err(|e| WalError::io("write", &target, e))?;
        at += n as u64;
    }
    out.commit()
        .map_err(|e| WalError::io("write", &target, e.source))?;
    Ok(target)
}

/// `<log>.torn-at-X`, or `<log>.torn-at-X.N` when an earlier recovery already saved one there.
fn free_tail_name(path: &Path, x: u64) -> PathBuf {
    let first = torn_tail_path(path, x);
    let mut target = first.clone();
    let mut n = 1;
    while target.exists() {
        n += 1;
        let mut name = first.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".{n}"));
        target = first.with_file_name(name);
    }
    target
}

/// Truncates the log to `x` bytes and syncs it.
fn cut(path: &Path, x: u64) -> Result<(), WalError> {
    let f = crate::core::file_input::open_regular_with(path, OpenOptions::new().write(true))
        .map_err(|e| WalError::io("open", path, e))?;
    f.set_len(x)
        .map_err(|e| WalError::io("truncate", path, e))?;
    f.sync_all().map_err(|e| WalError::io("fsync", path, e))
}
