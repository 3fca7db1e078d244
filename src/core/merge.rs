//! The merge plan (SPEC section 7): a pure function from verified inputs and the tenant's existing
//! jobs to the order in which entries join the tenant chain, the duplicates to drop and the
//! conflicts that stop the import.
//!
//! Rules:
//! 1. every entry of every input, sorted by `(physical, logical, nodeId, jobId)`; entries equal in
//!    all four (the same entry exported in two bundles) are ordered by `(bundleId, manifestDigest,
//!    log, index)` so the result never depends on the order the inputs were given in (the import
//!    passes the digest each bundle's logs recompute to: two inputs share it only when their logs
//!    are the same, and then one of them is a repeat that does not take part);
//! 2. the first entry of each jobId in that order is kept, unless the tenant chain already holds the
//!    job: then it is a duplicate of the chain entry;
//! 3. a later entry of the same jobId with the same payloadHash is a duplicate; with a different
//!    payloadHash it is a conflict. Every distinct payload of a conflicting job is listed once, in
//!    merge order, the chain's side first.

use crate::core::chain::Digest32;
use std::collections::HashMap;
use std::collections::HashSet;

/// One verified entry of an input, reduced to what the merge decides on (its HLC and job id) and
/// to where the import finds it again (48 bytes an entry: an import keeps nothing else per entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryKey {
    pub physical: u64,
    /// Byte offset of the entry in its file.
    pub offset: u64,
    /// A keyed fingerprint of the entry's fields, to check the entry read back later.
    pub check: u64,
    pub job_id: [u8; 16],
    pub logical: u32,
    /// Byte length of the entry in its file.
    pub len: u32,
}

/// One input bundle: its node logs, each in strictly increasing HLC order (what verification
/// guarantees for the verified prefix of a log), laid end to end in `keys`.
#[derive(Debug, Clone, Copy)]
pub struct MergeInput<'a> {
    pub bundle_id: &'a str,
    /// The digest of the input's logs (recomputed, not only claimed): the tie order after the id.
    pub manifest_digest: &'a str,
    /// Node id of each log (every entry of a verified log carries its log's node id).
    pub log_nodes: &'a [String],
    /// Where each log's entries start in `keys` (ascending; a log ends where the next starts).
    pub log_starts: &'a [u32],
    pub keys: &'a [EntryKey],
}

impl MergeInput<'_> {
    /// The log holding `keys[pos]` and the entry's index in it.
    pub fn log_index(&self, pos: u32) -> (u32, u32) {
        let log = self
            .log_starts
            .partition_point(|&s| s <= pos)
            .saturating_sub(1);
        let start = self.log_starts.get(log).copied().unwrap_or(0);
        (log as u32, pos - start)
    }

    /// The end (exclusive) of log `log` in `keys`.
    pub fn log_end(&self, log: usize) -> u32 {
        self.log_starts
            .get(log + 1)
            .copied()
            .unwrap_or(self.keys.len() as u32)
    }
}

/// An entry of an input: `inputs[input].keys[pos]`.
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

/// The merge order of an entry: `(physical, logical, node rank, jobId, input rank, log, index)`
/// and the entry itself.
type OrderKey = (u64, u32, u32, [u8; 16], u32, u32, u32, EntryAt);

/// Global ranks that make the merge order plain integers: node ids bytewise (per input and log),
/// inputs by (bundleId, manifestDigest, position).
fn ranks(inputs: &[MergeInput<'_>]) -> (Vec<Vec<u32>>, Vec<u32>) {
    let mut node_names: Vec<&str> = inputs
        .iter()
        .flat_map(|i| i.log_nodes.iter().map(String::as_str))
        .collect();
    node_names.sort_unstable();
    node_names.dedup();
    let node_rank: Vec<Vec<u32>> = inputs
        .iter()
        .map(|i| {
            i.log_nodes
                .iter()
                .map(|n| node_names.partition_point(|x| *x < n.as_str()) as u32)
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
    (node_rank, input_rank)
}

/// The job ids that occur more than once over all inputs: one sorted copy of the ids (16 bytes an
/// entry, freed on return), so only repeated ids (and ids the chain holds) need a map entry.
fn repeated_ids(inputs: &[MergeInput<'_>]) -> JobMap<()> {
    let total: usize = inputs.iter().map(|i| i.keys.len()).sum();
    let mut ids: Vec<[u8; 16]> = Vec::with_capacity(total);
    for input in inputs {
        ids.extend(input.keys.iter().map(|k| k.job_id));
    }
    ids.sort_unstable();
    let mut out = JobMap::default();
    for w in ids.windows(2) {
        if w[0] == w[1] {
            out.insert(w[0], ());
        }
    }
    out
}

/// A k-way merge over every log of every input: yields the entries in merge order, holding one
/// entry per log (each log is already in order).
struct MergeOrder<'i, 'a> {
    inputs: &'i [MergeInput<'a>],
    node_rank: Vec<Vec<u32>>,
    input_rank: Vec<u32>,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<OrderKey>>,
}

impl<'i, 'a> MergeOrder<'i, 'a> {
    fn new(inputs: &'i [MergeInput<'a>]) -> Self {
        let (node_rank, input_rank) = ranks(inputs);
        let mut m = MergeOrder {
            inputs,
            node_rank,
            input_rank,
            heap: std::collections::BinaryHeap::new(),
        };
        for (ii, input) in inputs.iter().enumerate() {
            for (log, &start) in input.log_starts.iter().enumerate() {
                if start < input.log_end(log) {
                    m.push(ii, log, 0);
                }
            }
        }
        m
    }

    fn push(&mut self, input: usize, log: usize, index: u32) {
        let i = &self.inputs[input];
        let pos = i.log_starts[log] + index;
        let k = &i.keys[pos as usize];
        self.heap.push(std::cmp::Reverse((
            k.physical,
            k.logical,
            self.node_rank[input][log],
            k.job_id,
            self.input_rank[input],
            log as u32,
            index,
            EntryAt {
                input: input as u32,
                pos,
            },
        )));
    }
}

impl Iterator for MergeOrder<'_, '_> {
    type Item = EntryAt;
    fn next(&mut self) -> Option<EntryAt> {
        let std::cmp::Reverse(k) = self.heap.pop()?;
        let (log, index, at) = (k.5 as usize, k.6, k.7);
        if at.pos + 1 < self.inputs[at.input as usize].log_end(log) {
            self.push(at.input as usize, log, index + 1);
        }
        Some(at)
    }
}

/// Plans a merge. `existing` maps the tenant chain's job ids (at least those occurring in the inputs)
/// to their payloadHash. `payload_hash` gives an entry's payloadHash; it is asked only for entries
/// whose job id occurs more than once or is in the chain (an error there stops the plan).
pub fn plan_merge<E>(
    inputs: &[MergeInput<'_>],
    existing: &JobMap<Digest32>,
    payload_hash: &mut dyn FnMut(EntryAt) -> Result<Digest32, E>,
) -> Result<MergePlan, E> {
    let repeated = repeated_ids(inputs);
    let total: usize = inputs.iter().map(|i| i.keys.len()).sum();
    let mut plan = MergePlan {
        merged: Vec::with_capacity(total),
        ..MergePlan::default()
    };
    let mut decide = Decisions::default();
    for at in MergeOrder::new(inputs) {
        let job = inputs[at.input as usize].keys[at.pos as usize].job_id;
        if !repeated.contains_key(&job) && !existing.contains_key(&job) {
            plan.merged.push(at);
            continue;
        }
        let hash = payload_hash(at)?;
        decide.entry(&mut plan, existing, at, job, hash);
    }
    Ok(plan)
}

/// The first entry of a repeated job id in merge order.
enum First {
    Kept(EntryAt, Digest32),
    Chain(Digest32),
}

/// The dedup state of the repeated job ids (and those the chain holds).
#[derive(Default)]
struct Decisions {
    first: JobMap<(First, Option<usize>)>,
    /// (job, payloadHash) pairs already listed as a side of a conflict: linear in the repeats.
    sided: HashSet<([u8; 16], Digest32)>,
}

impl Decisions {
    /// Decides one entry whose job id is repeated or in the chain (SPEC 7 rules 2 and 3).
    fn entry(
        &mut self,
        plan: &mut MergePlan,
        existing: &JobMap<Digest32>,
        at: EntryAt,
        job: [u8; 16],
        hash: Digest32,
    ) {
        let Some((f, conflict)) = self.first.get_mut(&job) else {
            match existing.get(&job) {
                Some(chain_hash) if *chain_hash == hash => {
                    plan.duplicates.push(Duplicate {
                        entry: at,
                        of: DuplicateOf::Chain,
                    });
                    self.first.insert(job, (First::Chain(*chain_hash), None));
                }
                Some(chain_hash) => {
                    self.sided.insert((job, *chain_hash));
                    self.sided.insert((job, hash));
                    plan.conflicts.push(Conflict {
                        job_id: job,
                        sides: vec![
                            ConflictSide::Chain {
                                payload_hash: *chain_hash,
                            },
                            ConflictSide::Input(at),
                        ],
                    });
                    let ci = plan.conflicts.len() - 1;
                    self.first
                        .insert(job, (First::Chain(*chain_hash), Some(ci)));
                }
                None => {
                    plan.merged.push(at);
                    self.first.insert(job, (First::Kept(at, hash), None));
                }
            }
            return;
        };
        let (first_hash, of) = match f {
            First::Kept(kept, h) => (*h, DuplicateOf::Input(*kept)),
            First::Chain(h) => (*h, DuplicateOf::Chain),
        };
        if first_hash == hash {
            plan.duplicates.push(Duplicate { entry: at, of });
            return;
        }
        let ci = match conflict {
            Some(ci) => *ci,
            None => {
                let side = match f {
                    First::Kept(kept, _) => ConflictSide::Input(*kept),
                    First::Chain(h) => ConflictSide::Chain { payload_hash: *h },
                };
                self.sided.insert((job, first_hash));
                plan.conflicts.push(Conflict {
                    job_id: job,
                    sides: vec![side],
                });
                *conflict = Some(plan.conflicts.len() - 1);
                plan.conflicts.len() - 1
            }
        };
        if self.sided.insert((job, hash)) {
            plan.conflicts[ci].sides.push(ConflictSide::Input(at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An input of one log with entries `(physical, job, hash)`; its payload hashes go to `hashes`.
    struct TestInput {
        nodes: Vec<String>,
        starts: Vec<u32>,
        keys: Vec<EntryKey>,
        hashes: Vec<Digest32>,
    }

    fn input(node: &str, entries: &[(u64, u8, u8)]) -> TestInput {
        TestInput {
            nodes: vec![node.to_string()],
            starts: vec![0],
            keys: entries
                .iter()
                .map(|&(physical, job, _)| key(physical, [job; 16]))
                .collect(),
            hashes: entries.iter().map(|&(_, _, h)| [h; 32]).collect(),
        }
    }

    fn key(physical: u64, job_id: [u8; 16]) -> EntryKey {
        EntryKey {
            physical,
            offset: 0,
            check: 0,
            job_id,
            logical: 0,
            len: 0,
        }
    }

    fn merge_input<'a>(t: &'a TestInput, bundle_id: &'a str, digest: &'a str) -> MergeInput<'a> {
        MergeInput {
            bundle_id,
            manifest_digest: digest,
            log_nodes: &t.nodes,
            log_starts: &t.starts,
            keys: &t.keys,
        }
    }

    fn plan(inputs: &[MergeInput<'_>], t: &[&TestInput], existing: &JobMap<Digest32>) -> MergePlan {
        let mut asked = 0;
        let plan = plan_merge::<()>(inputs, existing, &mut |at| {
            asked += 1;
            Ok(t[at.input as usize].hashes[at.pos as usize])
        })
        .unwrap();
        assert!(asked <= inputs.iter().map(|i| i.keys.len()).sum::<usize>());
        plan
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
        let t = TestInput {
            nodes: vec!["a".to_string()],
            starts: vec![0],
            keys: (0..50_000u64).map(|i| key(i, [1; 16])).collect(),
            hashes: (0..50_000u32)
                .map(|i| {
                    let mut hash = [0u8; 32];
                    hash[..4].copy_from_slice(&i.to_le_bytes());
                    hash
                })
                .collect(),
        };
        let inputs = [merge_input(&t, "x", "d")];
        let plan = plan(&inputs, &[&t], &JobMap::default());
        assert_eq!(plan.conflicts.len(), 1);
        assert_eq!(plan.conflicts[0].sides.len(), 50_000);
    }

    #[test]
    fn unique_ids_need_no_payload_hash() {
        let a = input("a", &[(10, 1, 1), (20, 2, 2)]);
        let b = input("b", &[(10, 3, 3), (15, 4, 4)]);
        let inputs = [merge_input(&a, "x", "d1"), merge_input(&b, "y", "d2")];
        let plan = plan_merge::<&str>(&inputs, &JobMap::default(), &mut |_| Err("asked")).unwrap();
        let at = |input, pos| EntryAt { input, pos };
        assert_eq!(plan.merged, vec![at(0, 0), at(1, 0), at(1, 1), at(0, 1)]);
    }

    #[test]
    fn two_logs_of_one_input_interleave_by_hlc_then_node() {
        let t = TestInput {
            nodes: vec!["b".to_string(), "a".to_string()],
            starts: vec![0, 2],
            keys: vec![
                key(10, [1; 16]),
                key(30, [2; 16]),
                key(10, [3; 16]),
                key(20, [4; 16]),
            ],
            hashes: vec![[0; 32]; 4],
        };
        let inputs = [merge_input(&t, "x", "d")];
        assert_eq!(inputs[0].log_index(3), (1, 1));
        assert_eq!(inputs[0].log_index(1), (0, 1));
        let plan = plan(&inputs, &[&t], &JobMap::default());
        let pos: Vec<u32> = plan.merged.iter().map(|a| a.pos).collect();
        // (10, a) before (10, b): same time, node ids bytewise.
        assert_eq!(pos, vec![2, 0, 3, 1]);
    }

    #[test]
    fn sorts_deduplicates_and_finds_conflicts() {
        let a = input("a", &[(10, 1, 1), (30, 2, 2), (40, 4, 4)]);
        let b = input("b", &[(10, 3, 3), (20, 2, 2), (50, 4, 5)]);
        let inputs = [merge_input(&a, "x", "d1"), merge_input(&b, "y", "d2")];
        let mut existing = JobMap::default();
        existing.insert([3; 16], [3; 32]);
        let plan1 = plan(&inputs, &[&a, &b], &existing);
        let at = |input, pos| EntryAt { input, pos };
        assert_eq!(plan1.merged, vec![at(0, 0), at(1, 1), at(0, 2)]);
        assert_eq!(
            plan1.duplicates,
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
            plan1.conflicts,
            vec![Conflict {
                job_id: [4; 16],
                sides: vec![ConflictSide::Input(at(0, 2)), ConflictSide::Input(at(1, 2))]
            }]
        );
        // Swapping the inputs gives the same decisions.
        let swapped = [inputs[1], inputs[0]];
        let plan2 = plan(&swapped, &[&b, &a], &existing);
        let flip = |x: EntryAt| at(1 - x.input, x.pos);
        assert_eq!(
            plan2.merged.iter().map(|x| flip(*x)).collect::<Vec<_>>(),
            plan1.merged
        );
    }

    /// The k-way merge over the logs gives exactly the order of sorting every entry by the SPEC 7
    /// key (the way plans were made before), with HLC ties, shared nodes, repeated ids and empty
    /// logs, and the first of each job id is the one kept.
    #[test]
    fn the_log_merge_is_the_full_sort() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..40 {
            let inputs: Vec<TestInput> = (0..1 + next(4))
                .map(|_| {
                    let logs = 1 + next(3) as usize;
                    let mut t = TestInput {
                        nodes: (0..logs).map(|_| format!("n{}", next(3))).collect(),
                        starts: Vec::new(),
                        keys: Vec::new(),
                        hashes: Vec::new(),
                    };
                    for _ in 0..logs {
                        t.starts.push(t.keys.len() as u32);
                        let mut hlc = (next(3), 0u32);
                        for _ in 0..next(30) {
                            let mut k = key(hlc.0, [next(40) as u8; 16]);
                            k.logical = hlc.1;
                            t.keys.push(k);
                            t.hashes.push([k.job_id[0]; 32]);
                            hlc = match next(2) {
                                0 => (hlc.0 + 1 + next(2), 0),
                                _ => (hlc.0, hlc.1 + 1),
                            };
                        }
                    }
                    t
                })
                .collect();
            let ids: Vec<String> = (0..inputs.len()).map(|i| format!("b{}", i % 2)).collect();
            let merge: Vec<MergeInput<'_>> = inputs
                .iter()
                .zip(&ids)
                .map(|(t, id)| merge_input(t, id, "d"))
                .collect();
            let refs: Vec<&TestInput> = inputs.iter().collect();
            let plan = plan(&merge, &refs, &JobMap::default());
            // The reference: every entry sorted by the full key, the first of each job kept.
            let mut all = Vec::new();
            for (ii, m) in merge.iter().enumerate() {
                for pos in 0..m.keys.len() as u32 {
                    let (log, index) = m.log_index(pos);
                    let k = m.keys[pos as usize];
                    let node = m.log_nodes[log as usize].clone();
                    let rank = (m.bundle_id, m.manifest_digest, ii);
                    all.push((
                        k.physical, k.logical, node, k.job_id, rank, log, index, ii, pos,
                    ));
                }
            }
            all.sort();
            let mut seen = std::collections::HashSet::new();
            let expected: Vec<EntryAt> = all
                .iter()
                .filter(|e| seen.insert(e.3))
                .map(|e| EntryAt {
                    input: e.7 as u32,
                    pos: e.8,
                })
                .collect();
            assert_eq!(plan.merged, expected, "round {round}");
            let total: usize = merge.iter().map(|m| m.keys.len()).sum();
            assert_eq!(plan.merged.len() + plan.duplicates.len(), total);
        }
    }
}
