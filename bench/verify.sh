#!/usr/bin/env bash
# Benchmark: `airlock jobs verify` of a bundle (default 1,000,000 entries over 4 nodes) against
# `openssl dgst -sha256` of the same file, interleaved in the same run: wall time min/median/max of
# each, the ratio of the medians (and of the minima), and peak RSS (/usr/bin/time -v). Figures only;
# nothing is asserted. Targets (issue 12): ratio <= 2.0, RSS < 64 MiB.
# Usage: bash bench/verify.sh [ENTRIES] [RUNS]
# AIRLOCK_BIN=path measures that binary; AIRLOCK_BENCH_NO_BUILD=1 skips the release build;
# AIRLOCK_BASELINE_BIN=path also measures that binary (e.g. main's), interleaved in the same runs.
# AIRLOCK_BENCH_BUNDLE=path measures that bundle (made by `airlock dev gen-bundle --nodes 4 --entries
# ENTRIES`) instead of generating one, e.g. to run the 10 M bench twice on one 5.7 GB file.
# Besides wall time it prints each run's CPU time (user+sys), the steadier figure on a busy machine.
set -euo pipefail
cd "$(dirname "$0")/.."
entries=${1:-1000000}
runs=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source bench/lib/timing.sh
bin=$(bench_binary)
bundle=${AIRLOCK_BENCH_BUNDLE:-}
if [ -z "$bundle" ]; then
  bundle="$work/bundle.json"
  "$bin" dev gen-bundle --nodes 4 --entries "$entries" -o "$bundle" 2>/dev/null
fi
size=$(stat -c %s "$bundle")
echo "file: $entries entries over 4 nodes, $size bytes; $runs interleaved runs; load average: $(cut -d' ' -f1-3 /proc/loadavg)"

bench_out="$work"
base=${AIRLOCK_BASELINE_BIN:-}
# cpu NAME: appends the user+sys seconds of the run just measured to $work/NAME.cpu.
cpu() { awk -F': ' '/User time|System time/ { s += $2 } END { printf "%.2f\n", s }' "$work/time.txt" >>"$work/$1.cpu"; }
for _ in $(seq "$runs"); do
  measure openssl openssl dgst -sha256 "$bundle"; cpu openssl
  measure verify "$bin" jobs verify "$bundle"; cpu verify
  if [ -n "$base" ]; then measure baseline "$base" jobs verify "$bundle"; cpu baseline; fi
done
table_head 24
table_row 24 "openssl dgst -sha256" openssl rss
table_row 24 "airlock jobs verify" verify rss
[ -z "$base" ] || table_row 24 "baseline jobs verify" baseline rss
ratio_line verify/openssl verify openssl
[ -z "$base" ] || ratio_line baseline/openssl baseline openssl
for n in openssl verify ${base:+baseline}; do echo "CPU user+sys per run, $n: $(paste -sd' ' "$work/$n.cpu") s"; done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r _ vmed _ vrss <<<"$(stats verify)"
awk -v a="$vmed" -v n="$entries" -v r="$vrss" 'BEGIN {
  printf "verify: %.0f entries/s (median); peak RSS %.1f MiB (target < 64 MiB)\n", n / a, r / 1024 }'
