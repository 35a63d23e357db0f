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

# The operator UI's browser tests (tests/ui_browser.rs) drive Debian's Chromium through its
# chromedriver. They fail, never skip, without them, so install them here or stop.
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  [ "$(id -u)" -eq 0 ] || { echo "chromium or chromedriver is missing and we are not root; run: apt-get install -y chromium chromium-driver" >&2; exit 1; }
  echo "installing Debian's chromium and chromium-driver (one-off)..."
  apt_log="$(mktemp)"
  if ! { apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 chromium chromium-driver; } >"$apt_log" 2>&1; then
    tail -n 30 "$apt_log" >&2
    echo "installing chromium and chromium-driver with apt-get failed; see the output above" >&2
    exit 1
  fi
  rm -f "$apt_log"
fi
/usr/bin/chromium --version
/usr/bin/chromedriver --version

echo "== cargo test (unit, property, HTTP, restart, drains, real Prometheus, UI in Chromium, tidy; benches once in test mode)"
cargo test -j 2 --all-targets
