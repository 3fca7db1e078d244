//! Merkle trees against the shared vectors: `merkle-roots.json` and every transparency-dev case.

use airlock::core::merkle::{leaf_hash, root, verify_consistency, verify_inclusion};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::Value;
use std::path::{Path, PathBuf};

const VECTORS: &str = "../shared/vectors";

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

fn b64(v: &Value) -> Vec<u8> {
    B64.decode(v.as_str().expect("base64 string"))
        .expect("valid base64")
}

fn proof(v: &Value) -> Vec<Vec<u8>> {
    match v {
        Value::Null => Vec::new(),
        Value::Array(a) => a.iter().map(b64).collect(),
        other => panic!("proof must be an array or null, got {other}"),
    }
}

#[test]
fn merkle_roots_vector() {
    let text = std::fs::read_to_string(Path::new(VECTORS).join("merkle-roots.json")).unwrap();
    let cases: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert!(cases.len() >= 5);
    for c in cases {
        let leaves: Vec<[u8; 32]> = c["leaves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                let raw = hex::decode(l.as_str().unwrap()).unwrap();
                leaf_hash(&raw)
            })
            .collect();
        assert_eq!(
            hex::encode(root(&leaves)),
            c["root"].as_str().unwrap(),
            "{} leaves",
            leaves.len()
        );
    }
}

/// Runs every transparency-dev case under `dir` through `check`; each must fail exactly when the
/// case says `wantErr`, and the set must hold both kinds.
fn run_cases<E: std::fmt::Debug>(dir: &str, check: impl Fn(&Value) -> Result<(), E>) {
    let mut files = Vec::new();
    files_under(&Path::new(VECTORS).join(dir), &mut files);
    assert!(
        files.len() > 50,
        "found only {} cases in {dir}",
        files.len()
    );
    let (mut ok, mut rejected) = (0, 0);
    for f in &files {
        let c: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let result = check(&c);
        let want_err = c["wantErr"].as_bool().unwrap();
        assert_eq!(result.is_err(), want_err, "{}: {result:?}", f.display());
        if want_err {
            rejected += 1
        } else {
            ok += 1
        }
    }
    assert!(ok > 0 && rejected > 0);
}

#[test]
fn transparency_dev_inclusion_cases() {
    run_cases("third-party/merkle/inclusion", |c| {
        verify_inclusion(
            c["leafIdx"].as_u64().unwrap(),
            c["treeSize"].as_u64().unwrap(),
            &b64(&c["leafHash"]),
            &proof(&c["proof"]),
            &b64(&c["root"]),
        )
    });
}

#[test]
fn transparency_dev_consistency_cases() {
    run_cases("third-party/merkle/consistency", |c| {
        verify_consistency(
            c["size1"].as_u64().unwrap(),
            c["size2"].as_u64().unwrap(),
            &proof(&c["proof"]),
            &b64(&c["root1"]),
            &b64(&c["root2"]),
        )
    });
}
