#!/usr/bin/env bash
# The test command (README.md, .ci/run): installs and starts what the suites need, then runs them.
#
# Every suite runs; none is skipped for a missing component. A component that cannot be
# installed or started fails this script loudly, before any test runs.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test (unit, property, HTTP, restart, tidy; benches run once in test mode)"
cargo test -j 2 --all-targets
