#!/usr/bin/env bash
# WAL benchmark (issue 13). Figures only; nothing is asserted. References measured in the same run:
# the writer's own fdatasync latency (p50 and mean) for group commit, `openssl dgst -sha256` of the
# same file for recovery.
#
#   bench/wal.sh                          # defaults
#   RUNS=3 GIB=1 BENCH_DIR=/path/on/the/disk/to/measure bench/wal.sh
# RUNTIME=multi-thread runs the appender tasks on two tokio workers instead of one thread.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
RUNTIME=${RUNTIME:-current-thread}
GIB=${GIB:-1}
DIR=${BENCH_DIR:-$(mktemp -d -t airlock-walbench.XXXXXX)}
[ -n "${AIRLOCK_BENCH_NO_BUILD:-}" ] || cargo build --release --quiet --bin airlock
BIN=${AIRLOCK_BIN:-target/release/airlock}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# The disk's synced write bandwidth in the same run: 1,000 entries of 134 bytes per fdatasync is
# what 1,000 appenders write per batch (134 KB); 1,000,000 entries/s needs 134 MB/s of it.
dd if=/dev/zero of="$DIR/dd.probe" bs=134k count=300 oflag=dsync 2>&1 | tail -1 | sed 's/^/dd bs=134k oflag=dsync (one sync per 134 KB write): /'
rm -f "$DIR/dd.probe"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

for run in $(seq 1 "$RUNS"); do
  # 1,000 concurrent appenders, 100-byte payloads.
  j=$("$BIN" dev wal-bench --appenders 1000 --entries 300000 --payload-bytes 100 --runtime "$RUNTIME" --dir "$DIR" --json)
  eps=$(echo "$j" | field entriesPerSec); p99=$(echo "$j" | field p99AckMicros)
  f50=$(echo "$j" | field fdatasyncP50Micros); fmean=$(echo "$j" | field fdatasyncMeanMicros)
  batch=$(echo "$j" | field meanBatch)
  bound=$(awk -v f="$f50" 'BEGIN { printf "%.0f", 1000 * 1e6 / f }')
  f99=$(echo "$j" | field fdatasyncP99Micros); f99e=$(echo "$j" | field fdatasyncP99PerEntryMicros)
  cpu=$(echo "$j" | field cpuNanosPerEntry)
  printf 'run %s, 1000 appenders: %.0f entries/s (target 1,000,000: %sx), p99 ack %s us (target 2,000; the disk alone: p99 over entries of their batch'"'"'s fdatasync %s us), mean batch %.1f; fdatasync p50 %s us, mean %.0f us, p99 %s us; CPU %.0f ns/entry; 1000/fdatasync-p50 = %s/s (%sx of it)\n' \
    "$run" "$eps" "$(ratio "$eps" 1000000)" "$p99" "$f99e" "$batch" "$f50" "$fmean" "$f99" "$cpu" "$bound" "$(ratio "$eps" "$bound")"
  # 8 appenders, each waiting for its own ack.
  j=$("$BIN" dev wal-bench --appenders 8 --entries 8000 --payload-bytes 100 --runtime "$RUNTIME" --dir "$DIR" --json)
  eps=$(echo "$j" | field entriesPerSec); f50=$(echo "$j" | field fdatasyncP50Micros)
  fmean=$(echo "$j" | field fdatasyncMeanMicros); batch=$(echo "$j" | field meanBatch)
  b50=$(awk -v f="$f50" 'BEGIN { printf "%.0f", 8 * 1e6 / f }')
  bmean=$(awk -v f="$fmean" 'BEGIN { printf "%.0f", 8 * 1e6 / f }')
  printf 'run %s, 8 appenders: %.0f entries/s, mean batch %.2f; 8/fdatasync-p50 (%s us) = %s/s -> %sx (target >= 0.8); 8/fdatasync-mean (%.0f us) = %s/s -> %sx\n' \
    "$run" "$eps" "$batch" "$f50" "$b50" "$(ratio "$eps" "$b50")" "$fmean" "$bmean" "$(ratio "$eps" "$bmean")"
done

# Crash drills: 100 random SIGKILL moments with 8 and with 1,000 appenders.
for n in 8 1000; do
  "$BIN" dev wal-crash-drill --appenders "$n" --rounds "${DRILL_ROUNDS:-100}" --dir "$DIR"
done
rm -f "$DIR"/crash-drill-*

# Recovery of a ${GIB} GiB WAL vs openssl dgst -sha256 of the same file (page cache warm for both).
LOG="$DIR/recovery.alwl"
"$BIN" dev wal-gen "$LOG" --bytes $((GIB << 30)) >/dev/null
cat "$LOG" >/dev/null
TIMEFORMAT=%R
for run in $(seq 1 "$RUNS"); do
  o=$( { time openssl dgst -sha256 "$LOG" >/dev/null; } 2>&1 )
  r=$( { time "$BIN" wal recover "$LOG" >/dev/null; } 2>&1 )
  echo "run $run, recovery of $(stat -c %s "$LOG") bytes: airlock wal recover ${r}s, openssl dgst -sha256 ${o}s -> $(ratio "$r" "$o")x (target <= 2)"
done
rm -f "$LOG"
