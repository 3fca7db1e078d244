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
# The measurement includes tmux's own round trip (one control-mode client sends the key and
# receives the output as it is written), which is why the reference is measured the same way.
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
[ -n "${AIRLOCK_BENCH_NO_BUILD:-}" ] || cargo build --release --quiet
bin=${AIRLOCK_BIN:-$PWD/target/release/airlock}
"$bin" demo --dir "$work/ws" --no-console >/dev/null
seq -f "line %06g" 1 100000 >"$work/lines.txt"


# Sends each key in turn after `idle` seconds and prints one latency (microseconds) per key.
# A tmux control-mode client (`tmux -C attach`) sends the key and receives the pane's output as
# `%output` notifications the moment the program writes it (no polling of capture-pane, whose
# process start-up on a loaded machine used to dominate the figure). The time recorded is the
# arrival of the first output after which the screen shows the key's effect: for each key a
# marker that must appear (`+TEXT`) or disappear (`-TEXT`), checked with one capture-pane over
# the same connection, so a progress redraw of a busy console never counts as the answer.
measure() { # key:marker...
  python3 - "$sock" "$keys" "$idle" "$@" <<'PY'
import os, select, subprocess, sys, time
sock, n, idle, specs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
p = subprocess.Popen(["tmux", "-L", sock, "-C", "attach", "-t", "bench"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
fd = p.stdout.fileno()
buf = b""

def read(timeout):
    global buf
    r, _, _ = select.select([fd], [], [], timeout)
    if not r:
        return False
    chunk = os.read(fd, 1 << 16)
    if not chunk:
        sys.exit("tmux control client ended")
    buf += chunk
    return True

def drain():
    global buf
    while read(0):
        pass
    buf = b""

def command(cmd):
    """Runs a tmux command over the connection; returns its output block."""
    global buf
    p.stdin.write(cmd.encode() + b"\n")
    while True:
        start = buf.find(b"%begin")
        end = buf.find(b"%end", start + 1) if start >= 0 else -1
        if end >= 0:
            close = buf.find(b"\n", end)
            while close < 0:
                read(5)
                close = buf.find(b"\n", end)
            block = buf[start:end]
            buf = buf[:start] + buf[close + 1:]
            return block.decode("utf-8", "replace")
        if not read(5):
            sys.exit(f"no answer to {cmd!r}")

def shows(marker):
    text = command("capture-pane -p -t bench")
    want, what = marker[0] == "+", marker[1:]
    return (what in text) == want

command("refresh-client -C 140,40")
for i in range(n):
    key, marker = specs[i % len(specs)].split(":", 1)
    time.sleep(idle)
    drain()
    t0 = time.monotonic_ns()
    command(f"send-keys -t bench {key}")
    t1 = None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        at = buf.find(b"%output")
        if at < 0:
            read(0.5)
            continue
        arrived = time.monotonic_ns()
        buf = buf[:at] + buf[at + 7:]  # consumed this notification
        if shows(marker):
            t1 = arrived
            break
    if t1 is None:
        print(f"no screen change 5 s after key {i}", file=sys.stderr)
        t1 = time.monotonic_ns()
    print((t1 - t0) // 1000, flush=True)
p.stdin.close()
PY
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
  # The previous server may still be exiting: retry the new session a few times.
  local try
  for try in 1 2 3 4 5; do
    sleep 0.5
    tm new-session -d -s bench -x 140 -y 40 "$@" 2>/dev/null && break
    [ "$try" = 5 ] && { echo "cannot start tmux session" >&2; exit 2; }
  done
  sleep 2
}

start less "$work/lines.txt"
measure "Space:-line 000001" "b:+line 000001" >"$work/less.txt"
summary "less" "$work/less.txt"

start env AIRLOCK_LOG="$work/console.log" "$bin" console --workspace "$work/ws"
measure "?:+ Help · " "q:- Help · " >"$work/idle.txt"
summary "console idle" "$work/idle.txt"

"$bin" dev gen-bundle --nodes 4 --entries "$busy_entries" -o "$work/ws/bundles/zz-large.json" >/dev/null
start env AIRLOCK_LOG="$work/console.log" "$bin" console --workspace "$work/ws"
( while true; do touch "$work/ws/bundles/zz-large.json"; sleep 1; done ) &
toucher=$!
measure "?:+ Help · " "q:- Help · " >"$work/busy.txt"
summary "console busy" "$work/busy.txt"
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
awk -v a="$(median "$work/less.txt")" -v i="$(median "$work/idle.txt")" -v b="$(median "$work/busy.txt")" \
  'BEGIN { printf "ratio p50 to less: console idle %.2fx, console busy %.2fx\n", i / a, b / a }'
echo "target: console p99 < 50 ms, idle and busy"
