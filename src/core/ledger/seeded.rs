//! Seeded hashing for maps keyed by attacker-chosen text (job ids read from WALs).
//!
//! foldhash (fast on short keys, which job ids are) keyed by randomness from the operating system:
//! std's `RandomState` draws its keys from the OS, and hashing nothing with it yields an
//! unpredictable 64-bit value. One value seeds the process-wide shared seed, another each map.

use foldhash::quality::SeedableRandomState;
use foldhash::SharedSeed;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// 64 random bits (through std's OS-seeded SipHash keys).
fn os_random() -> u64 {
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// A `BuildHasher` for maps whose keys an attacker chooses: foldhash with OS-random seeds.
#[derive(Clone, Debug)]
pub struct SeededState(SeedableRandomState);

impl Default for SeededState {
    fn default() -> Self {
        static SHARED: OnceLock<SharedSeed> = OnceLock::new();
        let shared = SHARED.get_or_init(|| SharedSeed::from_u64(os_random()));
        SeededState(SeedableRandomState::with_seed(os_random(), shared))
    }
}

impl BuildHasher for SeededState {
    type Hasher = <SeedableRandomState as BuildHasher>::Hasher;
    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_maps_hash_the_same_key_differently() {
        let (a, b) = (SeededState::default(), SeededState::default());
        let key = "use1-1700000000000-gate1-00001";
        assert_eq!(a.hash_one(key), a.clone().hash_one(key));
        // Per-map seeds are random: equal hashes would be a 2^-64 accident.
        assert_ne!(a.hash_one(key), b.hash_one(key));
    }
}
