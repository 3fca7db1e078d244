#!/usr/bin/env bash
# Install the system packages airlock's tests start for real (Debian names), if any is missing.
# Called by the README's test command and by .ci/run. Idempotent; does nothing when all are present.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1; }
have openssl || need+=(openssl)
have cc || need+=(build-essential)
have tmux || need+=(tmux)
have nats-server || need+=(nats-server)
have promtool || need+=(prometheus)
# PostgreSQL 15: the server binaries live under /usr/lib/postgresql/<version>/bin.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing system packages: ${need[*]} (install them with: sudo apt-get install ${need[*]})" >&2
    exit 2
  fi
  echo "installing: ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian starts a packaged prometheus/postgresql service on install where systemd runs; tests start
# their own instances and never need these.
