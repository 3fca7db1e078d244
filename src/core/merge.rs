//! The merge plan (SPEC section 7): a pure function from verified inputs and the tenant's existing
//! jobs to the order in which entries join the tenant chain, the duplicates to drop and the
//! conflicts that stop the import.
//!
//! Rules:
//! 1. every entry of every input, sorted by `(physical, logical, nodeId, jobId)`; entries equal in
//!    all four (the same entry exported in two bundles) are ordered by `(bundleId, manifestDigest,
//!    log, index)` so the result never depends on the order the inputs were given in;
//! 2. the first entry of each jobId in that order is kept, unless the tenant chain already holds the
//!    job: then it is a duplicate of the chain entry;
//! 3. a later entry of the same jobId with the same payloadHash is a duplicate; with a different
//!    payloadHash it is a conflict. Every distinct payload of a conflicting job is listed once, in
//!    merge order, the chain's side first.

use crate::core::chain::Digest32;
use std::collections::HashMap;
use std::collections::HashSet;

/// One verified entry of an input, reduced to what the merge decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeEntry {
    pub physical: u64,
    pub logical: u32,
    /// Index into the input's `nodes`.
    pub node: u32,
    pub job_id: [u8; 16],
    pub payload_hash: Digest32,
    /// Position of the log in its bundle, and of the entry in its log (tie-breakers, provenance).
    pub log: u32,
    pub index: u32,
}

/// One input bundle.
#[derive(Debug, Clone, Copy)]
pub struct MergeInput<'a> {
    pub bundle_id: &'a str,
    pub manifest_digest: &'a str,
    /// Node ids referenced by `MergeEntry::node`.
    pub nodes: &'a [String],
    pub entries: &'a [MergeEntry],
}

/// An entry of an input: `inputs[input].entries[pos]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryAt {
    pub input: u32,
    pub pos: u32,
}

/// What a duplicate duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuplicateOf {
    /// An entry kept from the inputs of this merge.
    Input(EntryAt),
    /// A job already in the tenant chain.
    Chain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duplicate {
    pub entry: EntryAt,
    pub of: DuplicateOf,
}

/// One side of a conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictSide {
    Input(EntryAt),
    Chain { payload_hash: Digest32 },
}

/// A jobId with more than one payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub job_id: [u8; 16],
    /// One side per distinct payloadHash (the chain's first when it holds the job).
    pub sides: Vec<ConflictSide>,
}

/// The merge plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergePlan {
    /// Entries to append, in chain order.
    pub merged: Vec<EntryAt>,
    pub duplicates: Vec<Duplicate>,
    pub conflicts: Vec<Conflict>,
}

/// A map keyed by job id. Job ids are chosen by whoever wrote a bundle, so the map uses std's
/// randomly seeded SipHash (never an unseeded or invertible hash that crafted ids could flood).
pub type JobMap<V> = HashMap<[u8; 16], V>;

/// Plans a merge. `existing` maps the tenant chain's job ids (at least those occurring in the inputs)
/// to their payloadHash.
pub fn plan_merge(inputs: &[MergeInput<'_>], existing: &JobMap<Digest32>) -> MergePlan {
    // Global ranks make the sort key plain integers: node ids bytewise, inputs by (bundleId, digest).
    let mut node_names: Vec<&str> = inputs
        .iter()
        .flat_map(|i| i.nodes.iter().map(String::as_str))
        .collect();
    node_names.sort_unstable();
    node_names.dedup();
    let node_rank: Vec<Vec<u32>> = inputs
        .iter()
        .map(|i| {
            i.nodes
                .iter()
                .map(|n| node_names.binary_search(&n.as_str()).expect("collected") as u32)
                .collect()
        })
        .collect();
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by(|&a, &b| {
        (inputs[a].bundle_id, inputs[a].manifest_digest, a).cmp(&(
            inputs[b].bundle_id,
            inputs[b].manifest_digest,
            b,
        ))
    });
    let mut input_rank = vec![0u32; inputs.len()];
    for (rank, &i) in order.iter().enumerate() {
        input_rank[i] = rank as u32;
    }
    type Key = (u64, u32, u32, [u8; 16], u32, u32, u32, EntryAt);
    let total: usize = inputs.iter().map(|i| i.entries.len()).sum();
    let mut keys: Vec<Key> = Vec::with_capacity(total);
    for (ii, input) in inputs.iter().enumerate() {
        for (pos, e) in input.entries.iter().enumerate() {
            keys.push((
                e.physical,
                e.logical,
                node_rank[ii][e.node as usize],
                e.job_id,
                input_rank[ii],
                e.log,
                e.index,
                EntryAt {
                    input: ii as u32,
                    pos: pos as u32,
                },
            ));
        }
    }
    keys.sort_unstable();

    enum First {
        Kept(EntryAt, Digest32),
        Chain(Digest32),
    }
    let mut first: JobMap<(First, Option<usize>)> = JobMap::default();
    // (job, payloadHash) pairs already listed as a side of a conflict: linear in the repeats.
    let mut sided: HashSet<([u8; 16], Digest32)> = HashSet::new();
    first.reserve(total);
    let mut plan = MergePlan {
        merged: Vec::with_capacity(total),
        ..MergePlan::default()
    };
    let entry = |at: EntryAt| &inputs[at.input as usize].entries[at.pos as usize];
    for k in &keys {
        let at = k.7;
        let e = entry(at);
        match first.get_mut(&e.job_id) {
            None => match existing.get(&e.job_id) {
                Some(chain_hash) if *chain_hash == e.payload_hash => {
                    plan.duplicates.push(Duplicate {
                        entry: at,
                        of: DuplicateOf::Chain,
                    });
                    first.insert(e.job_id, (First::Chain(*chain_hash), None));
                }
                Some(chain_hash) => {
                    sided.insert((e.job_id, *chain_hash));
                    sided.insert((e.job_id, e.payload_hash));
                    plan.conflicts.push(Conflict {
                        job_id: e.job_id,
                        sides: vec![
                            ConflictSide::Chain {
                                payload_hash: *chain_hash,
                            },
                            ConflictSide::Input(at),
                        ],
                    });
                    first.insert(
                        e.job_id,
                        (First::Chain(*chain_hash), Some(plan.conflicts.len() - 1)),
                    );
                }
                None => {
                    plan.merged.push(at);
                    first.insert(e.job_id, (First::Kept(at, e.payload_hash), None));
                }
            },
            Some((f, conflict)) => {
                let (first_hash, of) = match f {
                    First::Kept(kept, h) => (*h, DuplicateOf::Input(*kept)),
                    First::Chain(h) => (*h, DuplicateOf::Chain),
                };
                if first_hash == e.payload_hash {
                    plan.duplicates.push(Duplicate { entry: at, of });
                    continue;
                }
                let ci = match conflict {
                    Some(ci) => *ci,
                    None => {
                        let side = match f {
                            First::Kept(kept, _) => ConflictSide::Input(*kept),
                            First::Chain(h) => ConflictSide::Chain { payload_hash: *h },
                        };
                        sided.insert((e.job_id, first_hash));
                        plan.conflicts.push(Conflict {
                            job_id: e.job_id,
                            sides: vec![side],
                        });
                        *conflict = Some(plan.conflicts.len() - 1);
                        plan.conflicts.len() - 1
                    }
                };
                if sided.insert((e.job_id, e.payload_hash)) {
                    plan.conflicts[ci].sides.push(ConflictSide::Input(at));
                }
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(physical: u64, node: u32, job: u8, hash: u8, index: u32) -> MergeEntry {
        MergeEntry {
            physical,
            logical: 0,
            node,
            job_id: [job; 16],
            payload_hash: [hash; 32],
            log: 0,
            index,
        }
    }

    #[test]
    fn job_maps_are_randomly_seeded() {
        use std::hash::BuildHasher;
        let id = [7u8; 16];
        let hashes: std::collections::HashSet<u64> = (0..8)
            .map(|_| JobMap::<()>::default().hasher().hash_one(id))
            .collect();
        assert!(hashes.len() > 1, "every map hashes an id the same way");
    }

    #[test]
    fn fifty_thousand_payloads_of_one_job_are_listed_once_each() {
        let nodes = vec!["a".to_string()];
        let entries: Vec<MergeEntry> = (0..50_000u32)
            .map(|i| {
                let mut hash = [0u8; 32];
                hash[..4].copy_from_slice(&i.to_le_bytes());
                MergeEntry {
                    physical: i as u64,
                    logical: 0,
                    node: 0,
                    job_id: [1; 16],
                    payload_hash: hash,
                    log: 0,
                    index: i,
                }
            })
            .collect();
        let inputs = [MergeInput {
            bundle_id: "x",
            manifest_digest: "d",
            nodes: &nodes,
            entries: &entries,
        }];
        let plan = plan_merge(&inputs, &JobMap::default());
        assert_eq!(plan.conflicts.len(), 1);
        assert_eq!(plan.conflicts[0].sides.len(), 50_000);
    }

    #[test]
    fn sorts_deduplicates_and_finds_conflicts() {
        let nodes_a = vec!["a".to_string()];
        let nodes_b = vec!["b".to_string()];
        let a = [e(10, 0, 1, 1, 0), e(30, 0, 2, 2, 1), e(40, 0, 4, 4, 2)];
        let b = [e(10, 0, 3, 3, 0), e(20, 0, 2, 2, 1), e(50, 0, 4, 5, 2)];
        let inputs = [
            MergeInput {
                bundle_id: "x",
                manifest_digest: "d1",
                nodes: &nodes_a,
                entries: &a,
            },
            MergeInput {
                bundle_id: "y",
                manifest_digest: "d2",
                nodes: &nodes_b,
                entries: &b,
            },
        ];
        let mut existing = JobMap::default();
        existing.insert([3; 16], [3; 32]);
        let plan = plan_merge(&inputs, &existing);
        let at = |input, pos| EntryAt { input, pos };
        assert_eq!(plan.merged, vec![at(0, 0), at(1, 1), at(0, 2)]);
        assert_eq!(
            plan.duplicates,
            vec![
                Duplicate {
                    entry: at(1, 0),
                    of: DuplicateOf::Chain
                },
                Duplicate {
                    entry: at(0, 1),
                    of: DuplicateOf::Input(at(1, 1))
                },
            ]
        );
        assert_eq!(
            plan.conflicts,
            vec![Conflict {
                job_id: [4; 16],
                sides: vec![ConflictSide::Input(at(0, 2)), ConflictSide::Input(at(1, 2))]
            }]
        );
        // Swapping the inputs gives the same decisions.
        let swapped = [inputs[1], inputs[0]];
        let plan2 = plan_merge(&swapped, &existing);
        let flip = |x: EntryAt| at(1 - x.input, x.pos);
        assert_eq!(
            plan2.merged.iter().map(|x| flip(*x)).collect::<Vec<_>>(),
            plan.merged
        );
    }
}
