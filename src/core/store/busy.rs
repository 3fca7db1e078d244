//! The store's one busy policy: how long store work waits for another process's lock, and a
//! cutoff that ends those waits early (a service that is stopping must not wait out
//! [`BUSY_TIMEOUT`] once per store access).
//!
//! Every SQLite connection of the store waits for a lock with [`on_busy`]: SQLite's own back-off
//! (1, 2, 5 ... 100 ms sleeps, [`BUSY_TIMEOUT`] in all), except that work run inside
//! [`with_cutoff`] also gives up once that [`BusyCutoff`] has passed, including a wait already in
//! progress (it looks at the cutoff before every sleep, at most 100 ms apart). SQLite's busy
//! handler is a plain function without a context, and it runs on the thread that is waiting, so
//! the cutoff is found through that thread: [`with_cutoff`] sets it for the work it runs.
//! PostgreSQL has no busy wait; a transaction begun under a cutoff sets its `lock_timeout` to what
//! is left of it.

use super::BUSY_TIMEOUT;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A moment after which store work run under it ([`with_cutoff`]) stops waiting for locks; shared
/// between the work and whoever decides (e.g. serve, when it is asked to stop). None at first.
#[derive(Debug)]
pub struct BusyCutoff {
    base: Instant,
    /// Milliseconds after `base`; `NEVER` while no cutoff is set.
    at_ms: AtomicU64,
}

const NEVER: u64 = u64::MAX;

impl Default for BusyCutoff {
    fn default() -> Self {
        BusyCutoff {
            base: Instant::now(),
            at_ms: AtomicU64::new(NEVER),
        }
    }
}

impl BusyCutoff {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_millis()).unwrap_or(NEVER - 1)
    }

    /// Waits in progress end at their next look (within 100 ms), later ones at once.
    pub fn give_up_now(&self) {
        self.at_ms.store(self.now_ms(), Ordering::Release);
    }

    /// Waits end `wait` from now (sooner or later than a cutoff set before).
    pub fn give_up_after(&self, wait: Duration) {
        let wait = u64::try_from(wait.as_millis()).unwrap_or(NEVER - 1);
        let at = self.now_ms().saturating_add(wait).min(NEVER - 1);
        self.at_ms.store(at, Ordering::Release);
    }

    /// How long waits may still last; `None` while no cutoff is set.
    pub fn remaining(&self) -> Option<Duration> {
        match self.at_ms.load(Ordering::Acquire) {
            NEVER => None,
            at => Some(Duration::from_millis(at.saturating_sub(self.now_ms()))),
        }
    }
}

thread_local! {
    static CUTOFF: RefCell<Option<Arc<BusyCutoff>>> = const { RefCell::new(None) };
}

/// Runs `f` with `cutoff` applying to every store wait `f` makes on this thread (nested calls: the
/// innermost cutoff applies until it returns).
pub fn with_cutoff<T>(cutoff: &Arc<BusyCutoff>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<BusyCutoff>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            let _ = CUTOFF.try_with(|c| *c.borrow_mut() = previous);
        }
    }
    let previous = CUTOFF.with(|c| c.replace(Some(cutoff.clone())));
    let _restore = Restore(previous);
    f()
}

/// What is left of the cutoff this thread runs under; `None` when there is none (or none set).
pub fn remaining() -> Option<Duration> {
    CUTOFF
        .try_with(|c| c.borrow().as_ref().and_then(|c| c.remaining()))
        .ok()
        .flatten()
}

/// Whether this thread's cutoff has passed: a busy answer now means "gave up early", not "stayed
/// locked for the whole busy timeout".
pub fn cut_off() -> bool {
    remaining().is_some_and(|r| r.is_zero())
}

/// Sets the store's busy policy on a SQLite connection (replacing any busy timeout).
pub fn install(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    conn.busy_handler(Some(on_busy))
}

/// SQLite's busy handler: `count` earlier calls for this lock. True: sleep done, try again.
fn on_busy(count: i32) -> bool {
    let Some(mut pause) = backoff(count, BUSY_TIMEOUT) else {
        return false;
    };
    if let Some(left) = remaining() {
        if left.is_zero() {
            return false;
        }
        pause = pause.min(left);
    }
    std::thread::sleep(pause);
    true
}

/// The pause before try `count + 1` under SQLite's own schedule (as `sqlite3_busy_timeout`), or
/// `None` once `timeout` has been slept in all.
fn backoff(count: i32, timeout: Duration) -> Option<Duration> {
    const DELAYS: [u64; 12] = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];
    const TOTALS: [u64; 12] = [0, 1, 3, 8, 18, 33, 53, 78, 103, 128, 178, 228];
    let count = usize::try_from(count).unwrap_or(0);
    let (delay, prior) = match DELAYS.get(count) {
        Some(&d) => (d, TOTALS[count]),
        None => (100, 228 + 100 * (count as u64 - 11)),
    };
    let timeout = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    let delay = delay.min(timeout.saturating_sub(prior));
    (delay > 0).then(|| Duration::from_millis(delay))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_back_off_sleeps_the_busy_timeout_in_all() {
        let mut slept = Duration::ZERO;
        let mut count = 0;
        while let Some(d) = backoff(count, BUSY_TIMEOUT) {
            assert!(d <= Duration::from_millis(100));
            slept += d;
            count += 1;
        }
        assert_eq!(slept, BUSY_TIMEOUT);
        assert_eq!(backoff(0, Duration::ZERO), None);
    }

    #[test]
    fn a_cutoff_applies_to_its_own_work_only() {
        let cutoff = Arc::new(BusyCutoff::default());
        assert_eq!(cutoff.remaining(), None);
        with_cutoff(&cutoff, || {
            assert_eq!(remaining(), None);
            cutoff.give_up_after(Duration::from_secs(60));
            assert!(remaining().is_some_and(|r| r > Duration::from_secs(50)));
            assert!(!cut_off());
            cutoff.give_up_now();
            assert!(cut_off());
            // Another thread runs under no cutoff.
            std::thread::scope(|s| s.spawn(|| assert!(!cut_off())).join().unwrap());
        });
        assert!(!cut_off());
    }

    /// A write waiting for another connection's lock gives up soon after the cutoff, the wait in
    /// progress included, and says that it gave up early.
    #[test]
    fn a_wait_in_progress_gives_up_at_the_cutoff() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut store = crate::core::store::Store::open(&path).unwrap();
        let other = rusqlite::Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let cutoff = Arc::new(BusyCutoff::default());
        let started = Instant::now();
        let err = std::thread::scope(|s| {
            let c = cutoff.clone();
            s.spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                c.give_up_now();
            });
            with_cutoff(&cutoff, || store.begin_write().map(drop).unwrap_err())
        });
        // Generous: the busy timeout is 10 s.
        assert!(started.elapsed() < Duration::from_secs(5), "{err}");
        assert!(
            matches!(
                err,
                super::super::StoreError::Busy {
                    cut_short: true,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("gave up waiting"), "{err}");
        other.execute_batch("ROLLBACK").unwrap();
        store.begin_write().unwrap().commit().unwrap();
    }
}
