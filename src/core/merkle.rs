//! RFC 6962 / RFC 9162 Merkle trees over scheduler chain links (SPEC section 8).
//!
//! * leaf hash `SHA-256(0x00 || data)`, interior node `SHA-256(0x01 || left || right)`; a tree of
//!   `n` leaves splits at the largest power of two below `n`; the empty tree hashes to `SHA-256("")`.
//! * Inclusion proofs (RFC 9162 2.1.3) and consistency proofs (2.1.4): generation and verification.
//!
//! Functions taking `leaves` take *leaf hashes* (already `0x00`-prefixed and hashed); use
//! [`leaf_hash`] or [`leaf_hashes_of_links`] to make them. Verification takes byte slices of any
//! length so that malformed proofs are rejected with a reason instead of panicking.

use crate::core::chain::Digest32;
use sha2::{Digest, Sha256};

/// Why a proof was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("leaf index {index} is outside a tree of {size} leaves")]
    IndexOutOfRange { index: u64, size: u64 },
    #[error("the leaf hash is {0} bytes long, not 32")]
    LeafHashLength(usize),
    #[error("proof element {index} is {len} bytes long, not 32")]
    ElementLength { index: usize, len: usize },
    #[error("the proof has the wrong number of elements for this leaf index and tree size")]
    WrongLength,
    #[error(
        "the proof does not lead to the expected root: computed {computed}, expected {expected}"
    )]
    RootMismatch { computed: String, expected: String },
    #[error("size1 ({size1}) is greater than size2 ({size2}): a tree cannot shrink")]
    SizeOrder { size1: u64, size2: u64 },
    #[error("consistency with an empty tree proves nothing and is not accepted")]
    EmptyTree,
    #[error("the sizes are equal, so the proof must be empty and the roots equal")]
    EqualSizes,
    #[error("the consistency proof is empty but the sizes differ")]
    EmptyProof,
}

/// SHA-256 of the empty string: the root of the empty tree.
pub fn empty_root() -> Digest32 {
    Sha256::digest([]).into()
}

/// `SHA-256(0x00 || data)`.
pub fn leaf_hash(data: &[u8]) -> Digest32 {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(data);
    h.finalize().into()
}

/// `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &[u8], right: &[u8]) -> Digest32 {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// Leaf hashes of 32-byte chain links (the leaf data is the raw link, not its hex text).
pub fn leaf_hashes_of_links(links: &[Digest32]) -> Vec<Digest32> {
    links.iter().map(|l| leaf_hash(l)).collect()
}

/// The Merkle tree hash (root) of the given leaf hashes, in O(n) time and O(log n) memory.
pub fn root(leaves: &[Digest32]) -> Digest32 {
    let mut builder = RootBuilder::default();
    for l in leaves {
        builder.push(*l);
    }
    builder.finish()
}

/// Builds a root incrementally from leaf hashes pushed in order.
#[derive(Debug, Default, Clone)]
pub struct RootBuilder {
    /// Perfect subtrees, left to right, with strictly decreasing sizes (as powers of two).
    stack: Vec<(Digest32, u32)>,
    count: u64,
}

impl RootBuilder {
    pub fn push(&mut self, leaf: Digest32) {
        let mut h = leaf;
        let mut level = 0u32;
        while let Some(&(top, top_level)) = self.stack.last() {
            if top_level != level {
                break;
            }
            self.stack.pop();
            h = node_hash(&top, &h);
            level += 1;
        }
        self.stack.push((h, level));
        self.count += 1;
    }

    pub fn len(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The root of everything pushed so far.
    pub fn finish(&self) -> Digest32 {
        let mut iter = self.stack.iter().rev();
        let Some(&(mut acc, _)) = iter.next() else {
            return empty_root();
        };
        for (h, _) in iter {
            acc = node_hash(h, &acc);
        }
        acc
    }
}

/// The largest power of two strictly below `n` (n >= 2).
fn split(n: usize) -> usize {
    debug_assert!(n >= 2);
    let mut k = 1usize;
    while k << 1 < n {
        k <<= 1;
    }
    k
}

/// RFC 9162 `PATH(m, D[n])`: the inclusion proof of leaf `index` (leaf hashes given).
pub fn inclusion_proof(leaves: &[Digest32], index: usize) -> Result<Vec<Digest32>, ProofError> {
    if index >= leaves.len() {
        return Err(ProofError::IndexOutOfRange {
            index: index as u64,
            size: leaves.len() as u64,
        });
    }
    let mut out = Vec::new();
    path(index, leaves, &mut out);
    Ok(out)
}

fn path(m: usize, d: &[Digest32], out: &mut Vec<Digest32>) {
    let n = d.len();
    if n <= 1 {
        return;
    }
    let k = split(n);
    if m < k {
        path(m, &d[..k], out);
        out.push(root(&d[k..]));
    } else {
        path(m - k, &d[k..], out);
        out.push(root(&d[..k]));
    }
}

/// RFC 9162 `PROOF(m, D[n])`: the consistency proof between the first `size1` leaves and all of them.
pub fn consistency_proof(leaves: &[Digest32], size1: usize) -> Result<Vec<Digest32>, ProofError> {
    let size2 = leaves.len();
    if size1 == 0 {
        return Err(ProofError::EmptyTree);
    }
    if size1 > size2 {
        return Err(ProofError::SizeOrder {
            size1: size1 as u64,
            size2: size2 as u64,
        });
    }
    let mut out = Vec::new();
    subproof(size1, leaves, true, &mut out);
    Ok(out)
}

fn subproof(m: usize, d: &[Digest32], complete: bool, out: &mut Vec<Digest32>) {
    let n = d.len();
    if m == n {
        if !complete {
            out.push(root(d));
        }
        return;
    }
    let k = split(n);
    if m <= k {
        subproof(m, &d[..k], complete, out);
        out.push(root(&d[k..]));
    } else {
        subproof(m - k, &d[k..], false, out);
        out.push(root(&d[..k]));
    }
}

fn check_elements(proof: &[impl AsRef<[u8]>]) -> Result<(), ProofError> {
    for (i, p) in proof.iter().enumerate() {
        let len = p.as_ref().len();
        if len != 32 {
            return Err(ProofError::ElementLength { index: i, len });
        }
    }
    Ok(())
}

fn mismatch(computed: &[u8], expected: &[u8]) -> ProofError {
    ProofError::RootMismatch {
        computed: hex::encode(computed),
        expected: hex::encode(expected),
    }
}

/// The root an inclusion proof leads to (RFC 9162 2.1.3.2, steps 1 to 4).
pub fn root_from_inclusion_proof(
    index: u64,
    size: u64,
    leaf: &[u8],
    proof: &[impl AsRef<[u8]>],
) -> Result<Digest32, ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    if leaf.len() != 32 {
        return Err(ProofError::LeafHashLength(leaf.len()));
    }
    check_elements(proof)?;
    let mut f_n = index;
    let mut s_n = size - 1;
    let mut r: Digest32 = leaf.try_into().expect("length checked");
    for p in proof {
        let p = p.as_ref();
        if s_n == 0 {
            return Err(ProofError::WrongLength);
        }
        if f_n & 1 == 1 || f_n == s_n {
            r = node_hash(p, &r);
            if f_n & 1 == 0 {
                while f_n & 1 == 0 && f_n != 0 {
                    f_n >>= 1;
                    s_n >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        f_n >>= 1;
        s_n >>= 1;
    }
    if s_n != 0 {
        return Err(ProofError::WrongLength);
    }
    Ok(r)
}

/// Verifies that `leaf` (a leaf hash) is at `index` of the tree of `size` leaves with root `root`.
pub fn verify_inclusion(
    index: u64,
    size: u64,
    leaf: &[u8],
    proof: &[impl AsRef<[u8]>],
    root: &[u8],
) -> Result<(), ProofError> {
    let computed = root_from_inclusion_proof(index, size, leaf, proof)?;
    if computed.as_slice() != root {
        return Err(mismatch(&computed, root));
    }
    Ok(())
}

/// Verifies that the tree of `size2` leaves with root `root2` extends the tree of `size1` leaves
/// with root `root1` (RFC 9162 2.1.4.2). Consistency with the empty tree is refused as meaningless.
pub fn verify_consistency(
    size1: u64,
    size2: u64,
    proof: &[impl AsRef<[u8]>],
    root1: &[u8],
    root2: &[u8],
) -> Result<(), ProofError> {
    if size1 > size2 {
        return Err(ProofError::SizeOrder { size1, size2 });
    }
    if size1 == 0 {
        return Err(ProofError::EmptyTree);
    }
    if size1 == size2 {
        if !proof.is_empty() || root1 != root2 {
            return Err(ProofError::EqualSizes);
        }
        return Ok(());
    }
    if proof.is_empty() {
        return Err(ProofError::EmptyProof);
    }
    check_elements(proof)?;
    let mut path: Vec<&[u8]> = Vec::with_capacity(proof.len() + 1);
    if size1.is_power_of_two() {
        path.push(root1);
    }
    path.extend(proof.iter().map(|p| p.as_ref()));
    if path[0].len() != 32 {
        return Err(ProofError::ElementLength {
            index: 0,
            len: path[0].len(),
        });
    }
    let mut f_n = size1 - 1;
    let mut s_n = size2 - 1;
    while f_n & 1 == 1 {
        f_n >>= 1;
        s_n >>= 1;
    }
    let mut fr: Digest32 = path[0].try_into().expect("length checked");
    let mut sr = fr;
    for c in &path[1..] {
        if s_n == 0 {
            return Err(ProofError::WrongLength);
        }
        if f_n & 1 == 1 || f_n == s_n {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if f_n & 1 == 0 {
                while f_n & 1 == 0 && f_n != 0 {
                    f_n >>= 1;
                    s_n >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f_n >>= 1;
        s_n >>= 1;
    }
    if s_n != 0 {
        return Err(ProofError::WrongLength);
    }
    if fr.as_slice() != root1 {
        return Err(mismatch(&fr, root1));
    }
    if sr.as_slice() != root2 {
        return Err(mismatch(&sr, root2));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(n: usize) -> Vec<Digest32> {
        (0..n)
            .map(|i| leaf_hash(&(i as u64).to_be_bytes()))
            .collect()
    }

    fn recursive_root(d: &[Digest32]) -> Digest32 {
        match d.len() {
            0 => empty_root(),
            1 => d[0],
            n => {
                let k = split(n);
                node_hash(&recursive_root(&d[..k]), &recursive_root(&d[k..]))
            }
        }
    }

    #[test]
    fn incremental_root_equals_the_recursive_definition() {
        for n in 0..70 {
            let l = leaves(n);
            assert_eq!(root(&l), recursive_root(&l), "n={n}");
        }
    }

    #[test]
    fn generated_proofs_verify_and_tampered_ones_do_not() {
        for n in 1..40usize {
            let l = leaves(n);
            let r = root(&l);
            for i in 0..n {
                let p = inclusion_proof(&l, i).unwrap();
                verify_inclusion(i as u64, n as u64, &l[i], &p, &r).unwrap();
                if !p.is_empty() {
                    let mut bad = p.clone();
                    bad[0][0] ^= 1;
                    assert!(verify_inclusion(i as u64, n as u64, &l[i], &bad, &r).is_err());
                }
                assert!(verify_inclusion(i as u64 + 1, n as u64, &l[i], &p, &r).is_err());
            }
            for m in 1..=n {
                let p = consistency_proof(&l, m).unwrap();
                let r1 = root(&l[..m]);
                verify_consistency(m as u64, n as u64, &p, &r1, &r).unwrap();
                if m < n {
                    let mut bad = p.clone();
                    let last = bad.len() - 1;
                    bad[last][5] ^= 0x10;
                    assert!(verify_consistency(m as u64, n as u64, &bad, &r1, &r).is_err());
                }
            }
        }
    }
}
