#!/usr/bin/env bash
# Edge benchmarks, measured side by side in one run (release build, wrk, loopback only):
#   1. the edge's GET /v1/tag and GET /v1/gate against the coordinator's GET /v1/tag;
#   2. nginx -> edge -> upstream (config/nginx/tidegate.conf) against nginx -> upstream directly.
# Each round runs every target once with the same wrk settings, in the same order; the ratios are
# printed per round and summarised as median and min-max over the rounds.
#
#   scripts/bench-edge.sh [DURATION_SECONDS_PER_TARGET] [CONNECTIONS] [ROUNDS]
# BENCH_BIN=path skips the release build and uses that binary.
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${1:-5}"
connections="${2:-32}"
rounds="${3:-3}"
threads=2

command -v wrk >/dev/null 2>&1 || { (apt-get update -qq && apt-get install -y -qq wrk) >/dev/null; }
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || { (apt-get update -qq && apt-get install -y -qq nginx) >/dev/null; }
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"

if [[ -n "${BENCH_BIN:-}" ]]; then
  bin="$BENCH_BIN" # e.g. a binary built elsewhere; figures from a debug build are not comparable
else
  cargo build --release -j 2 --bin tidegate >&2
  bin="${CARGO_TARGET_DIR:-target}/release/tidegate"
fi
work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -f "$work/nginx/nginx.pid" ] && kill "$(cat "$work/nginx/nginx.pid")" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_line() { # file prefix
  for _ in $(seq 1 200); do
    url="$(sed -n "s/^$2//p" "$1")"
    [ -n "$url" ] && { echo "$url"; return 0; }
    sleep 0.05
  done
  echo "no '$2' line in $1:" >&2; cat "${1%.out}.err" >&2; return 1
}

"$bin" serve --port 0 --data-dir "$work/data" >"$work/coord.out" 2>"$work/coord.err" &
pids+=($!)
coord="$(wait_line "$work/coord.out" 'tidegate listening on ')"
TIDEGATE_EDGE__CACHE_PATH="$work/edge.json" "$bin" edge --coordinator "$coord" --port 0 >"$work/edge.out" 2>"$work/edge.err" &
pids+=($!)
edge="$(wait_line "$work/edge.out" 'tidegate edge listening on ')"
for _ in $(seq 1 100); do curl -sf "$edge/readyz" >/dev/null && break; sleep 0.1; done

# nginx: the shipped config with our ports, plus the two "clusters" (static answers) and a
# direct server that proxies to blue without asking the edge.
front="$(free_port)"; direct="$(free_port)"; blue="$(free_port)"; green="$(free_port)"
edge_port="${edge##*:}"
mkdir -p "$work/nginx"
sed -e "s/127.0.0.1:8000/127.0.0.1:$front/" -e "s/127.0.0.1:8081/127.0.0.1:$edge_port/" \
    -e "s/127.0.0.1:9001/127.0.0.1:$blue/" -e "s/127.0.0.1:9002/127.0.0.1:$green/" \
    config/nginx/tidegate.conf >"$work/nginx/tidegate.conf"
cat >"$work/nginx/nginx.conf" <<NGINX
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body; proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fcgi; uwsgi_temp_path $work/nginx/uwsgi; scgi_temp_path $work/nginx/scgi;
  include $work/nginx/tidegate.conf;
  server { listen 127.0.0.1:$blue;  location / { return 200 "blue\n"; } }
  server { listen 127.0.0.1:$green; location / { return 200 "green\n"; } }
  server {
    listen 127.0.0.1:$direct;
    location / {
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_pass http://tidegate_blue;
    }
  }
}
NGINX
"$nginx_bin" -p "$work/nginx" -c "$work/nginx/nginx.conf"
for _ in $(seq 1 100); do curl -sf -H 'x-user-id: u1' "http://127.0.0.1:$front/" >/dev/null && break; sleep 0.1; done

cat >"$work/query.lua" <<'LUA'
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", "/v1/tag?user_id=user-" .. (counter % 10000))
end
LUA
cat >"$work/header.lua" <<'LUA'
counter = 0
path = os.getenv("BENCH_PATH")
request = function()
  counter = counter + 1
  return wrk.format("GET", path, { ["x-user-id"] = "user-" .. (counter % 10000) })
end
LUA

# wrk's latency ("850.00us", "1.20ms", "1.01s") in microseconds.
to_us() { awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) print n; else if (v ~ /ms$/) print n * 1000; else if (v ~ /s$/) print n * 1000000; else print n }'; }

run() { # name url script [path]
  BENCH_PATH="${4:-/}" wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -s "$work/$3" "$2" >"$work/wrk.txt"
  local rps p50 p99 non2xx
  rps="$(awk '/^Requests\/sec/ {print $2}' "$work/wrk.txt")"
  p50="$(to_us "$(awk '$1 == "50%" {print $2}' "$work/wrk.txt")")"
  p99="$(to_us "$(awk '$1 == "99%" {print $2}' "$work/wrk.txt")")"
  non2xx="$(awk '/Non-2xx/ {print $NF}' "$work/wrk.txt")"
  [ -z "$non2xx" ] || { echo "$1: $non2xx non-2xx answers" >&2; cat "$work/wrk.txt" >&2; exit 1; }
  printf '%-26s %10.0f req/s  p50 %8.0f us  p99 %8.0f us\n' "$1" "$rps" "$p50" "$p99" >&2
  echo "$rps $p50 $p99"
}

echo "bench-edge: ${rounds} rounds, ${duration}s per target, ${connections} connections, ${threads} wrk threads, $(nproc) cores" >&2
ratios="$work/ratios"
: >"$ratios"
for round in $(seq 1 "$rounds"); do
  echo "-- round $round" >&2
  read -r c_rps c_p50 c_p99 < <(run "coordinator GET /v1/tag" "$coord" query.lua)
  read -r e_rps e_p50 e_p99 < <(run "edge GET /v1/tag" "$edge" query.lua)
  read -r g_rps g_p50 g_p99 < <(run "edge GET /v1/gate" "$edge" header.lua /v1/gate)
  read -r d_rps d_p50 d_p99 < <(run "nginx -> upstream" "http://127.0.0.1:$direct" header.lua /orders)
  read -r n_rps n_p50 n_p99 < <(run "nginx -> edge -> upstream" "http://127.0.0.1:$front" header.lua /orders)
  awk -v c="$c_rps" -v e="$e_rps" -v g="$g_rps" -v d="$d_rps" -v n="$n_rps" \
      -v dp50="$d_p50" -v np50="$n_p50" -v dp99="$d_p99" -v np99="$n_p99" \
      'BEGIN { printf "%.3f %.3f %.3f %.0f %.0f\n", e / c, g / c, n / d, np50 - dp50, np99 - dp99 }' >>"$ratios"
  tail -n 1 "$ratios" | awk '{ printf "   ratios: edge tag/coord tag %.2f, edge gate/coord tag %.2f, nginx+edge/nginx %.2f throughput; edge adds p50 %+d us, p99 %+d us\n", $1, $2, $3, $4, $5 }' >&2
done

summary() { # column label unit
  sort -n -k"$1","$1" "$ratios" | awk -v col="$1" -v label="$2" -v unit="$3" '
    { v[NR] = $col } END { printf "%s: median %s%s (min %s, max %s) over %d rounds\n", label, v[int((NR + 1) / 2)], unit, v[1], v[NR], NR }'
}
echo "== edge vs coordinator (throughput ratios, same wrk settings)"
summary 1 "edge GET /v1/tag / coordinator GET /v1/tag" "x"
summary 2 "edge GET /v1/gate / coordinator GET /v1/tag" "x"
echo "== nginx -> edge -> upstream vs nginx -> upstream"
summary 3 "throughput ratio" "x"
summary 4 "added p50 latency" " us"
summary 5 "added p99 latency" " us"
