#!/usr/bin/env bash
# Builds the manual (docs/, an mdBook) and fails on a broken internal link.
#
# mdbook comes from crates.io (`cargo install --locked`, without the serve/watch features, which
# the build does not need) into ~/.cargo/bin, only when it is missing or another version: the
# install took 98 s (crates downloaded too) and 155 s (crates cached, load average 4) on this
# 2-core machine; after that this script takes under a second.
# The HTML goes to docs/book/ (ignored by git). Then scripts/check_links.py checks every relative
# link and #anchor of the built HTML, and of README.md and ARCHITECTURE.md.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
export PATH="$HOME/.cargo/bin:$PATH"

if [[ "$(mdbook --version 2>/dev/null || true)" != "mdbook v$MDBOOK_VERSION" ]]; then
  echo "installing mdbook $MDBOOK_VERSION from crates.io (one-off)..."
  start=$SECONDS
  # Its own build dir (a temporary one, removed by cargo), not the CARGO_TARGET_DIR of the tests.
  env -u CARGO_TARGET_DIR cargo install mdbook --locked --version "$MDBOOK_VERSION" --no-default-features --features search -j 2 ||
    { echo "scripts/docs.sh: cargo install mdbook failed" >&2; exit 1; }
  echo "mdbook installed in $((SECONDS - start)) s"
fi
mdbook --version

rm -rf docs/book
mdbook build docs
python3 scripts/check_links.py --book docs/book README.md ARCHITECTURE.md
