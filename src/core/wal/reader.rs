//! Reading a WAL: frames in order from the file header on, stopping at the first frame that fails
//! (SPEC 11), without allocating per frame. Works on a file (positioned reads, so it is safe while a
//! writer appends) or on bytes in memory.

use super::frame::{Frame, FrameState, FrameType};
use super::frame::{RawHeader, FILE_HEADER_LEN, FRAME_HEADER_LEN, MAGIC, MAX_FRAME_LEN, VERSION};
use std::fs::File;
use std::io;
use std::path::Path;

/// Bytes read per window when walking a file.
const WINDOW: usize = 8 << 20;

/// Positioned reads from a file or a byte buffer.
pub trait ReadAt {
    /// Length in bytes, fixed when the reader is made.
    fn size(&self) -> io::Result<u64>;
    /// Fills `buf` from `offset`; the range is within [`ReadAt::size`].
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

impl ReadAt for File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
}

/// Reads through a borrowed source (a handle kept open by someone else).
impl<T: ReadAt + ?Sized> ReadAt for &T {
    fn size(&self) -> io::Result<u64> {
        (**self).size()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_exact_at(buf, offset)
    }
}

impl<T: AsRef<[u8]>> ReadAt for std::io::Cursor<T> {
    fn size(&self) -> io::Result<u64> {
        Ok(self.get_ref().as_ref().len() as u64)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let data = self.get_ref().as_ref();
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let src = data
            .get(start..start + buf.len())
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// Why reading stopped at an offset (SPEC 11's failure list, plus the plain end of the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The file is shorter than its header, or the magic or version is wrong.
    BadHeader(String),
    /// `total_len` is below the 34-byte header.
    TooShort {
        total_len: u32,
    },
    /// `total_len` is above the largest frame (34 + 1 MiB payload) any writer makes.
    TooLong {
        total_len: u32,
    },
    /// The frame (or its header) runs past the end of the file.
    PastEnd {
        total_len: Option<u32>,
        available: u64,
    },
    /// The stored CRC does not match the CRC of bytes 4..total_len.
    Crc {
        stored: u32,
        computed: u32,
    },
    /// The LSN is not the previous frame's + 1 (or is 0).
    Lsn {
        expected: Option<u64>,
        found: u64,
    },
    UnknownState(u8),
    UnknownType(u8),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::BadHeader(d) => write!(f, "bad file header: {d}"),
            Damage::TooShort { total_len } => {
                write!(f, "total_len {total_len} is below the 34-byte frame header")
            }
            Damage::TooLong { total_len } => write!(
                f,
                "total_len {total_len} is above the largest frame ({MAX_FRAME_LEN} bytes)"
            ),
            Damage::PastEnd {
                total_len: Some(t),
                available,
            } => write!(
                f,
                "total_len {t} runs past the end of the file ({available} bytes left)"
            ),
            Damage::PastEnd {
                total_len: None,
                available,
            } => write!(f, "only {available} bytes left, fewer than a frame header"),
            Damage::Crc { stored, computed } => {
                write!(
                    f,
                    "CRC mismatch: stored {stored:08x}, computed {computed:08x}"
                )
            }
            Damage::Lsn {
                expected: Some(e),
                found,
            } => write!(f, "LSN {found} where {e} was expected"),
            Damage::Lsn {
                expected: None,
                found,
            } => write!(f, "LSN {found} is not a valid first LSN"),
            Damage::UnknownState(b) => write!(f, "unknown state byte {b}"),
            Damage::UnknownType(b) => write!(f, "unknown type byte {b}"),
        }
    }
}

impl Damage {
    /// A short machine-readable name of the reason.
    pub fn kind(&self) -> &'static str {
        match self {
            Damage::BadHeader(_) => "bad-header",
            Damage::TooShort { .. } => "too-short",
            Damage::TooLong { .. } => "too-long",
            Damage::PastEnd { .. } => "past-end",
            Damage::Crc { .. } => "crc-mismatch",
            Damage::Lsn { .. } => "lsn-gap",
            Damage::UnknownState(_) => "unknown-state",
            Damage::UnknownType(_) => "unknown-type",
        }
    }
}

/// Where and why reading stopped: `damage` is `None` at the exact end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    pub offset: u64,
    pub damage: Option<Damage>,
}

/// A frame borrowed from the reader's window.
pub type FrameRef<'a> = Frame<&'a [u8]>;

impl FrameRef<'_> {
    pub fn to_frame(&self) -> Frame {
        Frame {
            offset: self.offset,
            crc32: self.crc32,
            lsn: self.lsn,
            hlc: self.hlc,
            state: self.state,
            frame_type: self.frame_type,
            payload: self.payload.to_vec(),
        }
    }
}

/// Reads the frames of one WAL in order; see the module docs.
pub struct WalReader<S: ReadAt = File> {
    src: S,
    file_len: u64,
    buf: Vec<u8>,
    buf_start: u64,
    pos: u64,
    expected_lsn: Option<u64>,
    stop: Option<Stop>,
    /// A writer had the log open (held its lock) when this reader opened it: its newest bytes may
    /// still be changing.
    live: bool,
    /// Bytes read at once when the reader moves on ([`WINDOW`], or less to read only a little).
    read_ahead: usize,
}

impl WalReader<File> {
    /// Opens a WAL file read-only; a FIFO, device or directory is refused (not waited on).
    pub fn open(path: &Path) -> io::Result<WalReader<File>> {
        WalReader::open_reading_ahead(path, WINDOW)
    }

    /// [`WalReader::open`] reading `read_ahead` bytes at a time (at least a whole frame): a look
    /// at the first frames of a log without reading megabytes of it.
    pub fn open_reading_ahead(path: &Path, read_ahead: usize) -> io::Result<WalReader<File>> {
        let file = crate::core::file_input::open_regular(path)?;
        let live = writer_holds(&file);
        let mut r = WalReader::new_reading_ahead(file, read_ahead)?;
        r.live = live;
        Ok(r)
    }
}

/// Whether another open file description holds the log's writer lock (see
/// [`crate::core::file_lock::held_exclusively`]; a lock that cannot be asked counts as none).
fn writer_holds(file: &File) -> bool {
    crate::core::file_lock::held_exclusively(file).unwrap_or(false)
}

impl WalReader<std::io::Cursor<Vec<u8>>> {
    /// Reads a WAL held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> io::Result<WalReader<std::io::Cursor<Vec<u8>>>> {
        WalReader::new(std::io::Cursor::new(bytes))
    }
}

impl<S: ReadAt> WalReader<S> {
    /// Whether a writer held the log when it was opened ([`WalReader::open`]).
    pub fn live(&self) -> bool {
        self.live
    }

    /// Checks the file header; a bad header makes the reader stop at offset 0.
    pub fn new(src: S) -> io::Result<WalReader<S>> {
        WalReader::new_reading_ahead(src, WINDOW)
    }

    fn new_reading_ahead(src: S, read_ahead: usize) -> io::Result<WalReader<S>> {
        let file_len = src.size()?;
        let mut r = WalReader {
            src,
            file_len,
            buf: Vec::new(),
            buf_start: 0,
            pos: FILE_HEADER_LEN,
            expected_lsn: None,
            stop: None,
            live: false,
            read_ahead,
        };
        if let Some(reason) = r.header_problem()? {
            r.pos = 0;
            r.stop = Some(Stop {
                offset: 0,
                damage: Some(Damage::BadHeader(reason)),
            });
        }
        Ok(r)
    }

    /// A reader that starts at `offset`, a frame boundary the caller already vouched for (a
    /// block index), expecting LSN `expected_lsn` there; the file header is still checked.
    pub fn resume(src: S, offset: u64, expected_lsn: u64) -> io::Result<WalReader<S>> {
        let mut r = WalReader::new(src)?;
        if r.stop.is_none() {
            if !(FILE_HEADER_LEN..=r.file_len).contains(&offset) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("offset {offset} is outside the log"),
                ));
            }
            r.pos = offset;
            r.expected_lsn = Some(expected_lsn);
        }
        Ok(r)
    }

    fn header_problem(&mut self) -> io::Result<Option<String>> {
        if self.file_len < FILE_HEADER_LEN {
            return Ok(Some(format!(
                "the file has {} bytes, fewer than the 8-byte header",
                self.file_len
            )));
        }
        let h = self.window(0, FILE_HEADER_LEN as usize)?;
        if &h[..4] != MAGIC {
            return Ok(Some(format!(
                "magic is \"{}\", not \"ALWL\"",
                crate::core::text::visible_bytes(&h[..4])
            )));
        }
        let version = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
        if version != VERSION {
            return Ok(Some(format!("version {version} is not supported (only 1)")));
        }
        Ok(None)
    }

    /// Length of the source when the reader was made.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// The source, for a second look after reading (recovery scans the tail with it).
    pub fn source(&self) -> &S {
        &self.src
    }

    /// Where reading stopped, once [`WalReader::next_frame`] has returned `None`.
    pub fn stop(&self) -> Option<&Stop> {
        self.stop.as_ref()
    }

    /// Makes `len` bytes from `offset` available in the window and returns them.
    fn window(&mut self, offset: u64, len: usize) -> io::Result<&[u8]> {
        let have_end = self.buf_start + self.buf.len() as u64;
        if offset < self.buf_start || offset + len as u64 > have_end {
            let want = (self.file_len - offset).min(self.read_ahead.max(len) as u64) as usize;
            self.buf.resize(want, 0);
            self.src.read_exact_at(&mut self.buf, offset)?;
            self.buf_start = offset;
        }
        let s = (offset - self.buf_start) as usize;
        Ok(&self.buf[s..s + len])
    }

    fn halt(&mut self, damage: Option<Damage>) {
        self.stop = Some(Stop {
            offset: self.pos,
            damage,
        });
    }

    /// The next valid frame, or `None` when reading stopped (see [`WalReader::stop`]).
    pub fn next_frame(&mut self) -> io::Result<Option<FrameRef<'_>>> {
        let Some((offset, raw)) = self.advance()? else {
            return Ok(None);
        };
        let bytes = self.window(offset, raw.total_len as usize)?;
        Ok(Some(FrameRef {
            offset,
            crc32: raw.crc32,
            lsn: raw.lsn,
            hlc: raw.hlc,
            state: FrameState::from_byte(raw.state).unwrap_or(FrameState::Pending),
            frame_type: FrameType::from_byte(raw.frame_type).unwrap_or(FrameType::Watermark),
            payload: &bytes[FRAME_HEADER_LEN..],
        }))
    }

    /// Checks the frame at the read position and moves past it: its offset and header, or `None`
    /// when reading stopped (now or before).
    fn advance(&mut self) -> io::Result<Option<(u64, RawHeader)>> {
        if self.stop.is_some() {
            return Ok(None);
        }
        match self.check_frame()? {
            Err(damage) => {
                self.halt(damage);
                Ok(None)
            }
            Ok(raw) => {
                let offset = self.pos;
                self.pos += raw.total_len as u64;
                self.expected_lsn = Some(raw.lsn + 1);
                Ok(Some((offset, raw)))
            }
        }
    }

    /// The next valid frame as its bytes (header included) with its offset and LSN, or `None`
    /// when reading stopped.
    pub fn next_raw(&mut self) -> io::Result<Option<(u64, u64, &[u8])>> {
        let Some((offset, raw)) = self.advance()? else {
            return Ok(None);
        };
        let bytes = self.window(offset, raw.total_len as usize)?;
        Ok(Some((offset, raw.lsn, bytes)))
    }

    /// Checks the frame at `self.pos`: `Err(None)` is the exact end of the file.
    fn check_frame(&mut self) -> io::Result<Result<RawHeader, Option<Damage>>> {
        let available = self.file_len - self.pos;
        if available == 0 {
            return Ok(Err(None));
        }
        if available < 8 {
            return Ok(Err(Some(Damage::PastEnd {
                total_len: None,
                available,
            })));
        }
        let w = self.window(self.pos, 8)?;
        let total_len = u32::from_be_bytes([w[4], w[5], w[6], w[7]]);
        if total_len < FRAME_HEADER_LEN as u32 {
            return Ok(Err(Some(Damage::TooShort { total_len })));
        }
        if total_len as u64 > MAX_FRAME_LEN {
            return Ok(Err(Some(Damage::TooLong { total_len })));
        }
        if total_len as u64 > available {
            return Ok(Err(Some(Damage::PastEnd {
                total_len: Some(total_len),
                available,
            })));
        }
        let bytes = self.window(self.pos, total_len as usize)?;
        let mut head = [0u8; FRAME_HEADER_LEN];
        head.copy_from_slice(&bytes[..FRAME_HEADER_LEN]);
        let raw = RawHeader::parse(&head);
        let computed = crc32fast::hash(&bytes[4..]);
        if computed != raw.crc32 {
            return Ok(Err(Some(Damage::Crc {
                stored: raw.crc32,
                computed,
            })));
        }
        if FrameState::from_byte(raw.state).is_none() {
            return Ok(Err(Some(Damage::UnknownState(raw.state))));
        }
        if FrameType::from_byte(raw.frame_type).is_none() {
            return Ok(Err(Some(Damage::UnknownType(raw.frame_type))));
        }
        let lsn_ok = match self.expected_lsn {
            Some(e) => raw.lsn == e,
            None => raw.lsn >= 1,
        };
        if !lsn_ok {
            return Ok(Err(Some(Damage::Lsn {
                expected: self.expected_lsn,
                found: raw.lsn,
            })));
        }
        Ok(Ok(raw))
    }
}

impl<S: ReadAt> Iterator for WalReader<S> {
    type Item = io::Result<Frame>;
    fn next(&mut self) -> Option<io::Result<Frame>> {
        match self.next_frame() {
            Ok(Some(f)) => Some(Ok(f.to_frame())),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// Whether every byte is zero (compared against a zero block: memcmp speed).
pub fn is_zero(bytes: &[u8]) -> bool {
    static ZEROS: [u8; 4096] = [0; 4096];
    bytes.chunks(ZEROS.len()).all(|c| c == &ZEROS[..c.len()])
}

/// Whether every byte of `src` from `offset` to its end is zero.
pub fn all_zero_from<S: ReadAt>(src: &S, offset: u64, len: u64) -> io::Result<bool> {
    let mut buf = vec![0u8; WINDOW.min((len - offset) as usize)];
    let mut at = offset;
    while at < len {
        let n = ((len - at) as usize).min(buf.len());
        src.read_exact_at(&mut buf[..n], at)?;
        if !is_zero(&buf[..n]) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

/// Reads every valid frame of a file (owned), with where reading stopped.
pub fn read_frames(path: &Path) -> io::Result<(Vec<Frame>, Stop)> {
    let mut r = WalReader::open(path)?;
    let mut frames = Vec::new();
    while let Some(f) = r.next_frame()? {
        frames.push(f.to_frame());
    }
    let stop = r.stop().cloned().unwrap_or(Stop {
        offset: r.file_len(),
        damage: None,
    });
    Ok((frames, stop))
}
