//! Finding the next CRC-valid frame after damage (SPEC 11 recovery: "no CRC-valid frame starts at
//! any offset after X" decides torn tail against refusal), in time linear in the bytes searched.
//!
//! Checking every offset by hashing its would-be frame costs the frame's length per offset: on
//! crafted garbage whose every offset announces a long frame that is quadratic. Instead one pass
//! keeps the CRC of every prefix of the searched bytes (a ring of the last
//! [`MAX_FRAME_LEN`] + 1 of them) and derives the CRC of any range from two prefixes, since
//! CRC-32 is linear: `crc(A || B) = crc(A) * x^(8|B|) xor crc(B)` (zlib's `crc32_combine`), so
//! `crc(B) = P(end) xor shift(P(start), |B|)`. Each offset then costs one table step and at most
//! one multiplication modulo the polynomial, whatever its frame length.

use super::frame::{FRAME_HEADER_LEN, MAX_FRAME_LEN};
use super::reader::ReadAt;
use std::io;

/// The reflected CRC-32 (IEEE) polynomial.
const POLY: u32 = 0xEDB8_8320;

const fn table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static TABLE: [u32; 256] = table();

/// `a * b` modulo the CRC polynomial, both in the reflected representation (zlib's `multmodp`).
fn multmodp(a: u32, mut b: u32) -> u32 {
    if a == 0 {
        return 0;
    }
    let mut m = 1u32 << 31;
    let mut p = 0u32;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                return p;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
}

/// `x^(8n)` modulo the polynomial for n = 0, 1, ...: shifts a CRC past n bytes.
struct Shifts(Vec<u32>);

impl Shifts {
    fn new() -> Shifts {
        Shifts(vec![1 << 31])
    }
    fn of(&mut self, n: usize) -> u32 {
        while self.0.len() <= n {
            let last = self.0[self.0.len() - 1];
            self.0.push(multmodp(last, 1 << 23));
        }
        self.0[n]
    }
}

/// Bytes of a source read in sequential windows.
struct Cursor {
    buf: Vec<u8>,
    start: u64,
}

impl Cursor {
    const WINDOW: u64 = 1 << 20;

    fn bytes<S: ReadAt>(&mut self, src: &S, at: u64, n: usize, len: u64) -> io::Result<&[u8]> {
        if at < self.start || at + n as u64 > self.start + self.buf.len() as u64 {
            let want = (len - at).min(Self::WINDOW.max(n as u64)) as usize;
            self.buf.resize(want, 0);
            src.read_exact_at(&mut self.buf, at)?;
            self.start = at;
        }
        let i = (at - self.start) as usize;
        Ok(&self.buf[i..i + n])
    }
}

/// CRCs of the prefixes `base..i` for the last `mask + 1` positions i.
struct Prefixes {
    ring: Vec<u32>,
    mask: u64,
    base: u64,
    /// Positions up to `next - 1` are in the ring.
    next: u64,
    register: u32,
    bytes: Cursor,
}

impl Prefixes {
    fn new(base: u64, span: u64) -> Prefixes {
        let size = (span.min(MAX_FRAME_LEN) + 1).next_power_of_two();
        let mut ring = vec![0u32; size as usize];
        ring[(base & (size - 1)) as usize] = 0; // the empty prefix
        Prefixes {
            ring,
            mask: size - 1,
            base,
            next: base + 1,
            register: !0,
            bytes: Cursor {
                buf: Vec::new(),
                start: 0,
            },
        }
    }

    /// Extends the ring to position `upto` (at most `mask` positions ahead of the oldest needed).
    fn advance_to<S: ReadAt>(
        &mut self,
        src: &S,
        upto: u64,
        len: u64,
        work: &mut u64,
    ) -> io::Result<()> {
        while self.next <= upto {
            let pos = self.next - 1;
            let n = ((upto - pos) as usize).min(Cursor::WINDOW as usize);
            let chunk = self.bytes.bytes(src, pos, n, len)?;
            for &b in chunk {
                self.register =
                    TABLE[((self.register ^ b as u32) & 0xff) as usize] ^ (self.register >> 8);
                self.ring[(self.next & self.mask) as usize] = !self.register;
                self.next += 1;
            }
            *work += n as u64;
        }
        Ok(())
    }

    /// CRC of bytes `base..i` (i must be in the ring).
    fn at(&self, i: u64) -> u32 {
        debug_assert!(i >= self.base && i < self.next && self.next - i <= self.mask + 1);
        self.ring[(i & self.mask) as usize]
    }
}

/// The first offset after `after` where a frame with a matching CRC starts (`total_len` from 34
/// to [`MAX_FRAME_LEN`], within `len`), if any. `work` counts the bytes hashed plus the offsets
/// examined: at most twice the bytes after `after`.
pub fn next_crc_valid_frame<S: ReadAt>(
    src: &S,
    after: u64,
    len: u64,
    work: &mut u64,
) -> io::Result<Option<u64>> {
    let header = FRAME_HEADER_LEN as u64;
    let base = after + 1;
    if base + header > len {
        return Ok(None);
    }
    let mut prefixes = Prefixes::new(base, len - base);
    let mut heads = Cursor {
        buf: Vec::new(),
        start: 0,
    };
    let mut shifts = Shifts::new();
    let mut o = base;
    while o + header <= len {
        *work += 1;
        let h = heads.bytes(src, o, 8, len)?;
        let stored = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        let total = u32::from_be_bytes([h[4], h[5], h[6], h[7]]) as u64;
        if (header..=MAX_FRAME_LEN).contains(&total) && total <= len - o {
            prefixes.advance_to(src, o + total, len, work)?;
            let body = total - 4;
            let crc =
                prefixes.at(o + total) ^ multmodp(shifts.of(body as usize), prefixes.at(o + 4));
            if crc == stored {
                return Ok(Some(o));
            }
        }
        o += 1;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::wal::frame::{encode_frame_into, EventType, FrameState, FrameType, WalHlc};
    use rand::{Rng, SeedableRng};

    /// The direct search: hash every candidate frame in full (what recovery did before).
    fn naive(bytes: &[u8], after: u64, work: &mut u64) -> Option<u64> {
        let len = bytes.len() as u64;
        let mut o = after + 1;
        while o + FRAME_HEADER_LEN as u64 <= len {
            let i = o as usize;
            let total =
                u32::from_be_bytes([bytes[i + 4], bytes[i + 5], bytes[i + 6], bytes[i + 7]]) as u64;
            if (FRAME_HEADER_LEN as u64..=MAX_FRAME_LEN).contains(&total) && total <= len - o {
                *work += total;
                let stored =
                    u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
                if crc32fast::hash(&bytes[i + 4..i + total as usize]) == stored {
                    return Some(o);
                }
            }
            *work += 1;
            o += 1;
        }
        None
    }

    fn search(bytes: &[u8], after: u64) -> (Option<u64>, u64) {
        let mut work = 0;
        let src = std::io::Cursor::new(bytes.to_vec());
        let found = next_crc_valid_frame(&src, after, bytes.len() as u64, &mut work).unwrap();
        (found, work)
    }

    #[test]
    fn prefix_arithmetic_gives_the_crc_of_any_range() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let data: Vec<u8> = (0..5000).map(|_| rng.gen()).collect();
        let mut shifts = Shifts::new();
        for _ in 0..200 {
            let s = rng.gen_range(0..data.len());
            let e = rng.gen_range(s..=data.len());
            let p = |i: usize| crc32fast::hash(&data[..i]);
            let got = p(e) ^ multmodp(shifts.of(e - s), p(s));
            assert_eq!(got, crc32fast::hash(&data[s..e]), "{s}..{e}");
        }
    }

    #[test]
    fn finds_the_same_frame_as_the_direct_search() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for round in 0..300 {
            let mut bytes: Vec<u8> = (0..rng.gen_range(0..600)).map(|_| rng.gen()).collect();
            if round % 2 == 0 {
                let mut frame = Vec::new();
                let payload: Vec<u8> = (0..rng.gen_range(0..80)).map(|_| rng.gen()).collect();
                let hlc = WalHlc {
                    physical: 5,
                    logical: 0,
                    node_hash: 9,
                };
                encode_frame_into(
                    &mut frame,
                    3,
                    hlc,
                    FrameState::Pending,
                    FrameType::Event(EventType::JobFailed),
                    &[payload.as_slice()],
                );
                let at = rng.gen_range(0..=bytes.len());
                bytes.splice(at..at, frame);
            }
            let after = rng.gen_range(0..bytes.len().max(1)) as u64;
            let mut w = 0;
            assert_eq!(
                search(&bytes, after).0,
                naive(&bytes, after, &mut w),
                "round {round}"
            );
        }
    }

    /// Garbage whose every offset announces a frame of about `len / 2` bytes that fits.
    fn crafted(len: usize) -> Vec<u8> {
        let t = (len / 2) as u32;
        let mut b = vec![0u8; len];
        for (i, x) in b.iter_mut().enumerate() {
            // Every offset reads total_len = t, t+0x010101.. within a few percent: all plausible.
            *x = t.to_be_bytes()[i % 4];
        }
        b
    }

    #[test]
    fn crafted_garbage_costs_linear_work() {
        for len in [16 << 10, 64 << 10, 256 << 10] {
            let bytes = crafted(len);
            let (found, work) = search(&bytes, 0);
            assert_eq!(found, None);
            assert!(work <= 2 * len as u64, "{len} bytes: {work} units of work");
            if len == 16 << 10 {
                let mut naive_work = 0;
                assert_eq!(naive(&bytes, 0, &mut naive_work), None);
                assert!(
                    naive_work > 100 * len as u64,
                    "the direct search is quadratic here: {naive_work}"
                );
            }
        }
    }
}
