#!/usr/bin/env bash
# Router::tag in criterion: this tree's client and core crates against an older commit's (issue
# 22's bound: the N-zone model may cost at most 10 % over the two-colour one), in alternating
# rounds, each a separate build of the same harness (benches/router.rs's body) against one tree.
#
#   bash scripts/bench-router.sh [<old-commit>]   # default cd0d94a, the last two-colour release
#   ROUNDS=5 bash scripts/bench-router.sh
#
# The harness (each tree's benches/router.rs) depends on tidegate-core and tidegate-client only
# (no Rocket, no rdkafka), built in
# release, each side in a target dir of its own (two trees of one workspace must not share one:
# scripts/release-bin.sh says why). Prints each round's median ns per tag and the ratio
# new / old as p50 (min-max) over the rounds.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
old="$(git -C "$root" rev-parse --verify "${1:-cd0d94a}^{commit}")"
rounds="${ROUNDS:-3}"
work="${BENCH_ROUTER_DIR:-$HOME/.cache/tidegate-bench-router}"
mkdir -p "$work"
rm -rf "$work/old-src"
mkdir -p "$work/old-src"
git -C "$root" archive "$old" Cargo.toml Cargo.lock crates vendor benches/router.rs | tar -x -C "$work/old-src"
# The workspace root's own package needs a source file to load; the harness never builds it.
mkdir -p "$work/old-src/src" && [ -f "$work/old-src/src/lib.rs" ] || touch "$work/old-src/src/lib.rs"

harness() { # side, crates dir, the tree's benches/router.rs
  local dir="$work/$1"
  mkdir -p "$dir/benches"
  cat >"$dir/Cargo.toml" <<EOF
[package]
name = "router-bench-$1"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[dependencies]
tidegate-core = { path = "$2/tidegate-core" }
tidegate-client = { path = "$2/tidegate-client" }

[dev-dependencies]
criterion = "0.8.2"

[[bench]]
name = "router"
harness = false

[profile.release]
debug = "line-tables-only"
EOF
  # Each tree's own benches/router.rs, on the crates directly instead of the server crate's
  # re-exports (the API it uses differs between the trees: ColorZones then, Zones now).
  sed -e 's/tidegate::client::/tidegate_client::/; s/tidegate::core::/tidegate_core::/' "$3" \
    >"$dir/benches/router.rs"
  (cd "$dir" && CARGO_TARGET_DIR="$dir/target" cargo bench -j 2 --bench router --no-run >&2)
}
harness old "$work/old-src/crates" "$work/old-src/benches/router.rs"
harness new "$root/crates" "$root/benches/router.rs"

median_ns() { # side
  local dir="$work/$1"
  (cd "$dir" && CARGO_TARGET_DIR="$dir/target" cargo bench -q --bench router -- --noplot \
    --warm-up-time 2 --measurement-time 5 2>/dev/null) |
    awk '/time:/ { gsub(/\[|\]/, ""); v = $4; u = $5;
           if (u == "ps") v /= 1000; if (u == "µs" || u == "us") v *= 1000; print v; exit }'
}
ratios=()
for r in $(seq 1 "$rounds"); do
  o="$(median_ns old)"
  n="$(median_ns new)"
  ratio="$(awk -v n="$n" -v o="$o" 'BEGIN { printf "%.3f", n / o }')"
  echo "round $r: old ${o} ns, new ${n} ns, new/old ${ratio}"
  ratios+=("$ratio")
done
printf '%s\n' "${ratios[@]}" | sort -n |
  awk -v old="${old:0:7}" '{ a[NR] = $1 } END { printf "router.tag new/old (old = %s): p50 %s (%s-%s) over %d rounds\n", old, a[int((NR + 1) / 2)], a[1], a[NR], NR }'
