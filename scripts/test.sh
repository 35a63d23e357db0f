#!/usr/bin/env bash
# The test command (README.md, .ci/run): installs what the suites need, then runs them all.
#
# Every suite runs; none is skipped for a missing component. A component that cannot be
# installed fails this script loudly, before any test runs. Tests start their own instances
# (tidegate binaries, Prometheus via scripts/prometheus.sh) on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== real components"
bash scripts/prometheus.sh install
command -v promtool >/dev/null || { echo "promtool is missing after install" >&2; exit 1; }

echo "== dashboards are generated from dashboards/generate.py"
python3 dashboards/generate.py --check

echo "== cargo test (unit, property, HTTP, restart, drains, real Prometheus, tidy; benches once in test mode)"
cargo test -j 2 --all-targets
