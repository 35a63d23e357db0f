#!/usr/bin/env bash
# The long replica fault loop: tests/ha_faults.rs with many cycles (CI runs a short one).
#
#   scripts/ha-fault-loop.sh [CYCLES] [WRITERS]     defaults: 100 cycles, 4 writers
#
# Each cycle kills (SIGKILL) a random one of three `tidegate serve` replicas on one Kafka topic
# at a random moment while the writers send dial moves and pins with expected versions and
# Idempotency-Keys through random replicas, then restarts it; one cycle in four pauses it
# (SIGSTOP, 1.1-1.6 s, past the writers' 1 s timeout, so they retry with the same key) instead. The history checker then proves
# that no acknowledged change was lost or applied twice, no refused change took effect and every
# replica had the same state hash at every version. The run prints its figures (acknowledged
# changes, refusals, unknown outcomes, time for writes to resume after a kill as p50/p99,
# min-max). It uses the broker of scripts/kafka.sh (KAFKA_RUN_DIR), starting it if needed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cycles="${1:-100}"
writers="${2:-4}"
[[ "$cycles" =~ ^[0-9]+$ && "$writers" =~ ^[0-9]+$ ]] || {
  echo "usage: $0 [CYCLES] [WRITERS]" >&2
  exit 2
}
bash scripts/kafka.sh start >/dev/null
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
# --test-threads 1: the loop alone on the machine, so the timings are its own.
if ! HA_FAULT_CYCLES="$cycles" HA_FAULT_WRITERS="$writers" cargo test -j 2 --test ha_faults \
  replicas_killed_at_random -- --nocapture --test-threads 1 2>&1 | tee "$out"; then
  echo "ha-fault-loop: FAILED" >&2
  exit 1
fi
echo "---- figures ----"
grep -o "ha fault loop:.*" "$out"
