//! HLC stamps of the frames the writer encodes: the wall clock is read once per batch, every frame
//! gets the next hybrid-logical timestamp (SPEC 11: HLCs strictly increase; the 16-bit logical
//! counter carries into the millisecond), and the HLC text spliced into event payloads is built
//! in a reused buffer without formatting machinery.

use super::frame::WalHlc;
use crate::core::hlc::{hlc_text, WallClock};
use std::sync::Arc;

/// The writer thread's clock for frame HLCs.
pub struct FrameStamp {
    wall: Arc<dyn WallClock>,
    node_hash: u64,
    node: String,
    /// Wall time read at the start of the batch.
    now: u64,
    last: (u64, u16),
    text: String,
}

impl FrameStamp {
    /// A clock for `node` continuing after `last` (the last HLC in the log, if any).
    pub fn new(wall: Arc<dyn WallClock>, node: &str, node_hash: u64, last: (u64, u16)) -> Self {
        FrameStamp {
            wall,
            node_hash,
            node: node.to_string(),
            now: 0,
            last,
            text: String::new(),
        }
    }

    /// Reads the wall clock for the frames of the next batch.
    pub fn begin_batch(&mut self) {
        self.now = self.wall.now_ms();
    }

    /// The next HLC: the batch's wall time if it is ahead of the last one, else the last one
    /// with the logical counter bumped (past 65535 it carries into the millisecond). `None` when
    /// it would not fit a frame (a physical time of 2^48 ms or more): the log's HLCs are spent.
    pub fn next(&mut self) -> Option<WalHlc> {
        let (p, l) = self.last;
        let next = if self.now > p {
            (self.now, 0)
        } else if l < u16::MAX {
            (p, l + 1)
        } else {
            (p.checked_add(1)?, 1)
        };
        let hlc = WalHlc::from_parts(next.0, next.1.into(), self.node_hash)?;
        self.last = next;
        Some(hlc)
    }

    /// The HLC text of `hlc` (`physical:logical:node`), valid until the next call.
    pub fn text(&mut self, hlc: WalHlc) -> &[u8] {
        hlc_text(hlc.physical, hlc.logical.into(), &self.node).set(&mut self.text);
        self.text.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hlc::{hlc_text, HlcClock};
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Fixed(Arc<AtomicU64>);
    impl WallClock for Fixed {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn stamps_follow_the_hlc_rule_and_carry_the_logical_counter() {
        let wall = Arc::new(AtomicU64::new(1_000));
        let mut s = FrameStamp::new(Arc::new(Fixed(wall.clone())), "n1", 7, (0, 0));
        s.begin_batch();
        let a = s.next().expect("fits");
        assert_eq!((a.physical, a.logical, a.node_hash), (1_000, 0, 7));
        let b = s.next().expect("fits");
        assert_eq!((b.physical, s.next().expect("fits").logical), (1_000, 2));
        wall.store(900, Ordering::SeqCst); // the wall clock went back: logical keeps counting
        s.begin_batch();
        assert_eq!((s.next().expect("fits").physical, s.last.1), (1_000, 3));
        s.last = (1_000, u16::MAX);
        let c = s.next().expect("fits");
        assert_eq!((c.physical, c.logical), (1_001, 1));
        wall.store(5_000, Ordering::SeqCst);
        s.begin_batch();
        let d = s.next().expect("fits");
        assert_eq!((d.physical, d.logical), (5_000, 0));
    }

    #[test]
    fn no_stamp_past_the_largest_frame_hlc() {
        let max = (1u64 << 48) - 1;
        let wall = Arc::new(AtomicU64::new(1_000));
        let mut s = FrameStamp::new(Arc::new(Fixed(wall.clone())), "n1", 7, (max, u16::MAX - 1));
        s.begin_batch();
        let last = s.next().expect("the largest HLC itself fits");
        assert_eq!((last.physical, last.logical), (max, u16::MAX));
        assert_eq!(s.next(), None, "2^48 ms does not fit a frame");
        assert_eq!(s.last, (max, u16::MAX), "a refused stamp changes nothing");
        // A wall clock past the range is refused too, not wrapped.
        let mut s = FrameStamp::new(Arc::new(Fixed(wall.clone())), "n1", 7, (0, 0));
        wall.store(1 << 48, Ordering::SeqCst);
        s.begin_batch();
        assert_eq!(s.next(), None);
    }

    #[test]
    fn text_matches_the_hlc_text_of_the_engine_clock() {
        let wall = Arc::new(AtomicU64::new(1_767_614_400_123));
        let mut s = FrameStamp::new(Arc::new(Fixed(wall.clone())), "gate-a", 1, (0, 0));
        let mut engine = HlcClock::with_wall("gate-a", Fixed(wall.clone())).expect("clock");
        for i in 0..5u64 {
            if i == 3 {
                wall.fetch_add(2, Ordering::SeqCst);
            }
            s.begin_batch();
            let h = s.next().expect("fits");
            let e = engine.tick();
            assert_eq!((h.physical, u32::from(h.logical)), (e.physical, e.logical));
            let want = hlc_text(h.physical, h.logical.into(), "gate-a").to_string();
            assert_eq!(s.text(h), want.as_bytes());
        }
    }
}
