#!/usr/bin/env bash
# Every tidegate benchmark, each against a reference measured in the same run, as one ratio table.
#
#   scripts/bench.sh            # full: 5 alternating rounds of 10 s, 1 000 000 log entries
#   scripts/bench.sh --smoke    # a few seconds each, debug build (CI runs this so the script
#                               # cannot rot; its ratios mean nothing)
#   scripts/bench.sh --smoke-build  # only the smoke run's builds (scripts/test.sh makes them
#                               # beside the test run, so the smoke run afterwards starts at once)
#
# Builds tidegate (release) and the bare hyper reference (benches/bare-hyper, its own workspace),
# starts and stops every process it uses on 127.0.0.1, and prints ratios as p50 (min-max) over
# the rounds. Figures are ratios because absolute numbers on shared machines move by 3x from one
# day to the next; the reference runs on the same cores, alternating with the subject.
#
# Rows:
#   tag_rps      GET /v1/tag req/s, tidegate / bare hyper (same body size), wrk 64 connections,
#                on the main port (the default dispatcher, docs/src/configuration.md) and on
#                the fast tag listener ([server] fast_port)
#   tag_tls      GET /v1/tag req/s over HTTPS ([server.tls]): the main port's dispatcher, which
#                terminates TLS itself and keeps the fast path / Rocket alone serving TLS
#                (fast_path = false, what [server.tls] meant before), and / bare hyper over plain
#                HTTP (what TLS costs), wrk 64 connections
#   tail         p99 latency of GET /v1/tag at 4 connections, tidegate / bare hyper (both ports):
#                1 wrk thread, a fresh server per sample, BENCH_TAIL_SAMPLES samples of
#                BENCH_TAIL_SECONDS each, alternating; the CPU used by processes other than the
#                server and wrk during each sample is recorded, and a sample where it exceeds
#                BENCH_TAIL_OTHER_CPU (cores, default 0.10) is left out (and counted); the control
#                is bare hyper spending BENCH_TAIL_SPIN_NS (default 1400, about what tidegate's
#                answer costs more than bare hyper's, tag_cpu) more CPU per request in a busy loop
#   tag_cpu      server CPU time per GET /v1/tag request (utime+stime of the server process over
#                the 64-connection run / requests answered), tidegate / bare hyper (both ports)
#   edge         `tidegate edge` (the default dispatcher, and Rocket alone) GET /v1/tag and the
#                gateway check GET /v1/gate / bare hyper, wrk 64 connections
#   nginx        Debian's nginx with the shipped config/nginx/tidegate.conf (auth_request to the
#                edge, then the colour's upstream, bare hyper standing for both clusters) / the
#                same nginx proxying to bare hyper with no check, wrk 64 connections
#   batch        POST /v1/tag with 10 000 IDs: IDs/s / local Router::tag calls/s (one thread each),
#                on both ports
#   lanes        LaneProducer msgs/s / plain rdkafka FutureProducer msgs/s on the real broker
#                (scripts/kafka.sh), two shapes: a 200 000-message burst and a 10 000 window
#   watch        N SSE subscribers that ack every version: resident memory per stream, and the
#                p99 across streams of dial request -> acknowledged
#   startup      start-up to /readyz with N log entries (from its snapshot) / with a fresh log
#   unleash      (only when asked: BENCH_PARTS="... unleash") tidegate edge GET /v1/tag / Unleash
#                Edge in offline mode GET /api/frontend (one flag, the user in the context), wrk 64
#                connections, alternating; Unleash Edge is built once with `cargo install`
#                (version UNLEASH_EDGE_VERSION, no default features) into
#                ~/.cache/tidegate-bench/unleash-edge and reused
set -euo pipefail
cd "$(dirname "$0")/.."

smoke=0
build_only=0
[ "${1:-}" = "--smoke" ] && smoke=1
[ "${1:-}" = "--smoke-build" ] && smoke=1 && build_only=1
if [ "$smoke" = 1 ]; then
  rounds=1; duration=2; entries=20000; watchers=200; batch_seconds=1; lanes_smoke=smoke
  tail_samples=1; tail_seconds=1; tree_counts="200"; tree_edges=2
else
  rounds="${BENCH_ROUNDS:-5}"; duration="${BENCH_SECONDS:-10}"; entries="${BENCH_ENTRIES:-1000000}"
  watchers="${BENCH_WATCHERS:-10000}"; batch_seconds="${BENCH_BATCH_SECONDS:-3}"; lanes_smoke=""
  tail_samples="${BENCH_TAIL_SAMPLES:-8}"; tail_seconds="${BENCH_TAIL_SECONDS:-5}"
  tree_counts="${BENCH_TREE_LEAVES:-20000 100000}"; tree_edges="${BENCH_TREE_EDGES:-10}"
fi
tail_other_max="${BENCH_TAIL_OTHER_CPU:-0.10}"
tail_spin_ns="${BENCH_TAIL_SPIN_NS:-1400}"
ulimit -n "$(ulimit -Hn)"
# BENCH_PARTS picks a subset (e.g. "tag" or "watch"); the table's other rows are then empty.
parts="${BENCH_PARTS:-tag tail lanes watch tree startup}"
want() { case " $parts " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

if ! command -v wrk >/dev/null 2>&1; then
  echo "installing wrk (Debian package)..." >&2
  (apt-get update -qq && apt-get install -y -qq wrk) >/dev/null \
    || { echo "bench.sh: cannot install wrk" >&2; exit 1; }
fi
command -v curl >/dev/null 2>&1 || { echo "bench.sh: curl is required" >&2; exit 1; }

target="${CARGO_TARGET_DIR:-target}"
# The smoke run proves the script still works, not a speed: it uses the debug build that the
# test command has just made, so CI does not pay for a release build. Its ratios mean nothing.
if [ "$smoke" = 1 ]; then
  profile_flag=(); profile_dir=debug
else
  profile_flag=(--release); profile_dir=release
fi
cargo build "${profile_flag[@]}" -j 2 --bin tidegate >&2
cargo build "${profile_flag[@]}" -j 2 --manifest-path benches/bare-hyper/Cargo.toml \
  --target-dir "$target/bare-hyper" >&2
# The library benches share tidegate's target dir, so they reuse its compiled dependencies.
cargo build "${profile_flag[@]}" -j 2 --manifest-path benches/tidegate-bench/Cargo.toml \
  --target-dir "$target" >&2
if [ "$build_only" = 1 ]; then
  echo "bench: built the smoke run's binaries" >&2
  exit 0
fi
tidegate="$target/$profile_dir/tidegate"
bare="$target/bare-hyper/$profile_dir/bare-hyper"
batch_bench="$target/$profile_dir/batch"
lanes_bench="$target/$profile_dir/lanes"
watchers_bench="$target/$profile_dir/watchers"

work="$(mktemp -d)"
# Every part's result file exists, so a BENCH_PARTS subset prints empty rows instead of failing.
for f in tag tail unleash batch batch-fast lanes watch watch-fast-main watch-fast-fast watch-fast-pipelined startup; do : >"$work/$f.txt"; done
for n in $tree_counts; do : >"$work/tree-$n.txt"; : >"$work/tree-$n-idle.txt"; done
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Starts "$@" with stdout to $work/$name.out, waits for its "listening on URL" line, and sets
# $url and $pid (not a subshell, so the pid reaches the cleanup list).
start() {
  local name="$1"; shift
  "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  pids+=("$pid")
  url=""
  for _ in $(seq 1 300); do
    url="$(sed -n 's/^.* listening on //p' "$work/$name.out")"
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { echo "$name did not start:" >&2; cat "$work/$name.err" >&2; exit 1; }
}

# An operator token for the dial changes of the watch bench.
token="tg_bench_operator"
cat >"$work/bench.toml" <<TOML
[[operators]]
name = "bench"
token_sha256 = "$(printf %s "$token" | sha256sum | cut -d' ' -f1)"
role = "operator"

# Every bench stream registers under the one operator token.
[subscribers]
max_per_caller = 100000

# The tag path's own hyper listener, measured next to the main port (the default dispatcher).
[server]
fast_port = 0

# The watch bench times one version's fan-out from the dial's answer; a move frozen by default
# is three versions and answers at its end.
[freeze]
by_default = false
TOML
cat >"$work/ids.lua" <<'LUA'
-- Random user IDs (a fixed pseudo-random walk over a billion IDs, so every request misses caches).
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", "/v1/tag?user_id=user-" .. ((counter * 2654435761) % 1000000007))
end
LUA

cat >"$work/gate.lua" <<'LUA'
-- The gateway check as nginx's auth_request sends it: the user in a header.
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", "/v1/gate", { ["x-user-id"] = "user-" .. ((counter * 2654435761) % 1000000007) })
end
LUA

hz="$(getconf CLK_TCK)"
# CPU ticks (user + system) a process has used so far.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# wrk_run URL CONNECTIONS SERVER_PID [LUA] -> "rps p99_ms server_cpu_us_per_request"
# At 4 connections or fewer, wrk runs one thread (two would share the 2 cores with the server's
# workers and mostly measure the scheduler).
wrk_run() {
  local out="$work/wrk.txt" threads=2 script="${4:-$work/ids.lua}" before after
  [ "$2" -le 4 ] && threads=1
  before="$(cpu_ticks "$3")"
  wrk -t"$threads" -c"$2" -d"${duration}s" --latency -s "$script" "$1/v1/tag" >"$out"
  after="$(cpu_ticks "$3")"
  local non2xx
  non2xx="$(awk '/Non-2xx/ {print $NF}' "$out")"
  [ -z "$non2xx" ] || { echo "bench.sh: $non2xx non-2xx answers from $1" >&2; cat "$out" >&2; exit 1; }
  awk -v ticks="$((after - before))" -v hz="$hz" '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    / requests in / { n = $1 }
    /^Requests\/sec/ { rps = $2 }
    $1 == "99%" { p99 = ms($2) }
    END { printf "%s %s %.2f\n", rps, p99, (n > 0 ? ticks * 1000000 / hz / n : 0) }' "$out"
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

if want tag; then
start tidegate "$tidegate" serve --address 127.0.0.1 --port 0 --config "$work/bench.toml" --data-dir "$work/data"
tg_url="$url"
tg_pid="$pid"
fast_url="$(sed -n 's/^tidegate fast tag listener at //p' "$work/tidegate.out")"
[ -n "$fast_url" ] || { echo "bench.sh: tidegate did not announce its fast tag listener" >&2; exit 1; }
body_bytes="$(curl -s "$tg_url/v1/tag?user_id=user-1" | wc -c)"
start bare "$bare" 0 "$body_bytes"
bare_url="$url"
bare_pid="$pid"

# Two HTTPS coordinators on a self-signed certificate: the default (the dispatcher terminates
# TLS) and Rocket alone serving TLS (fast_path = false).
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/tls.key" -out "$work/tls.pem" -days 2 \
  -subj "/CN=localhost" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" >/dev/null 2>&1 \
  || { echo "bench.sh: openssl could not make a certificate" >&2; exit 1; }
printf '[server.tls]\ncerts = "%s"\nkey = "%s"\n' "$work/tls.pem" "$work/tls.key" >"$work/tls.toml"
printf '[server]\nfast_path = false\n[server.tls]\ncerts = "%s"\nkey = "%s"\n' "$work/tls.pem" "$work/tls.key" >"$work/tls-rocket.toml"
for t in tls tls-rocket; do
  start "$t" "$tidegate" serve --address 127.0.0.1 --port 0 --config "$work/$t.toml" --data-dir "$work/$t-data"
  printf -v "${t//-/_}_url" %s "$url"
  printf -v "${t//-/_}_pid" %s "$pid"
  [ "$(curl -sk "$url/v1/tag?user_id=user-1" | wc -c)" = "$body_bytes" ] \
    || { echo "bench.sh: $t does not answer the tag over HTTPS" >&2; cat "$work/$t.err" >&2; exit 1; }
done

[ "$(curl -s "$fast_url/v1/tag?user_id=user-1" | wc -c)" = "$body_bytes" ] \
  || { echo "bench.sh: the fast listener's body differs in size from the main port's" >&2; exit 1; }

# Two edges on the coordinator: the default (the dispatcher, http_fast::edge) and Rocket alone.
printf '[edge]\nfast_path = false\n' >"$work/edge-rocket.toml"
: >"$work/edge.toml"
for e in edge edge-rocket; do
  TIDEGATE_EDGE__TOKEN="$token" TIDEGATE_EDGE__CACHE_PATH="$work/$e-cache.json" \
    start "$e" "$tidegate" edge --coordinator "$tg_url" --address 127.0.0.1 --port 0 --config "$work/$e.toml"
  printf -v "${e//-/_}_url" %s "$url"
  printf -v "${e//-/_}_pid" %s "$pid"
  for _ in $(seq 1 100); do curl -sf "$url/readyz" >/dev/null && break; sleep 0.1; done
  curl -sf "$url/readyz" >/dev/null || { echo "bench.sh: $e is not ready" >&2; cat "$work/$e.err" >&2; exit 1; }
done

# nginx in front of bare hyper: with the shipped gate config (auth_request to each edge) and with
# no check at all, each its own nginx (2 workers, as many as cores).
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$nginx_bin" ] || { apt-get install -y -qq nginx >/dev/null 2>&1; nginx_bin=/usr/sbin/nginx; }
[ -x "$nginx_bin" ] || { echo "bench.sh: cannot install nginx" >&2; exit 1; }
# start_nginx NAME SERVER_CONF -> sets $url (and the process joins the cleanup list)
start_nginx() {
  local dir="$work/nginx-$1"
  mkdir -p "$dir/logs"
  printf '%s\n' "$2" >"$dir/site.conf"
  cat >"$dir/nginx.conf" <<NGINX
worker_processes 2;
daemon off;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/cb; proxy_temp_path $dir/px; fastcgi_temp_path $dir/fc;
  uwsgi_temp_path $dir/uw; scgi_temp_path $dir/sc;
  include $dir/site.conf;
}
NGINX
  "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" -t 2>"$dir/test.err" || { cat "$dir/test.err" >&2; exit 1; }
  "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" >/dev/null 2>&1 &
  pids+=("$!")
  url="http://127.0.0.1:$(grep -v '^ *#' "$dir/site.conf" | grep -o 'listen 127.0.0.1:[0-9]*' | head -1 | cut -d: -f2)"
  for _ in $(seq 1 100); do curl -s -o /dev/null "$url/" && break; sleep 0.1; done
}
bare_port="${bare_url##*:}"
shipped_for() {
  sed -e "s/127.0.0.1:8000/127.0.0.1:$(free_port)/" -e "s/127.0.0.1:8081/127.0.0.1:${1##*:}/" \
    -e "s/127.0.0.1:9001/127.0.0.1:$bare_port/" -e "s/127.0.0.1:9002/127.0.0.1:$bare_port/" \
    config/nginx/tidegate.conf
}
start_nginx gate "$(shipped_for "$edge_url")"; nginx_gate_url="$url"
start_nginx gate-rocket "$(shipped_for "$edge_rocket_url")"; nginx_gate_rocket_url="$url"
start_nginx noop "upstream bare { server 127.0.0.1:$bare_port; keepalive 32; }
server { listen 127.0.0.1:$(free_port); location / { proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_pass http://bare; } }"
nginx_noop_url="$url"
cat >"$work/site.lua" <<'LUA'
-- A user's request to the site behind nginx: the user in the header the edge reads.
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", "/shop/cart", { ["x-user-id"] = "user-" .. ((counter * 2654435761) % 1000000007) })
end
LUA
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'x-user-id: u1' "$nginx_gate_url/shop")" = 200 ] \
  || { echo "bench.sh: nginx with the gate does not answer 200" >&2; cat "$work/nginx-gate/logs/error.log" >&2; exit 1; }

echo "tag: $rounds rounds of ${duration}s, body $body_bytes bytes, alternating main port, fast listener, bare hyper, the edges and nginx" >&2
: >"$work/tag.txt"
for round in $(seq 1 "$rounds"); do
  read -r tg_rps _ tg_cpu < <(wrk_run "$tg_url" 64 "$tg_pid")
  read -r fast_rps _ fast_cpu < <(wrk_run "$fast_url" 64 "$tg_pid")
  read -r bare_rps _ bare_cpu < <(wrk_run "$bare_url" 64 "$bare_pid")
  read -r edge_rps _ edge_cpu < <(wrk_run "$edge_url" 64 "$edge_pid")
  read -r gate_rps _ gate_cpu < <(wrk_run "$edge_url" 64 "$edge_pid" "$work/gate.lua")
  read -r edge_rocket_rps _ _ < <(wrk_run "$edge_rocket_url" 64 "$edge_rocket_pid")
  read -r gate_rocket_rps _ _ < <(wrk_run "$edge_rocket_url" 64 "$edge_rocket_pid" "$work/gate.lua")
  read -r nginx_gate_rps _ _ < <(wrk_run "$nginx_gate_url" 64 "$edge_pid" "$work/site.lua")
  read -r nginx_gate_rocket_rps _ _ < <(wrk_run "$nginx_gate_rocket_url" 64 "$edge_rocket_pid" "$work/site.lua")
  read -r nginx_noop_rps _ _ < <(wrk_run "$nginx_noop_url" 64 "$bare_pid" "$work/site.lua")
  read -r tls_rps _ tls_cpu < <(wrk_run "$tls_url" 64 "$tls_pid")
  read -r tls_rocket_rps _ tls_rocket_cpu < <(wrk_run "$tls_rocket_url" 64 "$tls_rocket_pid")
  echo "round $round: main ${tg_rps} req/s, fast ${fast_rps} req/s, bare ${bare_rps} req/s; CPU per request ${tg_cpu} / ${fast_cpu} / ${bare_cpu} us; edge tag ${edge_rps}, gate ${gate_rps} req/s (${edge_cpu} / ${gate_cpu} us), Rocket-alone edge tag ${edge_rocket_rps}, gate ${gate_rocket_rps} req/s; nginx with the gate ${nginx_gate_rps} (Rocket-alone edge ${nginx_gate_rocket_rps}), no-op ${nginx_noop_rps} req/s; HTTPS main port ${tls_rps} req/s (${tls_cpu} us), Rocket alone ${tls_rocket_rps} req/s (${tls_rocket_cpu} us)" >&2
  echo "$tg_rps $bare_rps - - $fast_rps - $tg_cpu $fast_cpu $bare_cpu $edge_rps $gate_rps $edge_rocket_rps $gate_rocket_rps $edge_cpu $gate_cpu $nginx_gate_rps $nginx_gate_rocket_rps $nginx_noop_rps $tls_rps $tls_rocket_rps $tls_cpu $tls_rocket_cpu" >>"$work/tag.txt"
done
echo "batch: $rounds rounds of ${batch_seconds}s, POST /v1/tag with 10 000 IDs and local Router::tag, alternating (main port, then fast port)" >&2
"$batch_bench" "$tg_url" "$rounds" "$batch_seconds" >"$work/batch.txt" 2>"$work/batch.err" \
  || echo "batch_ratio_p50_min_max=FAILED: $(tail -1 "$work/batch.err")" >>"$work/batch.txt"
"$batch_bench" "$tg_url" "$rounds" "$batch_seconds" "$fast_url" >"$work/batch-fast.txt" 2>"$work/batch-fast.err" \
  || echo "batch_ratio_p50_min_max=FAILED: $(tail -1 "$work/batch-fast.err")" >>"$work/batch-fast.txt"
cat "$work/batch.txt" "$work/batch-fast.txt" >&2
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()
fi

if want tail; then
# Busy CPU ticks of the whole machine so far (user, nice, system, irq, softirq, steal).
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# The children's user + system seconds in a file written by `times`.
children_seconds() { awk 'NR == 2 { split($1, u, /[ms]/); split($2, y, /[ms]/); print u[1] * 60 + u[2] + y[1] * 60 + y[2] }' "$1"; }
# tail_sample URL SERVER_PID -> "p99_ms other_cores": wrk's one thread at 4 connections; the
# cores used meanwhile by everything but the server and wrk (wrk's CPU from `times`, exact).
tail_sample() {
  local out="$work/tail-wrk.txt" b0 s0 b1 s1 w0 w1
  b0="$(busy_ticks)"; s0="$(cpu_ticks "$2")"
  # `times` (a builtin, redirected: no fork) gives the CPU of this shell's waited-for children.
  times >"$work/times0"
  wrk -t1 -c4 -d"${tail_seconds}s" --latency -s "$work/ids.lua" "$1/v1/tag" >"$out"
  times >"$work/times1"
  w0="$(children_seconds "$work/times0")"; w1="$(children_seconds "$work/times1")"
  b1="$(busy_ticks)"; s1="$(cpu_ticks "$2")"
  awk -v busy="$((b1 - b0))" -v server="$((s1 - s0))" -v wrk_s="$(awk -v a="$w0" -v b="$w1" 'BEGIN { print b - a }')" \
      -v hz="$hz" -v secs="$tail_seconds" '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    $1 == "99%" { p99 = ms($2) }
    END { other = ((busy - server) / hz - wrk_s) / secs; if (other < 0) other = 0; printf "%s %.3f\n", p99, other }' "$out"
}
printf '[server]\nfast_port = 0\n[freeze]\nby_default = false\n' >"$work/tail.toml"
printf '[server]\nworkers = 1\n[freeze]\nby_default = false\n' >"$work/tail-one.toml"
echo "tail: $tail_samples samples of ${tail_seconds}s per server at 4 connections (1 wrk thread), a fresh server each, alternating main port, fast port, main port with [server] workers = 1, bare hyper, bare hyper spending ${tail_spin_ns} ns more CPU per request; samples with more than $tail_other_max cores used by other processes are left out" >&2
if [ -z "${body_bytes:-}" ]; then
  start tail-size "$tidegate" serve --address 127.0.0.1 --port 0 --config "$work/tail.toml" --data-dir "$work/tail-size"
  body_bytes="$(curl -s "$url/v1/tag?user_id=user-1" | wc -c)"
  kill "$pid"; wait "$pid" 2>/dev/null || true
fi
for sample in $(seq 1 "$tail_samples"); do
  line=""
  for kind in main fast one bare spun; do
    if [ "$kind" = bare ]; then
      start tail-bare "$bare" 0 "$body_bytes"
    elif [ "$kind" = spun ]; then
      start tail-spun "$bare" 0 "$body_bytes" "$tail_spin_ns"
    else
      conf="$work/tail.toml"; [ "$kind" = one ] && conf="$work/tail-one.toml"
      start "tail-$kind" "$tidegate" serve --address 127.0.0.1 --port 0 --config "$conf" --data-dir "$work/tail-$kind-$sample"
      [ "$kind" = fast ] && url="$(sed -n 's/^tidegate fast tag listener at //p' "$work/tail-$kind.out")"
    fi
    # Warm the server (connections, allocator, caches) before the measured run.
    wrk -t1 -c4 -d1s -s "$work/ids.lua" "$url/v1/tag" >/dev/null
    read -r p99 other < <(tail_sample "$url" "$pid")
    line="$line $p99 $other"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  echo "sample $sample: p99 main / fast / main with workers = 1 / bare / bare spending ${tail_spin_ns} ns more per request (other CPU, cores):$line" >&2
  echo "$line" >>"$work/tail.txt"
done
fi

if want unleash; then
# Unleash Edge, built once (it is large: minutes of both cores), outside the default parts.
unleash_version="${UNLEASH_EDGE_VERSION:-19.15.1}"
unleash_root="$HOME/.cache/tidegate-bench/unleash-edge-$unleash_version"
if [ ! -x "$unleash_root/bin/unleash-edge" ]; then
  echo "unleash: building unleash-edge $unleash_version with cargo install (cached in $unleash_root)" >&2
  # Its swagger UI crate downloads the UI's sources from a code host at build time, which this
  # machine cannot reach: give it the same files from npm (swagger-ui-dist), laid out as that
  # archive is (swagger-ui-<version>/dist/).
  swagger_version="${UNLEASH_SWAGGER_UI_VERSION:-5.17.14}"
  swagger_zip="$HOME/.cache/tidegate-bench/swagger-ui-$swagger_version.zip"
  if [ ! -s "$swagger_zip" ]; then
    swagger_tmp="$(mktemp -d)"
    (cd "$swagger_tmp" && npm pack --silent "swagger-ui-dist@$swagger_version" >/dev/null \
      && tar xzf "swagger-ui-dist-$swagger_version.tgz" && mkdir "swagger-ui-$swagger_version" \
      && mv package "swagger-ui-$swagger_version/dist" \
      && python3 -c "import shutil, sys; shutil.make_archive(sys.argv[1][:-4], 'zip', '.', sys.argv[2])" "$swagger_zip" "swagger-ui-$swagger_version") \
      || { echo "bench.sh: cannot fetch swagger-ui-dist $swagger_version from npm" >&2; exit 1; }
    rm -rf "$swagger_tmp"
  fi
  SWAGGER_UI_DOWNLOAD_URL="file://$swagger_zip" nice -n 10 cargo install --locked --no-default-features \
    --version "$unleash_version" --root "$unleash_root" --target-dir "$HOME/.cache/tidegate-bench/unleash-target" \
    -j 2 unleash-edge >&2 || { echo "bench.sh: cargo install unleash-edge failed" >&2; exit 1; }
fi
# One flag for every user (a 100 % userId rollout with two 50 % variants, blue and green): the
# frontend API evaluates it for the user in the query, as tidegate's tag evaluates the dial.
cat >"$work/unleash-features.json" <<'JSON'
{"version": 2, "features": [{"name": "tidegate-color", "type": "release", "enabled": true, "project": "default",
  "strategies": [{"name": "flexibleRollout", "parameters": {"rollout": "100", "stickiness": "userId", "groupId": "tidegate-color"}}],
  "variants": [{"name": "blue", "weight": 500, "weightType": "variable", "stickiness": "userId"},
               {"name": "green", "weight": 500, "weightType": "variable", "stickiness": "userId"}]}]}
JSON
unleash_port="$(free_port)"
"$unleash_root/bin/unleash-edge" --port "$unleash_port" --interface 127.0.0.1 offline \
  --bootstrap-file "$work/unleash-features.json" --tokens "tidegate-bench" \
  >"$work/unleash.out" 2>"$work/unleash.err" &
unleash_pid=$!
pids+=("$unleash_pid")
unleash_url="http://127.0.0.1:$unleash_port"
for _ in $(seq 1 100); do curl -s -o /dev/null "$unleash_url/internal-backstage/health" && break; sleep 0.1; done
cat >"$work/unleash.lua" <<'LUA'
-- The frontend API as a browser SDK calls it: the user in the context, a frontend token.
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", "/api/frontend?userId=user-" .. ((counter * 2654435761) % 1000000007), { ["Authorization"] = "tidegate-bench" })
end
LUA
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: tidegate-bench' "$unleash_url/api/frontend?userId=u1")" = 200 ] \
  || { echo "bench.sh: Unleash Edge does not answer /api/frontend" >&2; cat "$work/unleash.err" >&2; exit 1; }
start unleash-tidegate "$tidegate" serve --address 127.0.0.1 --port 0 --config "$work/tail.toml" --data-dir "$work/unleash-tidegate"
unleash_tg_url="$url"
printf '' >"$work/unleash-edge.toml"
TIDEGATE_EDGE__CACHE_PATH="$work/unleash-edge-cache.json" \
  start unleash-edge "$tidegate" edge --coordinator "$unleash_tg_url" --address 127.0.0.1 --port 0 --config "$work/unleash-edge.toml"
ue_url="$url"; ue_pid="$pid"
for _ in $(seq 1 100); do curl -sf "$ue_url/readyz" >/dev/null && break; sleep 0.1; done
echo "unleash: $rounds rounds of ${duration}s, tidegate edge /v1/tag and Unleash Edge /api/frontend alternating" >&2
for round in $(seq 1 "$rounds"); do
  read -r ue_rps _ ue_cpu < <(wrk_run "$ue_url" 64 "$ue_pid")
  read -r un_rps _ un_cpu < <(wrk_run "$unleash_url" 64 "$unleash_pid" "$work/unleash.lua")
  echo "round $round: tidegate edge ${ue_rps} req/s (${ue_cpu} us), Unleash Edge ${un_rps} req/s (${un_cpu} us)" >&2
  echo "$ue_rps $un_rps $ue_cpu $un_cpu" >>"$work/unleash.txt"
done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()
fi

if want lanes; then
echo "lanes: $rounds alternations of plain FutureProducer and LaneProducer on the real broker" >&2
if bootstrap="$(bash scripts/kafka.sh start 2>"$work/kafka.err" | tail -1)" && [ -n "$bootstrap" ]; then
  "$lanes_bench" "$bootstrap" "$rounds" $lanes_smoke >"$work/lanes.txt" 2>"$work/lanes.err" \
    || echo "lanes_burst_ratio_p50_min_max=FAILED: $(tail -1 "$work/lanes.err")" >>"$work/lanes.txt"
else
  echo "lanes_burst_ratio_p50_min_max=FAILED: Kafka did not start: $(tail -1 "$work/kafka.err")" >"$work/lanes.txt"
fi
cat "$work/lanes.txt" >&2
fi

if want watch; then
# The load tool is benches/tidegate-bench/src/bin/watchers.rs (one thread holds every stream and
# a pool of 16 kept-alive ack connections); scripts/bench/watchers.py is its slower original.
echo "watch: $watchers streams" >&2
start watch "$tidegate" serve --address 127.0.0.1 --port 0 --config "$work/bench.toml" --data-dir "$work/watch-data"
# A round that does not complete is a result too (it is printed in the table), not a crash.
"$watchers_bench" "$url" "$token" "$pid" "$watchers" 3 >"$work/watch.txt" \
  2>"$work/watch.err" || echo "watch_ack_p99_ms_p50_min_max=FAILED: $(tail -1 "$work/watch.err")" >>"$work/watch.txt"
cat "$work/watch.txt" >&2
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()
# On the fast listener three times: acks to the main port, acks to the fast port too,
# and acks to the fast port pipelined (up to 32 written before their answers are read on each of
# the 16 connections: closer to 10 000 separate clients acking at once than one round trip after
# another on 16 shared connections).
for acks in main fast pipelined; do
  depth=1; [ "$acks" = pipelined ] && depth=32
  echo "watch: $watchers streams on the fast listener (dial on the main port, acks: $acks)" >&2
  start "watch-fast-$acks" "$tidegate" serve --address 127.0.0.1 --port 0 --config "$work/bench.toml" --data-dir "$work/watch-fast-$acks-data"
  watch_fast_url="$(sed -n 's/^tidegate fast tag listener at //p' "$work/watch-fast-$acks.out")"
  ack_url="$url"; [ "$acks" != main ] && ack_url="$watch_fast_url"
  WATCHERS_ACK_PIPELINE="$depth" "$watchers_bench" "$url" "$token" "$pid" "$watchers" 3 subscribers "$watch_fast_url" "$ack_url" \
    >"$work/watch-fast-$acks.txt" 2>"$work/watch-fast-$acks.err" \
    || echo "watch_ack_p99_ms_p50_min_max=FAILED: $(tail -1 "$work/watch-fast-$acks.err")" >>"$work/watch-fast-$acks.txt"
  cat "$work/watch-fast-$acks.txt" >&2
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
done
fi

if want tree; then
# The fan-out tree: one coordinator, $tree_edges edges re-serving its watch stream, and N leaf
# streams spread over the edges, acknowledging to the edge they watch. One process holds at most
# its open-file limit of sockets (20 000 here, and raising the hard limit is not permitted), so
# the leaves are held by several load processes of at most 10 000 streams each: the first
# measures its own streams (a uniform sample: stream i watches edge i mod edges) and the time
# until the coordinator counts every leaf applied; the others hold theirs until it is done. Acks
# are pipelined (up to 32 per connection, 16 connections per edge and process), as many separate
# leaves acknowledging at once look to an edge; a stream reset before its first event is opened
# again (as a Router reconnects), and the count is printed.
for leaves in $tree_counts; do
  echo "tree: $leaves leaves over $tree_edges edges" >&2
  start "tree-$leaves-coordinator" "$tidegate" serve --address 127.0.0.1 --port 0 --config "$work/bench.toml" --data-dir "$work/tree-$leaves-data"
  coordinator_url="$url"; coordinator_pid="$pid"
  edge_urls=(); edge_pids=()
  for e in $(seq 1 "$tree_edges"); do
    cat >"$work/edge-$e.toml" <<TOML
$(cat "$work/bench.toml")
[edge]
subscriber_id = "bench-edge-$e"
zone = "az-a"
token = "$token"
max_leaves = 100000
cache_path = "$work/tree-$leaves-edge-$e.json"
TOML
    start "tree-$leaves-edge-$e" "$tidegate" edge --address 127.0.0.1 --port 0 --coordinator "$coordinator_url" --config "$work/edge-$e.toml"
    edge_urls+=("$url"); edge_pids+=("$pid")
  done
  streams="$(IFS=,; echo "${edge_urls[*]}")"
  sleep 1
  awk '/VmRSS/ { print "tree_coordinator_idle_kb=" $2 }' "/proc/$coordinator_pid/status" >"$work/tree-$leaves-idle.txt"
  per=10000; [ "$leaves" -lt "$per" ] && per="$leaves"
  processes=$(( (leaves + per - 1) / per ))
  holders=()
  for k in $(seq 1 $((processes - 1))); do
    WATCHERS_ACK_PIPELINE=32 WATCHERS_ID_OFFSET=$((k * per)) WATCHERS_HOLD_SECONDS=600 \
      "$watchers_bench" "$coordinator_url" "$token" "$coordinator_pid" "$per" 0 subscribers "$streams" stream \
      >"$work/tree-$leaves-holder-$k.txt" 2>"$work/tree-$leaves-holder-$k.err" &
    holders+=("$!")
    # One process's connects at a time (10 000 in about a second).
    sleep 2
  done
  WATCHERS_ACK_PIPELINE=32 WATCHERS_EXPECT_LIVE="$leaves" WATCHERS_EDGE_PIDS="$(IFS=,; echo "${edge_pids[*]}")" \
    "$watchers_bench" "$coordinator_url" "$token" "$coordinator_pid" "$per" 3 subscribers "$streams" stream \
    >"$work/tree-$leaves.txt" 2>"$work/tree-$leaves.err" \
    || echo "watch_coordinator_all_applied_ms_p50_min_max=FAILED: $(head -1 "$work/tree-$leaves.err"; tail -1 "$work/tree-$leaves.err")" >>"$work/tree-$leaves.txt"
  for h in "${holders[@]}"; do kill "$h" 2>/dev/null || true; done
  cat "$work/tree-$leaves.txt" >&2
  # SIGKILL: a graceful stop would wait for every open watch stream to end.
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
done
fi

if want startup; then
echo "startup: $entries log entries, $rounds rounds" >&2
python3 scripts/bench/startup.py "$tidegate" "$work/startup" "$entries" "$rounds" >"$work/startup.txt"
cat "$work/startup.txt" >&2
fi

# p50 (min-max) of a column of numbers.
dist() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { printf "- (no sample)"; exit } m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f (%.2f-%.2f)", m, v[1], v[NR] }'; }

startup_ratio="$(sed -n 's/^startup_ratio_p50_min_max=//p' "$work/startup.txt" | awk -F/ '{ printf "%s (%s-%s)", $1, $2, $3 }')"
startup_ms="$(sed -n 's/^startup_snapshot_ms_p50_min_max=//p' "$work/startup.txt" | awk -F/ '{ printf "%s ms (%s-%s)", $1, $2, $3 }')"
fresh_ms="$(sed -n 's/^startup_fresh_ms_p50_min_max=//p' "$work/startup.txt" | awk -F/ '{ printf "%s ms (%s-%s)", $1, $2, $3 }')"
full_ms="$(sed -n 's/^startup_full_replay_ms=//p' "$work/startup.txt")"

echo
echo "tidegate benchmarks: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load generator on the same cores, $rounds round(s)"
echo
echo "| measure | ratio p50 (min-max) | target | subject / reference |"
echo "|---|---|---|---|"
echo "| GET /v1/tag req/s, tidegate (main port, default config: the dispatcher) / bare hyper, wrk 64 conns ${duration}s | $(awk '{print $1/$2}' "$work/tag.txt" | dist) | >= 0.6 | $(awk '{print $1}' "$work/tag.txt" | dist | cut -d' ' -f1) / $(awk '{print $2}' "$work/tag.txt" | dist | cut -d' ' -f1) req/s |"
echo "| GET /v1/tag req/s, tidegate (fast port) / bare hyper, wrk 64 conns ${duration}s | $(awk '{print $5/$2}' "$work/tag.txt" | dist) | >= 0.6 | $(awk '{print $5}' "$work/tag.txt" | dist | cut -d' ' -f1) / $(awk '{print $2}' "$work/tag.txt" | dist | cut -d' ' -f1) req/s |"
echo "| server CPU per GET /v1/tag, tidegate (main port, the dispatcher) / bare hyper, 64 conns | $(awk '{print $7/$9}' "$work/tag.txt" | dist) | <= 1.1 | $(awk '{print $7}' "$work/tag.txt" | dist | cut -d' ' -f1) / $(awk '{print $9}' "$work/tag.txt" | dist | cut -d' ' -f1) us |"
echo "| server CPU per GET /v1/tag, tidegate (fast port) / bare hyper, 64 conns | $(awk '{print $8/$9}' "$work/tag.txt" | dist) | <= 1.1 | $(awk '{print $8}' "$work/tag.txt" | dist | cut -d' ' -f1) / $(awk '{print $9}' "$work/tag.txt" | dist | cut -d' ' -f1) us |"
echo "| tidegate edge GET /v1/tag req/s (default: the dispatcher) / bare hyper, wrk 64 conns | $(awk '{print $10/$2}' "$work/tag.txt" | dist) | >= 0.85 | $(awk '{print $10}' "$work/tag.txt" | dist | cut -d' ' -f1) / $(awk '{print $2}' "$work/tag.txt" | dist | cut -d' ' -f1) req/s |"
echo "| tidegate edge GET /v1/gate req/s (default: the dispatcher) / bare hyper, wrk 64 conns | $(awk '{print $11/$2}' "$work/tag.txt" | dist) | >= 0.85 | $(awk '{print $11}' "$work/tag.txt" | dist | cut -d' ' -f1) / $(awk '{print $2}' "$work/tag.txt" | dist | cut -d' ' -f1) req/s |"
echo "| tidegate edge on Rocket alone (fast_path = false): GET /v1/tag, GET /v1/gate req/s / bare hyper | $(awk '{print $12/$2}' "$work/tag.txt" | dist), $(awk '{print $13/$2}' "$work/tag.txt" | dist) | | $(awk '{print $12}' "$work/tag.txt" | dist | cut -d' ' -f1), $(awk '{print $13}' "$work/tag.txt" | dist | cut -d' ' -f1) req/s |"
echo "| server CPU per request, tidegate edge (dispatcher) GET /v1/tag, GET /v1/gate / bare hyper | $(awk '{print $14/$9}' "$work/tag.txt" | dist), $(awk '{print $15/$9}' "$work/tag.txt" | dist) | <= 1.1 | $(awk '{print $14}' "$work/tag.txt" | dist | cut -d' ' -f1), $(awk '{print $15}' "$work/tag.txt" | dist | cut -d' ' -f1) / $(awk '{print $9}' "$work/tag.txt" | dist | cut -d' ' -f1) us |"
echo "| nginx + auth_request to tidegate edge (shipped config) / nginx with a no-op upstream, wrk 64 conns | $(awk '{print $16/$18}' "$work/tag.txt" | dist) | >= 0.7 | $(awk '{print $16}' "$work/tag.txt" | dist | cut -d' ' -f1) / $(awk '{print $18}' "$work/tag.txt" | dist | cut -d' ' -f1) req/s |"
echo "| nginx + auth_request to a Rocket-alone edge (fast_path = false) / nginx with a no-op upstream | $(awk '{print $17/$18}' "$work/tag.txt" | dist) | | $(awk '{print $17}' "$work/tag.txt" | dist | cut -d' ' -f1) / $(awk '{print $18}' "$work/tag.txt" | dist | cut -d' ' -f1) req/s |"
echo "| GET /v1/tag req/s over HTTPS, main port (the dispatcher terminates TLS) / Rocket alone serving TLS (fast_path = false) | $(awk 'NF >= 22 {print $19/$20}' "$work/tag.txt" | dist) | | $(awk 'NF >= 22 {print $19}' "$work/tag.txt" | dist | cut -d' ' -f1) / $(awk 'NF >= 22 {print $20}' "$work/tag.txt" | dist | cut -d' ' -f1) req/s |"
echo "| GET /v1/tag req/s over HTTPS, main port / bare hyper over plain HTTP (what TLS costs) | $(awk 'NF >= 22 {print $19/$2}' "$work/tag.txt" | dist) | | CPU per request $(awk 'NF >= 22 {print $21}' "$work/tag.txt" | dist | cut -d' ' -f1) / $(awk '{print $9}' "$work/tag.txt" | dist | cut -d' ' -f1) us (Rocket alone over TLS: $(awk 'NF >= 22 {print $22}' "$work/tag.txt" | dist | cut -d' ' -f1) us) |"
# The tail rows: samples where another process used more than the threshold are left out.
tail_kept() { awk -v max="$tail_other_max" 'NF >= 10 && $2 <= max && $4 <= max && $6 <= max && $8 <= max && $10 <= max' "$work/tail.txt"; }
tail_left="$(awk -v max="$tail_other_max" 'NF >= 10 && ($2 > max || $4 > max || $6 > max || $8 > max || $10 > max)' "$work/tail.txt" | wc -l)"
tail_other="$(awk 'NF >= 10 { print $2; print $4; print $6; print $8; print $10 }' "$work/tail.txt" | dist)"
echo "| GET /v1/tag p99 at 4 conns (1 wrk thread, fresh server per sample), tidegate (main port, the dispatcher) / bare hyper | $(tail_kept | awk '{print $1/$7}' | dist) | <= 1.3 | $(tail_kept | awk '{print $1}' | dist | cut -d' ' -f1) / $(tail_kept | awk '{print $7}' | dist | cut -d' ' -f1) ms; n = $(tail_kept | wc -l), $tail_left left out (other CPU > $tail_other_max cores; other CPU over all samples $tail_other cores) |"
echo "| GET /v1/tag p99 at 4 conns (1 wrk thread, fresh server per sample), tidegate (fast port) / bare hyper | $(tail_kept | awk '{print $3/$7}' | dist) | <= 1.3 | $(tail_kept | awk '{print $3}' | dist | cut -d' ' -f1) / $(tail_kept | awk '{print $7}' | dist | cut -d' ' -f1) ms |"
echo "| GET /v1/tag p99 at 4 conns (as above), tidegate main port with [server] workers = 1 / bare hyper (two workers) | $(tail_kept | awk '{print $5/$7}' | dist) | | $(tail_kept | awk '{print $5}' | dist | cut -d' ' -f1) / $(tail_kept | awk '{print $7}' | dist | cut -d' ' -f1) ms |"
echo "| GET /v1/tag p99 at 4 conns (as above), control: bare hyper spending $tail_spin_ns ns more CPU per request / bare hyper | $(tail_kept | awk '{print $9/$7}' | dist) | | $(tail_kept | awk '{print $9}' | dist | cut -d' ' -f1) / $(tail_kept | awk '{print $7}' | dist | cut -d' ' -f1) ms |"
if [ -s "$work/unleash.txt" ]; then
echo "| tidegate edge GET /v1/tag / Unleash Edge offline GET /api/frontend, req/s, wrk 64 conns | $(awk '{print $1/$2}' "$work/unleash.txt" | dist) | >= 5 | $(awk '{print $1}' "$work/unleash.txt" | dist | cut -d' ' -f1) / $(awk '{print $2}' "$work/unleash.txt" | dist | cut -d' ' -f1) req/s; CPU per request $(awk '{print $3}' "$work/unleash.txt" | dist | cut -d' ' -f1) / $(awk '{print $4}' "$work/unleash.txt" | dist | cut -d' ' -f1) us |"
fi
# key=P50/MIN/MAX in FILE -> "P50 (MIN-MAX)"
kv() { sed -n "s/^$2=//p" "$work/$1" | awk -F/ '{ if (NF == 3) printf "%s (%s-%s)", $1, $2, $3; else print }'; }
kv1() { sed -n "s/^$2=//p" "$work/$1"; }
echo "| POST /v1/tag with 10 000 IDs (main port): IDs/s / local Router::tag calls/s | $(kv batch.txt batch_ratio_p50_min_max) | >= 0.3 | $(kv1 batch.txt batch_http_ids_per_s_p50) IDs/s / $(kv1 batch.txt batch_local_calls_per_s_p50) calls/s |"
echo "| POST /v1/tag with 10 000 IDs (fast port): IDs/s / local Router::tag calls/s | $(kv batch-fast.txt batch_ratio_p50_min_max) | >= 0.3 | $(kv1 batch-fast.txt batch_http_ids_per_s_p50) IDs/s / $(kv1 batch-fast.txt batch_local_calls_per_s_p50) calls/s |"
echo "| LaneProducer / plain FutureProducer, 200 000 x 100 B burst, random users, fresh topics | $(kv lanes.txt lanes_burst_ratio_p50_min_max) | >= 0.95 | $(kv1 lanes.txt lanes_burst_lane_msgs_per_s_p50) / $(kv1 lanes.txt lanes_burst_plain_msgs_per_s_p50) msg/s |"
echo "| LaneProducer with the \`tg\` header on every message (\`RouteMarks::Header\`) / plain FutureProducer, burst | $(kv lanes.txt lanes_burst_header_ratio_p50_min_max) | | |"
echo "| LaneProducer / plain FutureProducer, 100 000 x 100 B, 10 000 in flight, 1 000 users | $(kv lanes.txt lanes_window_ratio_p50_min_max) | >= 0.95 | $(kv1 lanes.txt lanes_window_lane_msgs_per_s_p50) / $(kv1 lanes.txt lanes_window_plain_msgs_per_s_p50) msg/s |"
echo "| LaneProducer / plain FutureProducer, burst: sending thread's time per enqueued message (and Rust allocations per message) | - | | $(kv1 lanes.txt lanes_burst_lane_enqueue_ns_per_msg_p50) / $(kv1 lanes.txt lanes_burst_plain_enqueue_ns_per_msg_p50) ns ($(kv1 lanes.txt lanes_burst_lane_rust_allocs_per_msg_p50) / $(kv1 lanes.txt lanes_burst_plain_rust_allocs_per_msg_p50)); parts: tag $(kv1 lanes.txt lanes_part_tag_ns_per_msg), ring $(kv1 lanes.txt lanes_part_ring_ns_per_msg), header value $(kv1 lanes.txt lanes_part_encode_ns_per_msg), librdkafka header list $(kv1 lanes.txt lanes_part_headers_tg_ns_per_msg) ns |"
w() { sed -n "s/^$1=//p" "$work/watch.txt"; }
wf() { sed -n "s/^$1=//p" "$work/watch-fast-main.txt"; }
wff() { sed -n "s/^$1=//p" "$work/watch-fast-fast.txt"; }
wfp() { sed -n "s/^$1=//p" "$work/watch-fast-pipelined.txt"; }
echo "| watch: resident memory per open stream, $watchers streams | $(w watch_rss_per_stream_kb) KB | <= 8 KB | $(w watch_rss_streams_kb) KB with the streams, $(w watch_rss_idle_kb) KB idle |"
echo "| watch: dial -> all $watchers applied (event received), p99 across streams (p50/min/max of 3 rounds) | $(w watch_applied_p99_ms_p50_min_max) ms | | |"
echo "| watch: dial -> all $watchers acked, p99 across streams (p50/min/max of 3 rounds) | $(w watch_ack_p99_ms_p50_min_max) ms | <= 250 ms | |"
echo "| watch on the fast port: resident memory per open stream, $watchers streams | $(wf watch_rss_per_stream_kb) KB | <= 8 KB | $(wf watch_rss_streams_kb) KB with the streams, $(wf watch_rss_idle_kb) KB idle |"
echo "| watch on the fast port, acks to the main port: dial -> all $watchers applied / acked, p99 across streams (p50/min/max of 3 rounds) | $(wf watch_applied_p99_ms_p50_min_max) / $(wf watch_ack_p99_ms_p50_min_max) ms | <= 250 ms | |"
echo "| watch on the fast port, acks to the fast port: dial -> all $watchers applied / acked, p99 across streams (p50/min/max of 3 rounds) | $(wff watch_applied_p99_ms_p50_min_max) / $(wff watch_ack_p99_ms_p50_min_max) ms | <= 250 ms | |"
echo "| watch on the fast port, acks to the fast port pipelined (up to 32 per connection): dial -> all $watchers applied / acked, p99 across streams (p50/min/max of 3 rounds) | $(wfp watch_applied_p99_ms_p50_min_max) / $(wfp watch_ack_p99_ms_p50_min_max) ms | <= 250 ms | |"
for leaves in $tree_counts; do
  t() { sed -n "s/^$1=//p" "$work/tree-$leaves.txt"; }
  echo "| fan-out tree, $leaves leaves over $tree_edges edges: dial -> every leaf applied and acknowledged as the coordinator counts them (p50/min/max of 3 rounds) | $(t watch_coordinator_all_applied_ms_p50_min_max) ms | <= 1 s | sample of $(t watch_streams) leaves: applied p99 $(t watch_applied_p99_ms_p50_min_max) ms, acked by the edge p99 $(t watch_ack_p99_ms_p50_min_max) ms |"
  echo "| fan-out tree, $leaves leaves: coordinator resident memory and CPU per dial round | $(t watch_coordinator_rss_after_kb) KB, $(t watch_coordinator_cpu_ms_per_round) ms | flat in leaves | $(sed -n 's/^tree_coordinator_idle_kb=//p' "$work/tree-$leaves-idle.txt") KB with only the edges' streams; the edges together $(t watch_edges_rss_kb) KB |"
done
echo "| start-up to /readyz, $entries entries (snapshot) / fresh log | $startup_ratio | (<= 1 s) | $startup_ms / $fresh_ms; full replay without snapshot: $full_ms ms |"

# No thresholds, but a measure that could not be taken at all fails the run (so --smoke in CI
# notices when a change breaks a benchmark, as the token rules once broke the watch streams).
if grep -q "FAILED" "$work"/tree-*.txt "$work/watch.txt" "$work/watch-fast-main.txt" "$work/watch-fast-fast.txt" "$work/watch-fast-pipelined.txt" "$work/startup.txt" "$work/batch.txt" "$work/batch-fast.txt" "$work/lanes.txt" 2>/dev/null; then
  echo "bench.sh: a benchmark could not be measured (FAILED above)" >&2
  exit 1
fi
