//! The state machine of SPEC 11: states only move forward, persisted as watermark frames; an entry's
//! current state is the highest of its own byte and every watermark covering it.

use super::frame::{FrameState, Watermark};

/// The highest LSN each state's watermarks cover (index = state byte; PENDING covers nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Watermarks {
    covered: [u64; 5],
}

/// A watermark that would not move any entry forward, or covers frames that do not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatermarkError {
    #[error("a PENDING watermark moves nothing; give REGIONAL, GLOBAL, APPLIED or COMPACTED")]
    Pending,
    #[error("{state} watermark at LSN {lsn} covers frames not yet in the log (last LSN {last})")]
    Future {
        state: FrameState,
        lsn: u64,
        last: u64,
    },
    #[error("{state} already covers every frame up to LSN {covered}; watermarks only move forward (asked for {lsn})")]
    NotForward {
        state: FrameState,
        lsn: u64,
        covered: u64,
    },
}

impl Watermarks {
    /// Records a watermark (a lower one changes nothing: the state is the highest that applies).
    pub fn apply(&mut self, wm: Watermark) {
        let slot = &mut self.covered[wm.state.byte() as usize];
        *slot = (*slot).max(wm.lsn);
    }

    /// The highest LSN that has reached at least `state` through watermarks.
    pub fn covered(&self, state: FrameState) -> u64 {
        if state == FrameState::Pending {
            return u64::MAX;
        }
        self.covered[state.byte() as usize..]
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
    }

    /// The current state of the frame `lsn` whose own state byte is `own`.
    pub fn current(&self, own: FrameState, lsn: u64) -> FrameState {
        FrameState::ALL[1..]
            .iter()
            .copied()
            .filter(|&s| self.covered[s.byte() as usize] >= lsn)
            .fold(own, FrameState::max)
    }

    /// Checks that `wm` moves some entry forward and covers only frames up to `last_lsn`.
    pub fn check_forward(&self, wm: Watermark, last_lsn: u64) -> Result<(), WatermarkError> {
        if wm.state == FrameState::Pending {
            return Err(WatermarkError::Pending);
        }
        if wm.lsn > last_lsn {
            return Err(WatermarkError::Future {
                state: wm.state,
                lsn: wm.lsn,
                last: last_lsn,
            });
        }
        let covered = self.covered(wm.state);
        if wm.lsn <= covered {
            return Err(WatermarkError::NotForward {
                state: wm.state,
                lsn: wm.lsn,
                covered,
            });
        }
        Ok(())
    }

    /// `(state, covered LSN)` for every state above PENDING, as watermarks raised it.
    pub fn bands(&self) -> Vec<(FrameState, u64)> {
        FrameState::ALL[1..]
            .iter()
            .map(|&s| (s, self.covered(s)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FrameState::*;

    fn wm(state: FrameState, lsn: u64) -> Watermark {
        Watermark { state, lsn }
    }

    #[test]
    fn current_state_is_the_highest_covering_watermark_or_own_byte() {
        let mut w = Watermarks::default();
        w.apply(wm(Regional, 3));
        w.apply(wm(Global, 2));
        w.apply(wm(Applied, 1));
        assert_eq!(w.current(Pending, 1), Applied);
        assert_eq!(w.current(Pending, 2), Global);
        assert_eq!(w.current(Pending, 3), Regional);
        assert_eq!(w.current(Pending, 4), Pending);
        assert_eq!(w.current(Global, 4), Global);
        assert_eq!(w.current(Compacted, 1), Compacted);
        assert_eq!(w.covered(Regional), 3);
        assert_eq!(w.covered(Global), 2);
    }

    #[test]
    fn a_higher_state_implies_the_lower_ones() {
        let mut w = Watermarks::default();
        w.apply(wm(Applied, 5));
        assert_eq!(w.covered(Regional), 5);
        assert_eq!(w.current(Pending, 5), Applied);
    }

    #[test]
    fn watermarks_only_move_forward() {
        let mut w = Watermarks::default();
        w.apply(wm(Global, 4));
        assert_eq!(
            w.check_forward(wm(Regional, 3), 10),
            Err(WatermarkError::NotForward {
                state: Regional,
                lsn: 3,
                covered: 4
            })
        );
        assert!(w.check_forward(wm(Regional, 5), 10).is_ok());
        assert!(w.check_forward(wm(Applied, 1), 10).is_ok());
        assert!(matches!(
            w.check_forward(wm(Applied, 11), 10),
            Err(WatermarkError::Future { .. })
        ));
        assert_eq!(
            w.check_forward(wm(Pending, 1), 10),
            Err(WatermarkError::Pending)
        );
        w.apply(wm(Global, 2));
        assert_eq!(w.covered(Global), 4, "a lower watermark changes nothing");
    }
}
