//! What a chain's break diagnosis keeps of each entry (its link, HLC and job id), needed only to
//! classify the breaks of a chain that has any. The first [`MEMORY_RECORDS`] stay in memory; past
//! them records go to an unnamed temporary file in chunks, so verifying an intact chain of any
//! length holds a bounded amount in memory (a 10 M-entry log kept them all: ~800 MB). Reading one
//! back is a positioned read; finding which entry carries a link is one sequential pass.

use crate::core::chain::Digest32;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Records kept in memory before the rest go to the temporary file (about 15 MiB).
pub const MEMORY_RECORDS: usize = 256 * 1024;
/// Records written to the file at a time.
const CHUNK: usize = 16 * 1024;
/// Bytes of one record in the file: presence flags, link, HLC (physical, logical), job id.
const LEN: usize = 1 + 32 + 8 + 4 + 16;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkRecord {
    pub link: Option<Digest32>,
    pub hlc: Option<(u64, u32)>,
    pub job: Option<[u8; 16]>,
}

impl LinkRecord {
    fn encode(&self, out: &mut Vec<u8>) {
        let flags = u8::from(self.link.is_some())
            | u8::from(self.hlc.is_some()) << 1
            | u8::from(self.job.is_some()) << 2;
        out.push(flags);
        out.extend_from_slice(&self.link.unwrap_or_default());
        let (p, l) = self.hlc.unwrap_or_default();
        out.extend_from_slice(&p.to_le_bytes());
        out.extend_from_slice(&l.to_le_bytes());
        out.extend_from_slice(&self.job.unwrap_or_default());
    }

    fn decode(b: &[u8]) -> LinkRecord {
        let flags = b[0];
        let link: Digest32 = b[1..33].try_into().unwrap_or_default();
        let p = u64::from_le_bytes(b[33..41].try_into().unwrap_or_default());
        let l = u32::from_le_bytes(b[41..45].try_into().unwrap_or_default());
        let job: [u8; 16] = b[45..61].try_into().unwrap_or_default();
        LinkRecord {
            link: (flags & 1 != 0).then_some(link),
            hlc: (flags & 2 != 0).then_some((p, l)),
            job: (flags & 4 != 0).then_some(job),
        }
    }
}

/// Every record of one chain, in order: `head` in memory, then `in_file` in the temporary file,
/// then `tail` in memory (the next chunk, or everything after the file failed).
pub struct LinkRecords {
    limit: usize,
    head: Vec<LinkRecord>,
    file: Option<File>,
    /// The temporary file could not be made or written: the rest stays in memory.
    file_failed: bool,
    in_file: usize,
    tail: Vec<LinkRecord>,
}

impl LinkRecords {
    /// Keeps `limit` records in memory before using the file.
    pub fn new(limit: usize) -> Self {
        LinkRecords {
            limit,
            head: Vec::new(),
            file: None,
            file_failed: false,
            in_file: 0,
            tail: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.head.len() + self.in_file + self.tail.len()
    }

    pub fn push(&mut self, r: LinkRecord) {
        if self.head.len() < self.limit {
            self.head.push(r);
            return;
        }
        self.tail.push(r);
        if self.tail.len() >= CHUNK && !self.file_failed {
            self.spill();
        }
    }

    /// Appends `tail` to the file (made on first use); on an error keeps it in memory from then on.
    fn spill(&mut self) {
        let file = match &self.file {
            Some(f) => f,
            None => match tempfile::tempfile() {
                Ok(f) => self.file.insert(f),
                Err(e) => return self.give_up(e),
            },
        };
        let mut buf = Vec::with_capacity(self.tail.len() * LEN);
        for r in &self.tail {
            r.encode(&mut buf);
        }
        match file.write_all_at(&buf, (self.in_file * LEN) as u64) {
            Ok(()) => {
                self.in_file += self.tail.len();
                self.tail.clear();
            }
            Err(e) => self.give_up(e),
        }
    }

    fn give_up(&mut self, e: std::io::Error) {
        tracing::warn!(error = %e, "chain diagnosis: temporary file unusable, keeping link records in memory");
        self.file_failed = true;
    }

    /// The record at `i` (`None` past the end, or if the temporary file cannot be read back).
    pub fn get(&self, i: usize) -> Option<LinkRecord> {
        if let Some(r) = self.head.get(i) {
            return Some(*r);
        }
        let j = i - self.head.len();
        if j >= self.in_file {
            return self.tail.get(j - self.in_file).copied();
        }
        let mut b = [0u8; LEN];
        let file = self.file.as_ref()?;
        match file.read_exact_at(&mut b, (j * LEN) as u64) {
            Ok(()) => Some(LinkRecord::decode(&b)),
            Err(e) => {
                tracing::error!(error = %e, "chain diagnosis: reading back a link record failed");
                None
            }
        }
    }

    /// Calls `f` with every record in order until it returns false.
    fn scan(&self, mut f: impl FnMut(usize, &LinkRecord) -> bool) {
        for (i, r) in self.head.iter().enumerate() {
            if !f(i, r) {
                return;
            }
        }
        let mut i = self.head.len();
        if let Some(file) = &self.file {
            let mut buf = vec![0u8; CHUNK * LEN];
            let mut done = 0;
            while done < self.in_file {
                let n = (self.in_file - done).min(CHUNK);
                let bytes = &mut buf[..n * LEN];
                if let Err(e) = file.read_exact_at(bytes, (done * LEN) as u64) {
                    tracing::error!(error = %e, "chain diagnosis: reading back link records failed");
                    return;
                }
                for rec in bytes.chunks_exact(LEN) {
                    if !f(i, &LinkRecord::decode(rec)) {
                        return;
                    }
                    i += 1;
                }
                done += n;
            }
        }
        for r in &self.tail {
            if !f(i, r) {
                return;
            }
            i += 1;
        }
    }

    /// For each of `wanted`, the first entry whose stored link it is (one pass).
    pub fn positions_of(
        &self,
        wanted: impl IntoIterator<Item = Digest32>,
    ) -> HashMap<Digest32, usize> {
        let mut want: HashMap<Digest32, Option<usize>> =
            wanted.into_iter().map(|d| (d, None)).collect();
        let mut left = want.len();
        if left > 0 {
            self.scan(|i, r| {
                if let Some(slot @ None) = r.link.as_ref().and_then(|l| want.get_mut(l)) {
                    *slot = Some(i);
                    left -= 1;
                }
                left > 0
            });
        }
        want.into_iter()
            .filter_map(|(d, i)| i.map(|i| (d, i)))
            .collect()
    }

    /// The first entry whose HLC is `hlc`.
    pub fn position_of_hlc(&self, hlc: (u64, u32)) -> Option<usize> {
        let mut found = None;
        self.scan(|i, r| {
            if r.hlc == Some(hlc) {
                found = Some(i);
            }
            found.is_none()
        });
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: usize) -> LinkRecord {
        let d = crate::core::chain::sha256(&i.to_le_bytes());
        LinkRecord {
            link: (i % 7 != 3).then_some(d),
            hlc: (i % 5 != 1).then_some((i as u64 * 3, i as u32 % 4)),
            job: (i % 11 != 2).then(|| d[..16].try_into().expect("16")),
        }
    }

    #[test]
    fn records_read_back_the_same_from_memory_and_file() {
        for limit in [0, 5, 100_000] {
            let mut r = LinkRecords::new(limit);
            let n = 3 * CHUNK + 17;
            for i in 0..n {
                r.push(rec(i));
            }
            assert_eq!(r.len(), n);
            for i in [0, 1, 4, 5, 6, CHUNK, 2 * CHUNK + 3, n - 1] {
                assert_eq!(r.get(i), Some(rec(i)), "limit {limit}, {i}");
            }
            assert_eq!(r.get(n), None);
            let mut seen = 0;
            r.scan(|i, got| {
                assert_eq!(*got, rec(i));
                seen += 1;
                true
            });
            assert_eq!(seen, n);
            let wanted = [rec(4).link, rec(n - 1).link, rec(CHUNK + 1).link];
            let at = r.positions_of(wanted.iter().flatten().copied());
            assert_eq!(at.get(&rec(4).link.expect("l")), Some(&4));
            assert_eq!(at.get(&rec(n - 1).link.expect("l")), Some(&(n - 1)));
            assert_eq!(r.positions_of([[9u8; 32]]).len(), 0);
            assert_eq!(r.position_of_hlc((3 * 9, 1)), Some(9));
            assert_eq!(r.position_of_hlc((1, 9)), None);
        }
    }

    #[test]
    fn the_first_of_repeated_links_is_found() {
        let mut r = LinkRecords::new(2);
        let same = LinkRecord {
            link: Some([7; 32]),
            ..LinkRecord::default()
        };
        for _ in 0..CHUNK + 5 {
            r.push(LinkRecord::default());
        }
        r.push(same);
        r.push(same);
        let at = r.positions_of([[7; 32]]);
        assert_eq!(at.get(&[7; 32]), Some(&(CHUNK + 5)));
    }
}
