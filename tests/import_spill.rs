//! `jobs import --force` of many broken bundles keeps the dropped entries of every input past its
//! share of the memory budget in one temporary file: the import holds a descriptor per input and
//! a few more, not two per input (each input's own spill file used to be one more).

use std::path::Path;
use std::process::{Command, Output};

/// Inputs of the import, each dropping more entries than its share of the memory (4 MiB / 60 is
/// about 70 KB, some 550 entries) holds.
const INPUTS: usize = 60;
const ENTRIES: usize = 1000;
/// Soft and hard open-file limit: enough for one descriptor per input and a few more, not for two
/// per input.
const OPEN_FILES: usize = 100;

/// A synthetic bundle of one log of [`ENTRIES`] entries broken at its second (its payload edited):
/// `--force` keeps its first entry and drops the others.
fn broken_bundle(dir: &Path, i: usize) -> String {
    use airlock::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
    let name = format!("b{i:02}.json");
    let path = dir.join(&name);
    let spec = SynthSpec::acme(1, ENTRIES, 100 + i as u64);
    write_synthetic_bundle(&spec, std::fs::File::create(&path).unwrap()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\\\"seq\\\":1,", "\\\"seq\\\":7,")).unwrap();
    name
}

/// Runs the binary in `dir` under an open-file limit of `limit` (soft and hard: the binary raises
/// its soft limit to the hard one at start).
fn run_with_open_file_limit(dir: &Path, limit: usize, args: &[String]) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("AIRLOCK_NODE_ID", "importer-test")
        .env_remove("AIRLOCK_DB")
        .env_remove("AIRLOCK_CONFIG")
        .env_remove("AIRLOCK_REQUIRE_SIGNATURE")
        .output()
        .unwrap()
}

#[test]
fn a_forced_import_of_many_broken_bundles_holds_one_descriptor_per_input_not_two() {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = ["--db", "store.db", "jobs", "import", "--force"]
        .map(String::from)
        .to_vec();
    args.extend((0..INPUTS).map(|i| broken_bundle(dir.path(), i)));
    let o = run_with_open_file_limit(dir.path(), OPEN_FILES, &args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0), "{text}");
    let dropped = INPUTS * (ENTRIES - 1);
    for needle in [format!("{dropped} dropped"), format!("{INPUTS} new,")] {
        assert!(
            text.contains(&needle),
            "{needle}: {}",
            &text[..text.len().min(3000)]
        );
    }
}
