#!/usr/bin/env bash
# Vets and tests the Go client library (clients/go) against the real tidegate binary, and prints
# the figures the tests measured (lines `FIGURE ...`: tag agreement counts, dial-follow p50/p99,
# the drain held by a non-acking client, the freeze, the cache restart).
#   TIDEGATE_TEST_BIN   the binary to run (default ${CARGO_TARGET_DIR:-target}/debug/tidegate);
#                       it must exist: the tests fail, never skip, without it.
#   GO                  the go command (default: go on PATH, else /usr/local/go/bin/go).
# Modules come from the Go module proxy (GOTOOLCHAIN=local: the installed Go, no download).
# Wall time on the 2-core CI machine beside a cargo test run: 14 s with a warm Go build cache,
# 96 s with an empty one (load average 10; most of it compiling the OpenFeature SDK and net/http).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "scripts/client-go.sh: $*" >&2; exit 1; }

bin="${TIDEGATE_TEST_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/tidegate}"
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac
[ -x "$bin" ] || die "no tidegate binary at $bin (build it, or set TIDEGATE_TEST_BIN)"
go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[ -x "$go" ] || command -v "$go" >/dev/null || die "no go command (set GO, or install Go 1.26)"

cd "$root/clients/go"
export GOTOOLCHAIN=local
started=$(date +%s)
# The server reads TIDEGATE_* variables as configuration: the tests give it a clean
# environment, and this script passes the tests only the binary's path.
unset $(env | grep -o '^TIDEGATE_[A-Za-z0-9_]*' || true)
"$go" vet ./... || die "go vet failed"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! TIDEGATE_TEST_BIN="$bin" "$go" test -count=1 -v ./... >"$log" 2>&1; then
  grep -v '^=== RUN' "$log" >&2
  die "go test failed (TIDEGATE_TEST_BIN=$bin)"
fi
grep -E '^(--- |ok|PASS|FAIL)' "$log" | grep -v '^--- PASS' || true
passed=$(grep -c '^--- PASS' "$log")
skipped=$(grep -c '^--- SKIP' "$log" || true)
[ "$skipped" -eq 0 ] || die "$skipped tests skipped; every test must run"
echo "Go client: $passed tests passed in $(( $(date +%s) - started )) s (vet included), against $bin"
grep -o 'FIGURE .*' "$log" | sed 's/^FIGURE /  /'
