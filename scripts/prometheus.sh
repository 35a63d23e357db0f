#!/usr/bin/env bash
# Runs a real Prometheus server (Debian's `prometheus` package) on a loopback port, for
# integration tests and CI.
#
#   scripts/prometheus.sh install                    # install Debian's prometheus/promtool if missing
#   scripts/prometheus.sh start TARGET [TARGET...]   # TARGET = host:port serving /metrics
#   scripts/prometheus.sh wait-scrape [SECONDS]      # wait until every target's `up` is 1
#   scripts/prometheus.sh status                     # exit 0 and print URL if running, else 1
#   scripts/prometheus.sh url                        # print the base URL
#   scripts/prometheus.sh reload [TARGET...]         # POST /-/reload (new targets optional)
#   scripts/prometheus.sh stop                       # TERM, then KILL; remove the TSDB data
#
# Environment:
#   PROM_RUN_DIR          run dir: config, pid, log, url, data  (default /tmp/tidegate-prometheus)
#   PROM_PORT             listen port on 127.0.0.1               (default: a free port)
#   PROM_SCRAPE_INTERVAL  scrape interval                        (default 1s)
#   PROM_RULE_FILES       space-separated rule files to load; evaluated every 1s (optional)
#   PROM_JOB              the scrape job's name (default tidegate; tidegate-edge for edges)
#   PROM_START_TIMEOUT    seconds to wait for /-/ready           (default 30)
#   PROM_STOP_TIMEOUT     seconds between TERM and KILL          (default 10)
#
# `start` prints the base URL (http://127.0.0.1:PORT) on stdout and writes it to
# $PROM_RUN_DIR/url, which is what the Rust integration tests read. Everything else the
# script says goes to stderr, so `url="$(scripts/prometheus.sh start ...)"` captures only
# the URL. The server keeps running after `start` returns; call `stop` when done.
#
# The first scrape lands about 5 s after `start` or `reload`, whatever the scrape interval:
# Prometheus hands new targets to the scraper in 5 s batches. Use `wait-scrape` rather
# than a sleep.
#
# We never use the packaged service (/etc/prometheus, /var/lib/prometheus, port 9090):
# our instance has its own config, data dir and port, so it cannot collide with it.
set -euo pipefail

RUN_DIR="${PROM_RUN_DIR:-/tmp/tidegate-prometheus}"
SCRAPE_INTERVAL="${PROM_SCRAPE_INTERVAL:-1s}"
START_TIMEOUT="${PROM_START_TIMEOUT:-30}"
STOP_TIMEOUT="${PROM_STOP_TIMEOUT:-10}"
PROMETHEUS=/usr/bin/prometheus
PROMTOOL=/usr/bin/promtool
# The scrape job's name: the rules select `tidegate` for coordinators and `tidegate-edge` for edges.
JOB="${PROM_JOB:-tidegate}"

CONFIG="$RUN_DIR/prometheus.yml"
DATA_DIR="$RUN_DIR/data"
LOG="$RUN_DIR/prometheus.log"
PID_FILE="$RUN_DIR/pid"
URL_FILE="$RUN_DIR/url"
TARGETS_FILE="$RUN_DIR/targets"       # one host:port per line; read by wait-scrape and reload
RULES_FILE="$RUN_DIR/rule_files"      # absolute rule file paths, one per line; read by reload
INTERVAL_FILE="$RUN_DIR/scrape_interval"

say() { echo "prometheus.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

usage() { # EXIT_CODE: prints the header comment above as help
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit "$1"
}

# The run dir holds a `data` dir that `stop` deletes; refuse paths where that would hurt.
case "$RUN_DIR" in
  /*) ;;
  *) die "PROM_RUN_DIR must be an absolute path (got '$RUN_DIR')" ;;
esac
[ "$RUN_DIR" != "/" ] || die "PROM_RUN_DIR must not be /"

# --- installation --------------------------------------------------------------------------

ensure_installed() {
  if [ -x "$PROMETHEUS" ] && [ -x "$PROMTOOL" ]; then
    return
  fi
  [ "$(id -u)" -eq 0 ] || die "$PROMETHEUS or $PROMTOOL is missing and we are not root; run: apt-get install -y --no-install-recommends prometheus"
  say "installing Debian package 'prometheus' (one-off, ~10 s)..."

  # The package's postinst enables prometheus.service and runs `invoke-rc.d prometheus
  # start`. In a container without an init system invoke-rc.d only warns ("could not
  # determine current runlevel"), but on a host running sysvinit it would start the
  # packaged server on :9090 with /var/lib/prometheus, and with a broken init the start
  # could fail the whole install. A policy-rc.d that exits 101 ("not allowed") makes
  # invoke-rc.d skip the start, which postinst treats as success. Docker images usually
  # ship one; if there is none, we put one in place for this install only.
  local policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# temporary, from tidegate scripts/prometheus.sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT # also if we are interrupted mid-install
  fi

  local log rc=0
  log="$(mktemp)"
  {
    apt-get update -qq &&
      # --no-install-recommends: the recommends pull in prometheus-node-exporter and friends
      # (more services wanting to start, ~25 more packages) that we do not use.
      # The lock timeout lets us queue behind another apt run (e.g. another script's install).
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o DPkg::Lock::Timeout=300 prometheus
  } >"$log" 2>&1 || rc=$?
  if [ -n "$(trap -p EXIT)" ]; then
    rm -f "$policy"
    trap - EXIT
  fi

  if [ "$rc" -ne 0 ] || [ ! -x "$PROMETHEUS" ] || [ ! -x "$PROMTOOL" ]; then
    tail -n 30 "$log" >&2
    rm -f "$log"
    die "installing the Debian package 'prometheus' failed (apt-get exit $rc); see the output above"
  fi
  rm -f "$log"
  say "installed: $("$PROMETHEUS" --version 2>&1 | head -n 1)"
}

# --- process state -------------------------------------------------------------------------

# Prints the pid of *our* server, or fails. The pid file alone is not enough: after a
# crash or reboot the pid may belong to an unrelated process, so we also check that the
# command line is a prometheus using this run dir's config.
running_pid() {
  local pid
  [ -f "$PID_FILE" ] || return 1
  pid="$(cat "$PID_FILE" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--config.file=$CONFIG" || return 1
  echo "$pid"
}

# True if PID exists and has not exited. `kill -0` is not enough: the server is detached
# (its parent is PID 1), and an exited process stays a zombie until PID 1 reaps it, which
# in some containers takes seconds. /proc/PID/stat's state field is Z for a zombie.
alive() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }" # drop "PID (comm) "; comm may contain spaces
  [ -n "$stat" ] && [ "${stat%% *}" != Z ]
}

base_url() {
  [ -s "$URL_FILE" ] || return 1
  cat "$URL_FILE"
}

# Prints the URL of the running server, or dies with WHY.
require_running() {
  local url
  if ! running_pid >/dev/null || ! url="$(base_url)"; then
    die "not running; $1"
  fi
  echo "$url"
}

http_code() { # METHOD URL -> prints the HTTP status, 000 if nothing answered
  curl -s -o /dev/null -w '%{http_code}' --max-time 2 -X "$1" "$2" || true
}

# Serialises start/stop/reload on one run dir, so parallel callers (e.g. several test
# binaries each calling `start`) get one server instead of racing for the pid file.
lock_run_dir() {
  mkdir -p "$RUN_DIR"
  exec 9>"$RUN_DIR/lock"
  flock -w 120 9 || die "timed out waiting for the lock on $RUN_DIR/lock"
}

# --- config --------------------------------------------------------------------------------

validate_target() {
  # Prometheus wants bare host:port here; a scheme or path would be a silent misconfig.
  [[ "$1" =~ ^[A-Za-z0-9._-]+:[0-9]+$ || "$1" =~ ^\[[0-9A-Fa-f:.]+\]:[0-9]+$ ]] ||
    die "target '$1' is not host:port (no scheme, no path; metrics_path is /metrics)"
}

# Writes the config for the given settings to $CONFIG.tmp and has promtool check it
# (promtool also parses every rule file the config references). Prints promtool's output
# and dies if it is rejected. Usage: render_config INTERVAL RULES_LIST TARGETS_LIST, where
# the lists are files with one entry per line.
render_config() {
  local interval="$1" rules="$2" targets="$3" tmp="$CONFIG.tmp" f t
  {
    echo "# Generated by scripts/prometheus.sh; rewritten on every start/reload."
    echo "global:"
    echo "  scrape_interval: $interval"
    # Prometheus rejects scrape_timeout > scrape_interval; make them equal explicitly.
    echo "  scrape_timeout: $interval"
    echo "  evaluation_interval: 1s"
    if [ -s "$rules" ]; then
      echo "rule_files:"
      while IFS= read -r f; do echo "  - '$f'"; done <"$rules"
    fi
    echo "scrape_configs:"
    echo "  - job_name: $JOB"
    echo "    metrics_path: /metrics"
    echo "    scheme: http"
    echo "    static_configs:"
    echo "      - targets:"
    while IFS= read -r t; do echo "          - '$t'"; done <"$targets"
  } >"$tmp"
  if ! "$PROMTOOL" check config "$tmp" >"$RUN_DIR/promtool.out" 2>&1; then
    cat "$RUN_DIR/promtool.out" >&2
    die "promtool check config rejected the generated config (promtool output above)"
  fi
}

# Builds the config for TARGET... plus PROM_RULE_FILES and SCRAPE_INTERVAL, checks it,
# and only then commits it: the config, and the settings files that `reload` and
# `wait-scrape` read. A rejected change leaves the previous state untouched.
record_settings() {
  local t f
  for t in "$@"; do validate_target "$t"; done
  [[ "$SCRAPE_INTERVAL" =~ ^[0-9]+(ms|s|m|h)$ ]] ||
    die "PROM_SCRAPE_INTERVAL='$SCRAPE_INTERVAL' is not a duration like 1s or 500ms"

  # Leave no half-made settings behind if anything below dies.
  trap 'rm -f "$TARGETS_FILE.new" "$RULES_FILE.new" "$INTERVAL_FILE.new" "$CONFIG.tmp"' EXIT
  printf '%s\n' "$@" >"$TARGETS_FILE.new"
  : >"$RULES_FILE.new"
  for f in ${PROM_RULE_FILES:-}; do
    [ -f "$f" ] || die "rule file '$f' (from PROM_RULE_FILES) does not exist"
    # Prometheus resolves relative rule paths against the config's directory (the run
    # dir), not the caller's cwd, so store absolute paths.
    realpath "$f" >>"$RULES_FILE.new"
  done
  echo "$SCRAPE_INTERVAL" >"$INTERVAL_FILE.new"

  render_config "$SCRAPE_INTERVAL" "$RULES_FILE.new" "$TARGETS_FILE.new"

  # Renames, so Prometheus (on reload) never reads a half-written config.
  mv -f "$CONFIG.tmp" "$CONFIG"
  mv -f "$TARGETS_FILE.new" "$TARGETS_FILE"
  mv -f "$RULES_FILE.new" "$RULES_FILE"
  mv -f "$INTERVAL_FILE.new" "$INTERVAL_FILE"
  trap - EXIT
}

# --- start ---------------------------------------------------------------------------------

# A port below the kernel's ephemeral range (so outgoing connections cannot be holding
# it) that nothing on 127.0.0.1 accepts connections on. Another process may still grab
# it before Prometheus binds; cmd_start retries with a fresh port in that case.
pick_port() {
  local low _ port
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range
  [ "$low" -gt 20000 ] || low=32768
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % (low - 20000)))
    # bash's /dev/tcp: the connect succeeds only if something listens there.
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  die "could not find a free loopback port in 50 tries"
}

# Launches Prometheus on PORT, in the background, detached. Prints nothing; sets $pid.
launch() {
  local port="$1"
  rm -f "$PID_FILE"
  : >"$LOG" # one log per attempt, so the bind-error check below sees only this one
  # - setsid: own session, so a Ctrl-C or job-control signal aimed at the caller (a test
  #   runner, CI shell) does not take the server down mid-run; `stop` ends it explicitly.
  # - The wrapper writes its own pid and then execs, so the pid file holds Prometheus's
  #   pid even if setsid had to fork.
  # - stdin/stdout/stderr all point away from the caller: a caller that captures our
  #   stdout (`$(...)`, Rust's Command::output) would otherwise wait for Prometheus to exit.
  # - 9>&-: fd 9 holds the run dir's flock; a server that inherited it would keep the lock
  #   for its whole life and the next start/stop would wait for it in vain.
  # shellcheck disable=SC2016  # $$, $0 and $@ are meant for the inner bash
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PID_FILE" \
    "$PROMETHEUS" \
    --config.file="$CONFIG" \
    --storage.tsdb.path="$DATA_DIR" \
    --web.listen-address="127.0.0.1:$port" \
    --web.enable-lifecycle \
    </dev/null >>"$LOG" 2>&1 9>&- &
  for _ in $(seq 1 50); do
    [ -s "$PID_FILE" ] && break
    sleep 0.1
  done
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [ -n "$pid" ] || die "Prometheus did not start (no pid file); log: $LOG"
}

cmd_start() {
  [ "$#" -ge 1 ] || die "usage: $0 start TARGET [TARGET...]   (TARGET = host:port)"
  local t
  for t in "$@"; do validate_target "$t"; done
  ensure_installed
  lock_run_dir

  local pid url
  if pid="$(running_pid)"; then
    # Already running from this run dir. Same targets and settings: nothing to do, so
    # `start` is idempotent. Different ones: refuse rather than silently scrape the
    # wrong thing; the caller can `reload TARGET...` or `stop` first.
    url="$(base_url)"
    local f wanted_rules=""
    for f in ${PROM_RULE_FILES:-}; do wanted_rules+="$(realpath -m "$f")"$'\n'; done
    if [ "$(printf '%s\n' "$@")" = "$(cat "$TARGETS_FILE")" ] &&
      [ "$SCRAPE_INTERVAL" = "$(cat "$INTERVAL_FILE")" ] &&
      [ "${wanted_rules%$'\n'}" = "$(cat "$RULES_FILE")" ] &&
      { [ -z "${PROM_PORT:-}" ] || [ "$url" = "http://127.0.0.1:$PROM_PORT" ]; }; then
      say "already running (pid $pid) with the same settings; reusing it"
      echo "$url"
      return 0
    fi
    die "already running (pid $pid, $url) with other settings; run '$0 stop' first, or '$0 reload TARGET...' to change targets"
  fi

  # Not running: whatever is in the run dir is left over from an earlier run.
  rm -rf "$DATA_DIR"
  rm -f "$PID_FILE" "$URL_FILE"
  record_settings "$@"

  local port deadline code
  if [ -n "${PROM_PORT:-}" ]; then
    [[ "$PROM_PORT" =~ ^[0-9]+$ ]] || die "PROM_PORT='$PROM_PORT' is not a port number"
    if (exec 3<>"/dev/tcp/127.0.0.1/$PROM_PORT") 2>/dev/null; then
      die "PROM_PORT=$PROM_PORT: something already listens on 127.0.0.1:$PROM_PORT"
    fi
  fi
  for _ in 1 2 3 4 5; do
    port="${PROM_PORT:-$(pick_port)}"
    url="http://127.0.0.1:$port"
    say "starting $("$PROMETHEUS" --version 2>&1 | head -n 1 | cut -d' ' -f2-3) on $url (log: $LOG)"
    launch "$port"

    deadline=$((SECONDS + START_TIMEOUT))
    while [ "$SECONDS" -lt "$deadline" ]; do
      if ! alive "$pid"; then
        break
      fi
      code="$(http_code GET "$url/-/ready")"
      if [ "$code" = 200 ]; then
        echo "$url" >"$URL_FILE.tmp"
        mv -f "$URL_FILE.tmp" "$URL_FILE"
        say "ready (pid $pid)"
        echo "$url"
        return 0
      fi
      sleep 0.2
    done

    # Lost the race for an auto-picked port: try another one.
    if ! alive "$pid" && [ -z "${PROM_PORT:-}" ] &&
      grep -q 'address already in use' "$LOG"; then
      say "port $port was taken before Prometheus could bind it; retrying with another"
      continue
    fi
    break
  done

  if alive "$pid"; then
    say "Prometheus (pid $pid) did not become ready on $url within ${START_TIMEOUT}s; killing it. Last log lines:"
  else
    say "Prometheus exited during startup on $url; last log lines:"
  fi
  tail -n 40 "$LOG" >&2
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$PID_FILE"
  exit 1
}

# --- stop / status / url / reload ----------------------------------------------------------

cmd_stop() {
  lock_run_dir
  local pid
  if pid="$(running_pid)"; then
    # TERM lets Prometheus close the TSDB cleanly; KILL only if it hangs.
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((STOP_TIMEOUT * 10))); do
      alive "$pid" || break
      sleep 0.1
    done
    if alive "$pid"; then
      say "pid $pid ignored TERM for ${STOP_TIMEOUT}s; sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
      # Wait for it to be gone before deleting the data dir it has open.
      for _ in $(seq 1 50); do
        alive "$pid" || break
        sleep 0.1
      done
    fi
    say "stopped (pid $pid)"
  else
    say "not running"
  fi
  # Keep prometheus.yml and the log for post-mortems; drop the data and the state that
  # would make `status`/`url` claim a server exists.
  rm -rf "$DATA_DIR"
  rm -f "$PID_FILE" "$URL_FILE"
}

cmd_status() {
  local pid url
  if pid="$(running_pid)" && url="$(base_url)" && [ "$(http_code GET "$url/-/ready")" = 200 ]; then
    echo "$url"
    return 0
  fi
  say "not running (or not ready)"
  return 1
}

cmd_url() {
  require_running "start it with '$0 start TARGET...'"
}

cmd_reload() {
  lock_run_dir
  local url code
  url="$(require_running "nothing to reload")"
  if [ "$#" -gt 0 ]; then
    # New targets; interval and rule files stay as recorded at start unless the
    # corresponding PROM_* variable is set now.
    [ -n "${PROM_SCRAPE_INTERVAL:-}" ] || SCRAPE_INTERVAL="$(cat "$INTERVAL_FILE")"
    if [ -z "${PROM_RULE_FILES+x}" ]; then
      PROM_RULE_FILES="$(tr '\n' ' ' <"$RULES_FILE")"
    fi
    record_settings "$@"
  else
    # Re-check the current config first: rule files may have been edited since start, and
    # a broken one is clearer from promtool than from a failed reload in the server log.
    if ! "$PROMTOOL" check config "$CONFIG" >"$RUN_DIR/promtool.out" 2>&1; then
      cat "$RUN_DIR/promtool.out" >&2
      die "promtool check config rejected $CONFIG (promtool output above); not reloading"
    fi
  fi
  code="$(http_code POST "$url/-/reload")"
  [ "$code" = 200 ] || {
    tail -n 20 "$LOG" >&2
    die "POST $url/-/reload answered HTTP $code (log tail above)"
  }
  say "reloaded"
}

# --- wait-scrape ---------------------------------------------------------------------------

# True if the instant query returns at least one series. We ask Prometheus the exact
# question (`up{...} == 1` filters out 0s) so we only need to tell an empty result from a
# non-empty one, which avoids needing a JSON parser (jq is not guaranteed on CI).
query_has_result() {
  local url="$1" query="$2" body
  body="$(curl -sS --max-time 2 -G "$url/api/v1/query" --data-urlencode "query=$query" 2>/dev/null)" ||
    return 1
  [[ "$body" == *'"status":"success"'* && "$body" == *'"value":['* ]]
}

cmd_wait_scrape() {
  local timeout="${1:-30}" url t pending deadline
  [[ "$timeout" =~ ^[0-9]+$ ]] || die "wait-scrape: SECONDS must be a whole number (got '$timeout')"
  url="$(require_running "start it with '$0 start TARGET...'")"

  deadline=$((SECONDS + timeout))
  while :; do
    pending=()
    while IFS= read -r t; do
      query_has_result "$url" "up{job=\"$JOB\",instance=\"$t\"} == 1" || pending+=("$t")
    done <"$TARGETS_FILE"
    if [ "${#pending[@]}" -eq 0 ]; then
      say "all targets up: $(tr '\n' ' ' <"$TARGETS_FILE")"
      return 0
    fi
    [ "$SECONDS" -lt "$deadline" ] || break
    sleep 0.5
  done

  say "error: targets not up after ${timeout}s: ${pending[*]}"
  say "Prometheus's view of the targets (health / lastError):"
  curl -sS --max-time 2 "$url/api/v1/targets" 2>&1 |
    grep -oE '"(scrapeUrl|health|lastError)":"([^"\\]|\\.)*"' >&2 || true
  exit 1
}

# --- main ----------------------------------------------------------------------------------

cmd="${1:-}"
[ "$#" -eq 0 ] || shift
case "$cmd" in
  install) ensure_installed; "$PROMETHEUS" --version 2>&1 | head -n 1 >&2 ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  url) cmd_url ;;
  reload) cmd_reload "$@" ;;
  wait-scrape) cmd_wait_scrape "$@" ;;
  -h | --help | help) usage 0 ;;
  *) usage 2 ;;
esac
