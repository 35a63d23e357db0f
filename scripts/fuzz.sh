#!/usr/bin/env bash
# Short runs of the cargo-fuzz targets in fuzz/: the command log decoder (and replay), the config
# loader (figment over a TOML string) and the client's SSE parser. FUZZ_SECONDS per target
# (default 20). FUZZ_PROFILE picks the build: `dev` (default: unoptimised, debug assertions and
# overflow checks on; its cold build of every dependency with coverage instrumentation takes about
# 4 minutes on the 2-core CI machine against about 19 for `release`, which a 20-second smoke run
# cannot win back) or `release` (many more executions per second: use it for long runs).
# Needs the nightly toolchain (installed on these machines); installs cargo-fuzz
# from crates.io if it is missing. A crash fails this script and leaves the input in
# fuzz/artifacts/<target>/; reproduce with `cargo +nightly fuzz run <target> <file>`.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds="${FUZZ_SECONDS:-20}"
# Two cores: one heavy build at a time.
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "scripts/fuzz.sh: the nightly toolchain is missing (rustup toolchain install nightly)" >&2
  exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz (one-off)..."
  cargo install --locked cargo-fuzz || { echo "scripts/fuzz.sh: cargo install cargo-fuzz failed" >&2; exit 1; }
fi
case "${FUZZ_PROFILE:-dev}" in
  dev) profile=--dev ;;
  release) profile=--release ;;
  *) echo "scripts/fuzz.sh: FUZZ_PROFILE must be dev or release, not ${FUZZ_PROFILE}" >&2; exit 1 ;;
esac
target_dir="${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-../target}/fuzz}"
# `fuzz.sh build` only builds every target (scripts/test.sh does it beside the test run, so the
# runs afterwards start at once).
if [[ "${1:-}" == "build" ]]; then
  cargo +nightly fuzz build "$profile" --target-dir "$target_dir"
  echo "fuzz: built log_decoder, config_loader, sse_parser"
  exit 0
fi
for target in log_decoder config_loader sse_parser; do
  echo "== fuzz $target for ${seconds}s"
  mkdir -p "corpus/$target"
  # The checked-in seeds/<target> start the corpus; new finds go to corpus/<target> (ignored).
  cargo +nightly fuzz run "$profile" --target-dir "$target_dir" "$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
done
echo "fuzz: no crash in log_decoder, config_loader, sse_parser (${seconds}s each)"
