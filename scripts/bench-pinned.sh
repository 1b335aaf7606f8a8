#!/usr/bin/env bash
# The load harness with PostgreSQL on a core of its own: every PostgreSQL process on CPU 0,
# RabbitMQ, the harness and what it starts (the worker, the forwarder) on CPU 1. It
# stands in for the database on a host of its own, on a machine of two cores, so that
# the dirty path is compared with the bare transaction where the database is what limits
# both (BENCHMARKS.md §2). The affinities are put back on exit, however it ends.
#
#   scripts/bench-pinned.sh HARNESS_FLAGS...     e.g. --events 16000 --leak-share 1 --only worker,txn
#
# Needs taskset (util-linux), the right to set other processes' affinity (root, or the
# owner of the servers), two CPUs, and `cargo build --release --bin toolcall-recovery
# --example load`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(nproc --all)" -ge 2 ] || { echo "needs two CPUs" >&2; exit 2; }
all=$(( (1 << $(nproc --all)) - 1 ))
pin() { # MASK PIDS...
  local mask=$1; shift
  for pid in "$@"; do taskset -a -p "$mask" "$pid" >/dev/null 2>&1 || true; done
}
restore() {
  # shellcheck disable=SC2046 # one pid per word
  pin "$(printf %x $all)" $(pgrep -x postgres) $(pgrep -x beam.smp)
}
trap restore EXIT
# shellcheck disable=SC2046
pin 1 $(pgrep -x postgres)   # new backends fork from the postmaster, and inherit it
# shellcheck disable=SC2046
pin 2 $(pgrep -x beam.smp)
echo "PostgreSQL on CPU 0, RabbitMQ and the harness on CPU 1; load average $(cut -d' ' -f1-3 /proc/loadavg)"
taskset -c 1 target/release/examples/load "$@"
