//! Deterministic `.tgz` writing and bounded, flat `.tgz` reading (SPEC section 10).
//!
//! Writing: every tar header field is set explicitly (ustar, sorted names, mode 0644, uid/gid 0,
//! empty user and group names, mtime [`FIXED_MTIME`]) and the gzip header carries no name, mtime 0
//! and OS byte 255, so the same files always give the same bytes.
//!
//! Reading: only regular files with flat names (no `/`, `..`, absolute paths, links, devices or
//! extension headers), at most [`Limits::max_entries`] entries and [`Limits::max_expanded_bytes`]
//! decompressed bytes in all; sizes in headers are never trusted for allocation.

use flate2::read::GzDecoder;
use flate2::{Compression, GzBuilder};
use std::io::{self, Read, Write};

/// The mtime of every entry (Unix seconds): fixed so that archives are reproducible.
pub const FIXED_MTIME: u64 = 0;
/// Mode of every entry.
pub const FILE_MODE: u32 = 0o644;
/// Compression level of every archive (flate2's miniz_oxide backend).
pub const GZIP_LEVEL: u32 = 9;

/// Caps on what reading an archive may expand to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Decompressed bytes of the outer archive in all (the inner archive counts again as it
    /// expands).
    pub max_expanded_bytes: u64,
    /// Entries per archive.
    pub max_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_expanded_bytes: 4 << 30,
            max_entries: 16,
        }
    }
}

/// Why an archive could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{archive}: entry {index} has an unsafe name {name}: {why}; a portable export holds only flat file names")]
    UnsafeName {
        archive: String,
        index: usize,
        name: String,
        why: &'static str,
    },
    #[error("{archive}: entry {index} ({name}) is a {kind}, not a regular file; links, directories and devices are refused")]
    NotRegular {
        archive: String,
        index: usize,
        name: String,
        kind: String,
    },
    #[error("{archive}: more than {limit} entries; refused (a portable export holds at most a few files)")]
    TooManyEntries { archive: String, limit: usize },
    #[error("{archive}: expands past the limit of {limit} bytes; refused (an archive bomb or not a portable export)")]
    TooLarge { archive: String, limit: u64 },
    #[error("{archive}: entry {name} appears twice")]
    Duplicate { archive: String, name: String },
    #[error("{archive}: not a readable gzip/tar archive: {message}")]
    Corrupt { archive: String, message: String },
}

/// Writes a deterministic gzip-compressed tar of `files` (name, bytes); names are sorted bytewise.
pub fn write_tgz<W: Write>(out: W, files: &[(&str, &[u8])]) -> io::Result<W> {
    let mut sorted: Vec<&(&str, &[u8])> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let gz = GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(out, Compression::new(GZIP_LEVEL));
    let mut tar = tar::Builder::new(gz);
    for (name, bytes) in sorted {
        let mut h = tar::Header::new_ustar();
        h.set_path(name)?;
        h.set_size(bytes.len() as u64);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(FILE_MODE);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(FIXED_MTIME);
        h.set_username("")?;
        h.set_groupname("")?;
        h.set_device_major(0)?;
        h.set_device_minor(0)?;
        h.set_cksum();
        tar.append(&h, *bytes)?;
    }
    tar.into_inner()?.finish()
}

/// A deterministic `.tgz` of `files` in memory.
pub fn tgz_bytes(files: &[(&str, &[u8])]) -> io::Result<Vec<u8>> {
    write_tgz(Vec::new(), files)
}

/// Counts bytes read through it and fails once more than `limit` have passed.
pub struct Budget<R> {
    inner: R,
    used: u64,
    limit: u64,
}

impl<R: Read> Budget<R> {
    pub fn new(inner: R, limit: u64) -> Self {
        Budget {
            inner,
            used: 0,
            limit,
        }
    }
}

/// The error kind a [`Budget`] fails with (recognised by [`classify`]).
const OVER_BUDGET: &str = "expanded size limit exceeded";

impl<R: Read> Read for Budget<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.used += n as u64;
        if self.used > self.limit {
            return Err(io::Error::other(OVER_BUDGET));
        }
        Ok(n)
    }
}

/// One entry as seen by a [`visit_tgz`] callback.
pub struct EntryInfo<'a> {
    pub index: usize,
    pub name: &'a str,
    pub size: u64,
}

/// Reads a `.tgz` from `input`, calling `on_entry` with each regular file in archive order; the
/// callback reads the entry's bytes from the given reader (what it leaves unread is skipped).
/// `archive` names the archive in errors.
pub fn visit_tgz<R: Read>(
    input: R,
    archive: &str,
    limits: Limits,
    mut on_entry: impl FnMut(&EntryInfo<'_>, &mut dyn Read) -> Result<(), VisitError>,
) -> Result<(), VisitError> {
    let decoded = Budget::new(GzDecoder::new(input), limits.max_expanded_bytes);
    let mut tar = tar::Archive::new(decoded);
    let corrupt = |e: io::Error| classify(archive, limits, e);
    let mut seen = std::collections::BTreeSet::new();
    for (index, entry) in tar.entries().map_err(corrupt)?.enumerate() {
        if index >= limits.max_entries {
            return Err(ArchiveError::TooManyEntries {
                archive: archive.to_string(),
                limit: limits.max_entries,
            }
            .into());
        }
        let mut entry = entry.map_err(corrupt)?;
        let raw = entry.path_bytes().into_owned();
        let name = check_name(archive, index, &raw)?;
        let kind = entry.header().entry_type();
        if !kind.is_file() {
            return Err(ArchiveError::NotRegular {
                archive: archive.to_string(),
                index,
                name: crate::core::text::visible(&name).into_owned(),
                kind: format!("{kind:?}").to_lowercase(),
            }
            .into());
        }
        if !seen.insert(name.clone()) {
            return Err(ArchiveError::Duplicate {
                archive: archive.to_string(),
                name: crate::core::text::visible(&name).into_owned(),
            }
            .into());
        }
        let size = entry.header().size().map_err(corrupt)?;
        let info = EntryInfo {
            index,
            name: &name,
            size,
        };
        on_entry(&info, &mut entry).map_err(|e| match e {
            VisitError::Archive(a) => VisitError::Archive(a),
            VisitError::Io(io) => VisitError::Archive(classify(archive, limits, io)),
            other => other,
        })?;
    }
    Ok(())
}

/// Why a visit stopped: the archive itself, or the callback.
#[derive(Debug, thiserror::Error)]
pub enum VisitError {
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("{0}")]
    Io(#[from] io::Error),
    /// A refusal decided by the callback (its own message).
    #[error("{0}")]
    Refused(String),
}

fn classify(archive: &str, limits: Limits, e: io::Error) -> ArchiveError {
    // The budget error may arrive wrapped by tar's own messages: look through the chain text.
    if e.to_string().contains(OVER_BUDGET)
        || e.get_ref()
            .is_some_and(|inner| inner.to_string().contains(OVER_BUDGET))
    {
        return ArchiveError::TooLarge {
            archive: archive.to_string(),
            limit: limits.max_expanded_bytes,
        };
    }
    ArchiveError::Corrupt {
        archive: archive.to_string(),
        message: e.to_string(),
    }
}

/// A name is safe when it is one flat, printable UTF-8 file name.
fn check_name(archive: &str, index: usize, raw: &[u8]) -> Result<String, ArchiveError> {
    let unsafe_name = |why| ArchiveError::UnsafeName {
        archive: archive.to_string(),
        index,
        name: crate::core::text::visible_bytes(raw),
        why,
    };
    let name = std::str::from_utf8(raw).map_err(|_| unsafe_name("it is not UTF-8"))?;
    if name.is_empty() {
        return Err(unsafe_name("it is empty"));
    }
    if name.starts_with('/') || name.starts_with('\\') {
        return Err(unsafe_name("it is an absolute path"));
    }
    if name.split(['/', '\\']).any(|part| part == "..") {
        return Err(unsafe_name("it climbs out with .."));
    }
    if name.contains(['/', '\\']) || name == "." {
        return Err(unsafe_name("it names a directory path"));
    }
    if name.chars().any(|c| c.is_control()) {
        return Err(unsafe_name("it contains control characters"));
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(bytes: &[u8], limits: Limits) -> Result<Vec<(String, Vec<u8>)>, VisitError> {
        let mut out = Vec::new();
        visit_tgz(bytes, "t.tgz", limits, |e, r| {
            let mut v = Vec::new();
            r.read_to_end(&mut v)?;
            out.push((e.name.to_string(), v));
            Ok(())
        })?;
        Ok(out)
    }

    /// A raw tar header with an arbitrary name and type (what a hostile tool could write).
    fn raw_tgz(name: &[u8], kind: u8, data: &[u8]) -> Vec<u8> {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.as_old_mut().linkflag[0] = kind;
        h.set_cksum();
        let mut tar = tar::Builder::new(Vec::new());
        tar.append(&h, data).unwrap();
        let t = tar.into_inner().unwrap();
        let mut gz = GzBuilder::new().write(Vec::new(), Compression::fast());
        gz.write_all(&t).unwrap();
        gz.finish().unwrap()
    }

    #[test]
    fn same_files_same_bytes_whatever_the_order() {
        let a = tgz_bytes(&[("b.txt", b"2"), ("a.txt", b"1")]).unwrap();
        let b = tgz_bytes(&[("a.txt", b"1"), ("b.txt", b"2")]).unwrap();
        assert_eq!(a, b);
        // gzip header: magic, deflate, no flags, mtime 0, OS 255.
        assert_eq!(&a[..4], &[0x1f, 0x8b, 8, 0]);
        assert_eq!(&a[4..8], &[0, 0, 0, 0]);
        assert_eq!(a[9], 255);
        let read = names(&a, Limits::default()).unwrap();
        assert_eq!(read[0], ("a.txt".to_string(), b"1".to_vec()));
        assert_eq!(read[1], ("b.txt".to_string(), b"2".to_vec()));
    }

    #[test]
    fn headers_are_fixed() {
        let bytes = tgz_bytes(&[("a.txt", b"1")]).unwrap();
        let mut tar = tar::Archive::new(GzDecoder::new(&bytes[..]));
        let e = tar.entries().unwrap().next().unwrap().unwrap();
        let h = e.header();
        assert_eq!(h.mtime().unwrap(), FIXED_MTIME);
        assert_eq!(h.uid().unwrap(), 0);
        assert_eq!(h.gid().unwrap(), 0);
        assert_eq!(h.mode().unwrap(), FILE_MODE);
        assert_eq!(h.username().unwrap(), Some(""));
        assert_eq!(h.groupname().unwrap(), Some(""));
        assert!(h.as_ustar().is_some());
    }

    #[test]
    fn escaping_and_odd_entries_are_refused() {
        for (name, kind, what) in [
            (&b"../evil"[..], b'0', "climbs out"),
            (b"/etc/passwd", b'0', "absolute"),
            (b"dir/file", b'0', "directory path"),
            (b"link", b'2', "symlink"),
            (b"hard", b'1', "link"),
            (b"d", b'5', "directory"),
        ] {
            let err = names(&raw_tgz(name, kind, b"x"), Limits::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains(what), "{err}");
        }
    }

    #[test]
    fn expansion_and_entry_caps() {
        let big = vec![0u8; 2 << 20];
        let bomb = tgz_bytes(&[("zeros", &big)]).unwrap();
        assert!(bomb.len() < 16 << 10);
        let limits = Limits {
            max_expanded_bytes: 1 << 20,
            max_entries: 16,
        };
        let err = names(&bomb, limits).unwrap_err();
        assert!(
            matches!(err, VisitError::Archive(ArchiveError::TooLarge { .. })),
            "{err}"
        );
        let many: Vec<(String, Vec<u8>)> = (0..5).map(|i| (format!("f{i}"), vec![b'x'])).collect();
        let refs: Vec<(&str, &[u8])> = many
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .collect();
        let err = names(
            &tgz_bytes(&refs).unwrap(),
            Limits {
                max_expanded_bytes: 1 << 20,
                max_entries: 4,
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("more than 4 entries"), "{err}");
        assert!(names(b"not gzip at all", Limits::default()).is_err());
    }
}
