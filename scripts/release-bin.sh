#!/usr/bin/env bash
# Builds the `tidegate` binary of an earlier release from this repository's history, once per
# machine, and prints its path: the older replicas of tests/rolling_upgrade.rs.
#
#   bash scripts/release-bin.sh            # PREVIOUS_RELEASE below
#   bash scripts/release-bin.sh <commit>   # another one
#   bash scripts/release-bin.sh --path     # only print where PREVIOUS_RELEASE's binary goes
#
# scripts/test.sh builds it beside the test run (`--path` first, for TIDEGATE_RELEASE_BIN):
# tests/rolling_upgrade.rs waits for `<binary>.built`, and fails at once on `<binary>.failed`,
# which holds why the build failed.
#
# The release's tree comes out of git (`git archive`, so the clone needs that commit: a shallow
# clone fails here, loudly) into ~/.cache/tidegate-releases/<commit>/src and is built there in a
# target dir of its own (~/.cache/tidegate-releases/target, removed afterwards), never the
# caller's: cargo tells path crates apart by their path relative to the workspace root and their
# sources by mtime, so two trees of this workspace in one target dir can each take the other's
# artifacts for fresh (`git archive` dates every file at the commit), and a test would run one
# release's binary believing it is the other's. A cold build of the release: about 4 minutes on
# two cores, once per machine; the binary is kept in ~/.cache/tidegate-releases/<commit>/tidegate.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "scripts/release-bin.sh: $*" >&2; exit 1; }

# The release before record format 7 (zone drains among N zones, plan runs that restore unit
# maps): it reads formats up to 6, so a rolling upgrade from it exercises the format gate.
PREVIOUS_RELEASE=6c388d3291170a6a69d0905fe51e8465e81638b6

only_path=0
if [[ "${1:-}" == "--path" ]]; then
  only_path=1
  shift
fi
commit="${1:-$PREVIOUS_RELEASE}"
commit="$(git -C "$root" rev-parse --verify --quiet "$commit^{commit}")" ||
  die "commit ${1:-$PREVIOUS_RELEASE} is not in this clone's history (a shallow clone? run: git fetch --unshallow)"
cache="${TIDEGATE_RELEASE_CACHE:-$HOME/.cache/tidegate-releases}/$commit"
bin="$cache/tidegate"
if ((only_path)) || [[ -x "$bin" && -f "$bin.built" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache"
rm -f "$bin.failed"
# A failure leaves its reason where the waiting test finds it.
fail() {
  echo "scripts/release-bin.sh: $*" >"$bin.failed"
  die "$*"
}
target="${TIDEGATE_RELEASE_CACHE:-$HOME/.cache/tidegate-releases}/target"
started=$SECONDS
src="$cache/src"
rm -rf "$src"
mkdir -p "$src"
git -C "$root" archive "$commit" | tar -x -C "$src" || fail "git archive $commit failed"
echo "building tidegate at ${commit:0:12} in $src (target $target)..." >&2
(cd "$src" && CARGO_TARGET_DIR="$target" CARGO_INCREMENTAL=0 cargo build -j 2 --locked --bin tidegate >&2) ||
  fail "cargo build of ${commit:0:12} failed (its output is above, in the build log)"
cp "$target/debug/tidegate" "$bin.tmp"
mv "$bin.tmp" "$bin"
"$bin" --version >/dev/null || fail "the built binary does not run"
echo "$commit" >"$bin.built"
rm -rf "$src" "$target"
echo "scripts/release-bin.sh: tidegate ${commit:0:12} built in $((SECONDS - started)) s" >&2
echo "$bin"
