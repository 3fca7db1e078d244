#!/usr/bin/env bash
# Benchmark: `airlock jobs verify` of a 1,000,000-entry bundle over 4 nodes against `sha256sum` of
# the same file, in the same run (wall time and peak RSS via /usr/bin/time -v).
# Usage: bash bench/verify.sh [ENTRIES] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
entries=${1:-1000000}
runs=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build --release --quiet
bin=target/release/airlock
"$bin" dev gen-bundle --nodes 4 --entries "$entries" -o "$work/bundle.json"
size=$(stat -c %s "$work/bundle.json")
echo "file: $entries entries, $size bytes"
measure() { # label, command...
  local label=$1; shift
  /usr/bin/time -v "$@" >/dev/null 2>"$work/time.txt" || true
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
  echo "$label wall=$wall peak_rss_kb=$rss"
}
for i in $(seq "$runs"); do
  measure "sha256sum" sha256sum "$work/bundle.json"
  measure "verify   " "$bin" jobs verify "$work/bundle.json"
done
echo "targets: verify wall <= 3x sha256sum; verify peak RSS <= $((size / 2048)) KB (half the file)"
