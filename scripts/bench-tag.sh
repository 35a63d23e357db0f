#!/usr/bin/env bash
# Load test of GET /v1/tag on a release build: prints requests/s and p50/p99 latency.
#
#   scripts/bench-tag.sh [DURATION_SECONDS] [CONNECTIONS]
#
# Starts tidegate on a free loopback port with a temporary data dir, drives it with wrk (Debian's
# package, installed if missing) over 10 000 distinct user IDs, and stops everything on exit.
# Traffic stays on 127.0.0.1 and the run is bounded by DURATION.
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${1:-10}"
connections="${2:-64}"

if ! command -v wrk >/dev/null 2>&1; then
  echo "installing wrk (Debian package)..." >&2
  (apt-get update -qq && apt-get install -y -qq wrk) >/dev/null
fi

cargo build --release -j 2 --bin tidegate >&2
work="$(mktemp -d)"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

target/release/tidegate serve --port 0 --data-dir "$work/data" >"$work/out" 2>"$work/err" &
server_pid=$!
for _ in $(seq 1 100); do
  url="$(sed -n 's/^tidegate listening on //p' "$work/out")"
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "${url:-}" ] || { echo "tidegate did not start:" >&2; cat "$work/err" >&2; exit 1; }

cat >"$work/ids.lua" <<'LUA'
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", "/v1/tag?user_id=user-" .. (counter % 10000))
end
LUA

threads=2
echo "wrk: ${duration}s, ${connections} connections, ${threads} threads against $url/v1/tag" >&2
wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -s "$work/ids.lua" "$url" >"$work/wrk.txt"
cat "$work/wrk.txt" >&2

rps="$(awk '/^Requests\/sec/ {print $2}' "$work/wrk.txt")"
p50="$(awk '$1 == "50%" {print $2}' "$work/wrk.txt")"
p99="$(awk '$1 == "99%" {print $2}' "$work/wrk.txt")"
errors="$(awk '/Non-2xx/ {print $NF}' "$work/wrk.txt")"
echo "requests_per_second=$rps p50=$p50 p99=$p99 non_2xx=${errors:-0} cores=$(nproc)"
