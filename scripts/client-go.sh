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
# Then the packaging checks (issue 48), each a named step that fails loudly:
#   consumer     tests/packaging/go-consumer, a separate module that requires
#                github.com/tidegate/tidegate/clients/go and replaces it with ../../../clients/go
#                (what a service with a vendored checkout or in a monorepo does): vet, test, run;
#   tagged get   the module resolved the way a released version is: clients/go is committed to a
#                scratch Git repository tagged clients/go/vX.Y.Z (X.Y.Z the workspace version),
#                which stands in for github.com/tidegate/tidegate through a url.insteadOf rewrite,
#                and a fresh consumer runs `go get github.com/tidegate/tidegate/clients/go@vX.Y.Z`
#                (GOPROXY=direct for it, its dependencies from the local module cache); a bare
#                vX.Y.Z tag must not resolve (Go requires the subdirectory prefix).
# The packaging checks add 4-6 s, with a cold build cache as with a warm one (the tests before
# them have compiled the client's dependencies; the scratch module cache is filled from the local one).
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

# Packaging (issue 48): a service depends on the module.
step=$(date +%s)
consumer="$root/tests/packaging/go-consumer"
(cd "$consumer" && "$go" vet ./... && "$go" test -count=1 ./... && "$go" run . "$root/tests/fixtures/routing_base.json") ||
  die "packaging step 'consumer' failed: tests/packaging/go-consumer does not build or run against clients/go through its replace directive"

version=$(awk '/^\[workspace.package\]/ {w=1; next} /^\[/ {w=0} w && $1 == "version" {gsub(/"/, "", $3); print $3; exit}' "$root/Cargo.toml")
[ -n "$version" ] || die "packaging step 'tagged get': no [workspace.package] version in Cargo.toml"
scratch="$(mktemp -d)"
modcache="$("$go" env GOMODCACHE)" # the dependencies the tests above downloaded, served as a file:// proxy
trap 'rm -f "$log"; chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
tagged_get() { # tag, then the version to get; runs in a fresh consumer, prints go's output
  local tag="$1" want="$2" dir="$scratch/$1"
  mkdir -p "$dir/src/clients/go" "$dir/consumer"
  cp -r "$root/clients/go/." "$dir/src/clients/go/"
  git -C "$dir/src" init -q -b main
  git -C "$dir/src" add -A
  git -C "$dir/src" -c user.name=packaging -c user.email=packaging@localhost commit -qm "clients/go as released"
  git -C "$dir/src" tag "$tag"
  git clone -q --bare "$dir/src" "$dir/tidegate.git"
  printf '[url "file://%s"]\n\tinsteadOf = https://github.com/tidegate/tidegate\n[protocol "file"]\n\tallow = always\n' \
    "$dir/tidegate.git" >"$dir/gitconfig"
  cp "$consumer/main.go" "$dir/consumer/"
  printf 'module example.com/orders\n\ngo 1.26.0\n' >"$dir/consumer/go.mod"
  cp "$root/clients/go/go.sum" "$dir/consumer/go.sum" # the dependencies' sums, checked (no sumdb here)
  (cd "$dir/consumer" &&
    GIT_CONFIG_GLOBAL="$dir/gitconfig" GOMODCACHE="$dir/modcache" GOFLAGS="${GOFLAGS:-} -modcacherw" \
      GOPROXY="file://$modcache/cache/download" GOPRIVATE=github.com/tidegate GOSUMDB=off \
      "$go" get "github.com/tidegate/tidegate/clients/go@$want" 2>&1 &&
    GOMODCACHE="$dir/modcache" GOPROXY=off GOFLAGS="${GOFLAGS:-} -modcacherw" \
      "$go" run . "$root/tests/fixtures/routing_base.json")
}
out=$(tagged_get "clients/go/v$version" "v$version") ||
  die "packaging step 'tagged get': go get github.com/tidegate/tidegate/clients/go@v$version from a repository tagged clients/go/v$version failed: $out"
echo "$out" | grep '^go consumer:' || die "packaging step 'tagged get': the consumer printed nothing: $out"
if out=$(tagged_get "v$version" "v$version"); then
  die "packaging step 'tagged get': a bare v$version tag resolved the subdirectory module; Go should require clients/go/v$version"
fi
# Go reads a bare tag as the repository root's version, which has no go.mod here.
echo "$out" | grep -q 'does not contain package github.com/tidegate/tidegate/clients/go' ||
  die "packaging step 'tagged get': a bare v$version tag failed for another reason than Go's subdirectory rule: $out"
echo "Go packaging: consumer (replace) and go get @v$version (tag clients/go/v$version) in $(( $(date +%s) - step )) s"
