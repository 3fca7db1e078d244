#!/usr/bin/env bash
# Ledger benchmark (issue 14). Figures only; nothing is asserted. `airlock ledger bench` generates
# the inputs, then measures in the same run:
#   - fold of EVENTS events from 8 node WALs (100 events per job), with the peak RSS of the fold
#     alone and its CPU time per event (on a shared machine the wall clock also counts other
#     processes' turns), against `openssl dgst -sha256` over the same files (page cache warm);
#   - anti-entropy (`ledger diff`) of two FRAMES-frame ledgers that differ in one frame: exchanges,
#     seconds cold (no block index: both trees hashed from the files, at once) and with the block
#     index beside each log (checked at block boundaries, docs/ledger.md), against
#     `openssl dgst -sha256` over both files.
#
#   bench/ledger.sh                       # 10 M events, 10 M frames, 3 runs
#   RUNS=1 EVENTS=2000000 FRAMES=2000000 BENCH_DIR=/path bench/ledger.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
EVENTS=${EVENTS:-10000000}
FRAMES=${FRAMES:-10000000}
DIR=${BENCH_DIR:-target/ledgerbench}
mkdir -p "$DIR"
[ -n "${AIRLOCK_BENCH_NO_BUILD:-}" ] || cargo build --release --quiet --bin airlock
BIN=${AIRLOCK_BIN:-target/release/airlock}
for run in $(seq 1 "$RUNS"); do
  echo "run $run (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$BIN" ledger bench --events "$EVENTS" --frames "$FRAMES" --dir "$DIR"
done
