#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for integration tests (tests/pg_zero_loss.rs): Debian's
# `postgresql` binaries, one cluster in its own run dir, listening on 127.0.0.1 only.
#
#   scripts/postgres.sh start    start (or reuse) the cluster; prints its URL
#                                postgresql://postgres@127.0.0.1:PORT/postgres on stdout and
#                                writes it to $POSTGRES_RUN_DIR/url. Installs Debian's
#                                `postgresql` with apt-get first when no server binaries are found
#   scripts/postgres.sh stop     stop it and WIPE its data (the next start is a fresh, empty
#                                cluster on a new port); logs/ stays for a post-mortem
#   scripts/postgres.sh status   exit 0 and print the URL if running, else exit 1
#   scripts/postgres.sh url      print the URL of the running cluster (exit 1 if none)
#   scripts/postgres.sh psql [ARGS]   run psql against it (e.g. -c 'select 1')
#
# Environment (defaults in brackets):
#   POSTGRES_RUN_DIR       [/tmp/tidegate-postgres] data/, logs/, the socket, url, port
#   POSTGRES_PORT          [a free port] the TCP port on 127.0.0.1
#   POSTGRES_START_TIMEOUT [60] seconds to wait for the server to accept connections
#   POSTGRES_LISTEN        [none] one more address to listen on besides 127.0.0.1, whose /24
#                          is trusted like loopback (tests/partition.rs runs the script inside a
#                          network namespace of its own and reaches it over a private bridge)
#
# What it is not: a durable database. It runs with fsync, synchronous_commit and
# full_page_writes off (a crash loses the cluster, which `stop` wipes anyway) and trusts every
# local connection as `postgres` (it listens on loopback only). The tests check routing, not
# PostgreSQL's durability, and a commit is still a commit to every other session.
#
# PostgreSQL refuses to run as root: when called as root the cluster is owned by and run as the
# `postgres` user the Debian package creates (runuser), so the run dir is chowned to it.
set -euo pipefail

RUN_DIR="${POSTGRES_RUN_DIR:-/tmp/tidegate-postgres}"
START_TIMEOUT="${POSTGRES_START_TIMEOUT:-60}"
DATA_DIR="$RUN_DIR/data"
LOG_DIR="$RUN_DIR/logs"
URL_FILE="$RUN_DIR/url"
PORT_FILE="$RUN_DIR/port"

log() { echo "postgres.sh: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

# The newest server's bin dir under Debian's layout (/usr/lib/postgresql/<major>/bin).
bin_dir() {
  local dir
  dir="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$dir" && -x "$dir/pg_ctl" && -x "$dir/initdb" ]] || return 1
  echo "$dir"
}

ensure_installed() {
  if bin_dir >/dev/null; then return 0; fi
  [[ "$(id -u)" -eq 0 ]] || die "PostgreSQL is not installed and we are not root; run: apt-get install -y postgresql"
  log "installing Debian's postgresql (one-off) ..."
  local apt_log
  apt_log="$(mktemp)"
  if ! { apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 postgresql; } >"$apt_log" 2>&1; then
    tail -n 30 "$apt_log" >&2
    rm -f "$apt_log"
    die "installing postgresql with apt-get failed; see the output above"
  fi
  rm -f "$apt_log"
  bin_dir >/dev/null || die "apt-get installed postgresql, but no server binaries are under /usr/lib/postgresql/*/bin"
}

# Runs a server binary as the cluster's owner: `postgres` when we are root, else ourselves.
as_owner() {
  if [[ "$(id -u)" -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A random free port below the kernel's ephemeral range (as scripts/kafka.sh picks them).
pick_port() {
  local ephemeral_low port _
  ephemeral_low="$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
  ((ephemeral_low > 21000)) || ephemeral_low=32768
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % (ephemeral_low - 20000)))
    if ! port_open "$port"; then
      echo "$port"
      return 0
    fi
  done
  die "no free loopback port found between 20000 and $ephemeral_low"
}

running() {
  local bin
  bin="$(bin_dir)" || return 1
  [[ -f "$DATA_DIR/postmaster.pid" ]] || return 1
  as_owner "$bin/pg_ctl" status -D "$DATA_DIR" >/dev/null 2>&1
}

url_of() { echo "postgresql://postgres@127.0.0.1:$1/postgres"; }

cmd_start() {
  mkdir -p "$RUN_DIR"
  # Serialise starts and stops on this run dir (parallel test binaries may call start).
  exec 9>"$RUN_DIR/.lock"
  flock 9
  ensure_installed
  local bin port started=$SECONDS
  bin="$(bin_dir)"
  if running; then
    port="$(cat "$PORT_FILE")"
    if [[ -n "${POSTGRES_PORT:-}" && "$POSTGRES_PORT" != "$port" ]]; then
      die "a cluster already runs on port $port, not on POSTGRES_PORT=$POSTGRES_PORT"
    fi
    url_of "$port" | tee "$URL_FILE"
    return 0
  fi
  rm -rf "$DATA_DIR" "$URL_FILE" "$PORT_FILE"
  mkdir -p "$DATA_DIR" "$LOG_DIR"
  : >"$LOG_DIR/postgres.log"
  port="${POSTGRES_PORT:-$(pick_port)}"
  if port_open "$port"; then die "127.0.0.1:$port is already in use by another process"; fi
  if [[ "$(id -u)" -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "no \`postgres\` user to run the cluster as (Debian's postgresql package creates it)"
    chown -R postgres: "$RUN_DIR"
  fi
  chmod 700 "$DATA_DIR"
  if ! as_owner "$bin/initdb" -D "$DATA_DIR" -U postgres --auth=trust -E UTF8 --no-sync \
    >"$LOG_DIR/initdb.out" 2>&1; then
    cat "$LOG_DIR/initdb.out" >&2
    die "initdb in $DATA_DIR failed"
  fi
  cat >>"$DATA_DIR/postgresql.conf" <<EOF

# Written by scripts/postgres.sh: a throwaway test cluster, loopback only, not durable.
listen_addresses = '127.0.0.1${POSTGRES_LISTEN:+,$POSTGRES_LISTEN}'
port = $port
unix_socket_directories = '$RUN_DIR'
max_connections = 400
shared_buffers = 64MB
fsync = off
synchronous_commit = off
full_page_writes = off
log_min_messages = warning
# tests/pg_zero_loss.rs judges the fence's rows by when they were committed.
track_commit_timestamp = on
EOF
  if [[ -n "${POSTGRES_LISTEN:-}" ]]; then
    echo "host all all ${POSTGRES_LISTEN%.*}.0/24 trust" >>"$DATA_DIR/pg_hba.conf"
  fi
  echo "$port" >"$PORT_FILE"
  log "starting PostgreSQL ($bin) on 127.0.0.1:$port (run dir $RUN_DIR)"
  # pg_ctl detaches the postmaster with its stdin from /dev/null and its output in the log, so
  # a caller capturing our output does not wait for the server's end of file.
  if ! as_owner "$bin/pg_ctl" start -D "$DATA_DIR" -l "$LOG_DIR/postgres.log" -w \
    -t "$START_TIMEOUT" >"$LOG_DIR/pg_ctl.out" 2>&1 9>&-; then
    cat "$LOG_DIR/pg_ctl.out" >&2
    log "---- last lines of $LOG_DIR/postgres.log ----"
    tail -n 40 "$LOG_DIR/postgres.log" >&2 || true
    die "PostgreSQL did not start within $START_TIMEOUT s (POSTGRES_START_TIMEOUT)"
  fi
  # Ready means a real query over TCP, as the tests will connect.
  local deadline=$((started + START_TIMEOUT))
  until psql_cmd -h 127.0.0.1 -p "$port" -Atc 'select 1' >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "PostgreSQL runs but answers no query on 127.0.0.1:$port"
    sleep 0.2
  done
  log "PostgreSQL ready after $((SECONDS - started)) s"
  url_of "$port" | tee "$URL_FILE"
}

psql_cmd() {
  command -v psql >/dev/null || die "psql is missing (Debian's postgresql-client)"
  PGCONNECT_TIMEOUT=5 psql -X -q -v ON_ERROR_STOP=1 -U postgres -d postgres "$@"
}

cmd_stop() {
  [[ -d "$RUN_DIR" ]] || return 0
  exec 9>"$RUN_DIR/.lock"
  flock 9
  local bin
  if bin="$(bin_dir)" && [[ -f "$DATA_DIR/postmaster.pid" ]]; then
    as_owner "$bin/pg_ctl" stop -D "$DATA_DIR" -m fast -w -t 30 >/dev/null 2>&1 ||
      as_owner "$bin/pg_ctl" stop -D "$DATA_DIR" -m immediate -w -t 30 >/dev/null 2>&1 ||
      log "pg_ctl stop failed (the cluster may already be gone)"
  fi
  rm -rf "$DATA_DIR" "$URL_FILE" "$PORT_FILE"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status)
  running || exit 1
  url_of "$(cat "$PORT_FILE")"
  ;;
url)
  running || die "no cluster runs in $RUN_DIR"
  url_of "$(cat "$PORT_FILE")"
  ;;
psql)
  shift
  running || die "no cluster runs in $RUN_DIR"
  psql_cmd -h 127.0.0.1 -p "$(cat "$PORT_FILE")" "$@"
  ;;
*)
  sed -n '2,26p' "$0" >&2
  exit 2
  ;;
esac
