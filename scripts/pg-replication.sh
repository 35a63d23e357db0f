#!/usr/bin/env bash
# A throwaway PostgreSQL streaming-replication pair for tests (tests/pg_zero_loss.rs, the hold
# proof of issue 46): Debian's `postgresql` binaries, two clusters `a` and `b` in one run dir,
# both on 127.0.0.1 only. `a` starts as the primary and `b` as its streaming replica (hot
# standby); after a promote, `follow` rebuilds the old primary as a replica of the new one.
#
#   scripts/pg-replication.sh start          start a fresh pair; prints two lines: a's URL, b's URL
#   scripts/pg-replication.sh follow NODE    rebuild NODE (a or b) as a streaming replica of the
#                                            other node (which must be a primary: promoted)
#   scripts/pg-replication.sh stop           stop both and WIPE the run dir's data
#
# Environment (defaults in brackets):
#   PG_REPLICATION_DIR  [/tmp/tidegate-pg-replication] a/, b/, logs/, a.port, b.port
#
# Not durable (fsync off), like scripts/postgres.sh; commits are synchronous on the primary
# (synchronous_commit on), so an acknowledged commit is in the primary's WAL. Replication is
# asynchronous, as in most same-city setups: a replica may lag, which is what the proof is about.
# As root, the clusters run as the `postgres` user of the Debian package.
set -euo pipefail

RUN_DIR="${PG_REPLICATION_DIR:-/tmp/tidegate-pg-replication}"
LOG_DIR="$RUN_DIR/logs"

log() { echo "pg-replication.sh: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

bin_dir() {
  local dir
  dir="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$dir" && -x "$dir/pg_ctl" && -x "$dir/pg_basebackup" ]] || return 1
  echo "$dir"
}

as_owner() {
  if [[ "$(id -u)" -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

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

url_of() { echo "postgresql://postgres@127.0.0.1:$1/postgres"; }

# Starts NODE's cluster and waits until it answers a query over TCP.
start_node() {
  local node="$1" bin port
  bin="$(bin_dir)"
  port="$(cat "$RUN_DIR/$node.port")"
  if ! as_owner "$bin/pg_ctl" start -D "$RUN_DIR/$node" -l "$LOG_DIR/$node.log" -w -t 60 \
    >"$LOG_DIR/$node.pg_ctl.out" 2>&1; then
    cat "$LOG_DIR/$node.pg_ctl.out" >&2
    tail -n 40 "$LOG_DIR/$node.log" >&2 || true
    die "node $node did not start on 127.0.0.1:$port"
  fi
  local deadline=$((SECONDS + 60))
  until PGCONNECT_TIMEOUT=5 psql -X -q -U postgres -h 127.0.0.1 -p "$port" -d postgres -Atc 'select 1' >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "node $node runs but answers no query on 127.0.0.1:$port"
    sleep 0.1
  done
}

stop_node() {
  local node="$1" bin
  bin="$(bin_dir)" || return 0
  [[ -f "$RUN_DIR/$node/postmaster.pid" ]] || return 0
  as_owner "$bin/pg_ctl" stop -D "$RUN_DIR/$node" -m immediate -w -t 30 >/dev/null 2>&1 || true
}

# Rebuilds NODE as a streaming replica of the other node (a base backup, then a hot standby).
cmd_follow() {
  local node="$1" other bin
  case "$node" in a) other=b ;; b) other=a ;; *) die "follow: NODE is a or b, not '$node'" ;; esac
  bin="$(bin_dir)" || die "PostgreSQL is not installed (scripts/postgres.sh start installs it)"
  stop_node "$node"
  rm -rf "${RUN_DIR:?}/$node"
  mkdir -p "$RUN_DIR/$node"
  [[ "$(id -u)" -ne 0 ]] || chown postgres: "$RUN_DIR/$node"
  chmod 700 "$RUN_DIR/$node"
  if ! as_owner "$bin/pg_basebackup" -h 127.0.0.1 -p "$(cat "$RUN_DIR/$other.port")" -U postgres \
    -D "$RUN_DIR/$node" -R -X stream -c fast --no-sync >"$LOG_DIR/$node.basebackup.out" 2>&1; then
    cat "$LOG_DIR/$node.basebackup.out" >&2
    die "pg_basebackup of node $other into node $node failed"
  fi
  # The backup carries the other node's port: this node listens on its own.
  echo "port = $(cat "$RUN_DIR/$node.port")" | as_owner tee -a "$RUN_DIR/$node/postgresql.conf" >/dev/null
  start_node "$node"
}

cmd_start() {
  command -v psql >/dev/null || die "psql is missing (Debian's postgresql-client)"
  local bin
  bin="$(bin_dir)" || die "PostgreSQL is not installed (scripts/postgres.sh start installs it)"
  cmd_stop
  mkdir -p "$RUN_DIR" "$LOG_DIR"
  if [[ "$(id -u)" -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "no \`postgres\` user to run the clusters as"
    chown -R postgres: "$RUN_DIR"
  fi
  pick_port >"$RUN_DIR/a.port"
  local port_b
  port_b="$(pick_port)"
  while [[ "$port_b" == "$(cat "$RUN_DIR/a.port")" ]]; do port_b="$(pick_port)"; done
  echo "$port_b" >"$RUN_DIR/b.port"
  mkdir -p "$RUN_DIR/a"
  [[ "$(id -u)" -ne 0 ]] || chown postgres: "$RUN_DIR/a" "$LOG_DIR"
  chmod 700 "$RUN_DIR/a"
  if ! as_owner "$bin/initdb" -D "$RUN_DIR/a" -U postgres --auth=trust -E UTF8 --no-sync \
    >"$LOG_DIR/a.initdb.out" 2>&1; then
    cat "$LOG_DIR/a.initdb.out" >&2
    die "initdb of node a failed"
  fi
  as_owner tee -a "$RUN_DIR/a/postgresql.conf" >/dev/null <<EOF

# Written by scripts/pg-replication.sh: a throwaway streaming-replication pair, loopback only.
listen_addresses = '127.0.0.1'
unix_socket_directories = '$RUN_DIR'
max_connections = 100
shared_buffers = 32MB
fsync = off
full_page_writes = off
synchronous_commit = on
wal_level = replica
max_wal_senders = 10
wal_keep_size = 256MB
hot_standby = on
wal_receiver_status_interval = 1s
log_min_messages = warning
port = $(cat "$RUN_DIR/a.port")
EOF
  start_node a
  cmd_follow b
  url_of "$(cat "$RUN_DIR/a.port")"
  url_of "$(cat "$RUN_DIR/b.port")"
}

cmd_stop() {
  [[ -d "$RUN_DIR" ]] || return 0
  stop_node a
  stop_node b
  rm -rf "${RUN_DIR:?}/a" "${RUN_DIR:?}/b"
}

case "${1:-}" in
start) cmd_start ;;
follow) cmd_follow "${2:-}" ;;
stop) cmd_stop ;;
*)
  sed -n '2,17p' "$0" >&2
  exit 2
  ;;
esac
