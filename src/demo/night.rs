//! The demo's offline sites worked through the night: a simulated wall clock for the engine's HLC.

use crate::core::hlc::WallClock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A shared simulated wall clock that starts some hours ago and moves 20 to 110 seconds per
/// reading, so HLC swimlanes and tHlc columns show a realistic spread instead of one millisecond.
/// (The engine's clock is the real one; only the wall it reads is simulated, exactly as a test
/// clock would be.) Clones share one position.
#[derive(Clone)]
pub struct OfflineNight {
    next_ms: Arc<AtomicU64>,
}

impl OfflineNight {
    pub fn starting_hours_ago(hours: u64) -> Self {
        let start = crate::core::hlc::unix_ms_now().saturating_sub(hours * 3_600_000);
        OfflineNight {
            next_ms: Arc::new(AtomicU64::new(start)),
        }
    }
}

impl WallClock for OfflineNight {
    fn now_ms(&self) -> u64 {
        let now = self.next_ms.load(Ordering::Relaxed);
        // A deterministic stride between 20 and 110 seconds.
        let stride = 20_000 + (now / 7 % 90) * 1_000 + now % 997;
        self.next_ms.store(now + stride, Ordering::Relaxed);
        now
    }
}
