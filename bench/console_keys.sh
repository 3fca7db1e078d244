#!/usr/bin/env bash
# Benchmark: key-to-screen latency of `airlock console` in tmux, against `less` in the same tmux
# in the same run. Each key is sent after 3 s of idleness (`tmux send-keys`), and the time until
# `tmux capture-pane` shows a changed screen is recorded; 20 keys per case.
#
#   bash bench/console_keys.sh [KEYS] [IDLE_SECONDS] [BUSY_ENTRIES]
#
# Cases: `less` on a text file (the reference), the console idle on a demo workspace, and the
# console busy: a BUSY_ENTRIES-entry bundle in its directory is touched every second, so the
# console re-verifies it continuously (progress redrawn every frame, CPU in use).
# The measurement includes tmux's own round trip (send-keys, then capture-pane polled every
# ~2-4 ms), which is why the reference is measured the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-20}
idle=${2:-3}
busy_entries=${3:-300000}
work=$(mktemp -d)
sock="airlock-bench-$$"
tm() { tmux -L "$sock" "$@"; }
toucher=""
cleanup() {
  [ -n "$toucher" ] && kill "$toucher" 2>/dev/null || true
  tm kill-server 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cargo build --release --quiet
bin=$PWD/target/release/airlock
"$bin" demo --dir "$work/ws" --no-console >/dev/null
seq 1 100000 >"$work/lines.txt"

now_ns() { date +%s%N; }
screen() { tm capture-pane -p -t bench; }

# Sends each key in turn after `idle` seconds and prints one latency (ms) per key.
measure() { # key...
  local keys_cycle=("$@") i=0 n=${#keys_cycle[@]}
  while [ "$i" -lt "$keys" ]; do
    sleep "$idle"
    local before t0 t1
    before=$(screen)
    t0=$(now_ns)
    tm send-keys -t bench "${keys_cycle[$((i % n))]}"
    while [ "$(screen)" = "$before" ]; do
      if [ $(( ($(now_ns) - t0) / 1000000 )) -gt 5000 ]; then
        echo "no screen change 5 s after key $i" >&2
        break
      fi
    done
    t1=$(now_ns)
    echo "$(( (t1 - t0) / 1000 ))"
    i=$((i + 1))
  done
}

summary() { # label, file of microseconds
  sort -n "$2" | awk -v label="$1" '
    { v[NR] = $1 / 1000.0 }
    END {
      p50 = v[int((NR + 1) / 2)]; i99 = int(NR * 0.99 + 0.999); if (i99 > NR) i99 = NR
      printf "%-14s keys=%d p50=%.1f ms p99=%.1f ms max=%.1f ms\n", label, NR, p50, v[i99], v[NR]
    }'
}

start() { # command...
  tm kill-server 2>/dev/null || true
  tm new-session -d -s bench -x 140 -y 40 "$@"
  sleep 2
}

start less "$work/lines.txt"
measure " " "b" >"$work/less.txt"
summary "less" "$work/less.txt"

start env AIRLOCK_LOG="$work/console.log" "$bin" console --workspace "$work/ws"
measure "?" "q" >"$work/idle.txt"
summary "console idle" "$work/idle.txt"

"$bin" dev gen-bundle --nodes 4 --entries "$busy_entries" -o "$work/ws/bundles/zz-large.json" >/dev/null
start env AIRLOCK_LOG="$work/console.log" "$bin" console --workspace "$work/ws"
( while true; do touch "$work/ws/bundles/zz-large.json"; sleep 1; done ) &
toucher=$!
measure "?" "q" >"$work/busy.txt"
summary "console busy" "$work/busy.txt"
if ! grep -q "verif" "$work/console.log" 2>/dev/null; then
  echo "(console.log has no verification lines; busy load came from the re-verification)" >&2
fi
awk 'FNR==NR { a[++n] = $1; next } { b[++m] = $1 }
  END { asort(a); asort(b); printf "ratio p50 console idle / less: %.2fx\n", b[int((m+1)/2)] / a[int((n+1)/2)] }' \
  "$work/less.txt" "$work/idle.txt"
echo "target: console p99 < 50 ms, idle and busy"
