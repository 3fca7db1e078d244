//! What the WAL and ledger audit tests share: the binary, `basic.alwl` copies and its frame
//! offsets, and a deliberate frame edit with its CRC recomputed.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_airlock");
/// Frame offsets of `basic.alwl` by LSN (1..=10).
pub const AT: [usize; 11] = [0, 8, 206, 363, 520, 563, 748, 900, 943, 1131, 1315];

pub fn airlock(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run airlock")
}

pub fn p(path: &Path) -> &str {
    path.to_str().expect("path")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn copy_basic(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::copy("../shared/vectors/wal/basic.alwl", &path).expect("copy");
    path
}

/// Rewrites the frame at `offset` with `edit` and recomputes its CRC (a deliberate edit).
pub fn edit_frame(path: &Path, offset: usize, edit: impl FnOnce(&mut [u8])) {
    let mut b = std::fs::read(path).expect("read");
    let len = u32::from_be_bytes(b[offset + 4..offset + 8].try_into().expect("4")) as usize;
    edit(&mut b[offset..offset + len]);
    let crc = crc32fast::hash(&b[offset + 4..offset + len]);
    b[offset..offset + 4].copy_from_slice(&crc.to_be_bytes());
    std::fs::write(path, b).expect("write");
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
