#!/usr/bin/env bash
# A real single-node Apache Kafka broker for integration tests: one JVM that is both KRaft
# controller and broker (no ZooKeeper), listening on 127.0.0.1 only.
#
#   scripts/kafka.sh start             start (or reuse) the broker; prints 127.0.0.1:PORT on stdout
#                                      and writes it to $KAFKA_RUN_DIR/bootstrap. If the run dir
#                                      still holds data (stop --keep, a crash), it resumes with
#                                      that data on the same ports
#   scripts/kafka.sh stop [--keep] [--kill]
#                                      stop it. The data is WIPED unless --keep, so the next
#                                      start is a fresh, empty broker (on new ports). --kill
#                                      sends SIGKILL at once (a crash) instead of a clean shutdown
#   scripts/kafka.sh restart [--kill]  stop keeping the data, start again on the SAME ports
#   scripts/kafka.sh status            exit 0 and print the bootstrap address if running, else exit 1
#   scripts/kafka.sh bootstrap         print the bootstrap address of the running broker (exit 1 if none)
#   scripts/kafka.sh topic create NAME PARTITIONS [more TopicCommand args]
#   scripts/kafka.sh topic list | describe [NAME] | delete NAME
#   scripts/kafka.sh produce TOPIC [ConsoleProducer args]     one message per stdin line
#   scripts/kafka.sh consume TOPIC COUNT [ConsoleConsumer args]
#                                      print COUNT messages from the start of TOPIC (fails if fewer
#                                      arrive within KAFKA_CONSUME_TIMEOUT_MS, default 20000)
#   scripts/kafka.sh tool CLASS [ARGS] run any main class from the Kafka jars (tools logging)
#   scripts/kafka.sh jars              resolve the jars into the cache only; prints the libs dir
#
# A three-node cluster (for replication faults), independent of the single broker above:
#   scripts/kafka.sh start-cluster     start (or reuse) three combined-mode KRaft nodes (each a
#                                      controller and a broker; a static quorum of 3 voters) on
#                                      free loopback ports, in $KAFKA_RUN_DIR/cluster; prints the
#                                      bootstrap list 127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3.
#                                      Topics default to replication 3, min.insync.replicas=2
#   scripts/kafka.sh stop-broker N [--term]
#                                      SIGKILL node N (1-3) at once (a crash; --term: a clean
#                                      shutdown); its data stays
#   scripts/kafka.sh start-broker N    start node N again on its ports; waits until it is back in
#                                      the cluster (registered, unfenced)
#   scripts/kafka.sh leader TOPIC      print the node id leading partition 0 of TOPIC
#   scripts/kafka.sh stop-cluster      stop all three nodes and wipe their data (`stop` without
#                                      --keep does too)
#
# Environment (defaults in brackets):
#   KAFKA_VERSION        [4.4.0] version of org.apache.kafka:kafka_2.13 (and kafka-tools) to run;
#                        Kafka 4.x only (log4j2 logging, tools classes under org.apache.kafka.tools)
#   TIDEGATE_CACHE       [$HOME/.cache/tidegate] jars are cached in
#                        $TIDEGATE_CACHE/kafka/$KAFKA_VERSION/libs (resolved once, by Maven)
#   KAFKA_RUN_DIR        [/tmp/tidegate-kafka] config, data, logs, pid file, bootstrap file
#   KAFKA_PORT           [a free port] broker (client) listener port
#   KAFKA_CONTROLLER_PORT [a free port] KRaft controller listener port
#   KAFKA_START_TIMEOUT  [60] seconds to wait for the broker to serve clients
#   KAFKA_STOP_TIMEOUT   [30] seconds to wait for a clean shutdown before SIGKILL
#   KAFKA_HEAP_OPTS      [-Xms256m -Xmx768m] broker heap (the machines have 2 cores and 24 GiB)
#   KAFKA_JVM_OPTS       extra JVM options for the broker
#   KAFKA_AUTO_CREATE_TOPICS [false] see write_config below
#   KAFKA_CONSUME_TIMEOUT_MS [20000] how long `consume` waits for its COUNT messages
#   KAFKA_CLUSTER_HEAP_OPTS [-Xms96m -Xmx256m] heap of EACH cluster node (three JVMs)
#
# Run dir layout: server.properties, cluster.id, ports, kafka.pid, bootstrap, data/ (topic
# partitions and the KRaft metadata log), logs/server.log (the broker's log4j output) and
# logs/broker.out (the JVM's own stdout/stderr: crashes, JVM warnings). `stop` keeps logs/ so a
# failed CI run can still be read afterwards; a fresh start truncates them.
#
# Where the jars come from: the machines reach only package registries, so there is no Kafka
# tarball; scripts/kafka/pom.xml lets Maven copy the broker's jars from Maven Central, and the
# broker is started as `java -cp "libs/*" kafka.Kafka server.properties`, which is all that
# Kafka's own bin/kafka-server-start.sh does in the end.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SUPPORT_DIR="$SCRIPT_DIR/kafka"
POM="$SUPPORT_DIR/pom.xml"

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KAFKA_CACHE="${TIDEGATE_CACHE:-$HOME/.cache/tidegate}/kafka/$KAFKA_VERSION"
LIBS="$KAFKA_CACHE/libs"
RUN_DIR="${KAFKA_RUN_DIR:-/tmp/tidegate-kafka}"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-60}"
STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"
HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx768m}"
AUTO_CREATE_TOPICS="${KAFKA_AUTO_CREATE_TOPICS:-false}"

DATA_DIR="$RUN_DIR/data"
LOG_DIR="$RUN_DIR/logs"
PID_FILE="$RUN_DIR/kafka.pid"
BOOTSTRAP_FILE="$RUN_DIR/bootstrap"
PORTS_FILE="$RUN_DIR/ports"
CLUSTER_ID_FILE="$RUN_DIR/cluster.id"
CONFIG="$RUN_DIR/server.properties"

log() { echo "kafka.sh: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

# --- jars -----------------------------------------------------------------------------------

# The cache is valid for one Kafka version *and* one pom: the marker file holds the pom's hash,
# so changing the pom (an exclusion, the log4j binding) re-resolves instead of running with a
# stale set of jars.
pom_hash() { sha256sum "$POM" | cut -d' ' -f1; }

ensure_jars() {
  local want
  want="$(pom_hash)"
  if [[ -f "$LIBS/.complete" && "$(cat "$LIBS/.complete")" == "$want" ]]; then
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found: it is needed once to fetch the Kafka jars"
  mkdir -p "$KAFKA_CACHE"
  # Two starts with different run dirs may race on a cold cache: one resolves, the other waits.
  # fd 8 is closed again before the broker is launched, so the JVM never holds this lock.
  exec 8>"$KAFKA_CACHE/.lock"
  flock 8
  if [[ ! -f "$LIBS/.complete" || "$(cat "$LIBS/.complete")" != "$want" ]]; then
    log "resolving Kafka $KAFKA_VERSION jars from Maven Central (once per version) ..."
    local tmp started=$SECONDS
    tmp="$(mktemp -d "$KAFKA_CACHE/libs.tmp.XXXXXX")"
    # Resolve into a temp dir and rename at the end, so an interrupted resolution never leaves
    # a half-filled libs/ that a later start would take for complete.
    if ! mvn -B -q -f "$POM" -Dkafka.version="$KAFKA_VERSION" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" \
      >"$KAFKA_CACHE/mvn.log" 2>&1; then
      tail -n 40 "$KAFKA_CACHE/mvn.log" >&2 || true
      rm -rf "$tmp"
      die "Maven could not resolve org.apache.kafka:kafka_2.13:$KAFKA_VERSION (log: $KAFKA_CACHE/mvn.log)"
    fi
    [[ -f "$tmp/kafka_2.13-$KAFKA_VERSION.jar" ]] || {
      rm -rf "$tmp"
      die "Maven finished but kafka_2.13-$KAFKA_VERSION.jar is missing"
    }
    echo "$want" >"$tmp/.complete"
    rm -rf "$LIBS"
    mv "$tmp" "$LIBS"
    log "resolved $(find "$LIBS" -name '*.jar' | wc -l) jars into $LIBS in $((SECONDS - started)) s"
  fi
  exec 8>&-
}

# Run a main class from the Kafka jars the way Kafka's bin/kafka-run-class.sh would for a tool:
# small heap, quick-start JIT and GC (the tools live for a second or two), logging to stderr at
# WARN so stdout is only the tool's output. An array, so `timeout` can run it too.
TOOL_JAVA=(java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true
  -Dlog4j2.configurationFile="$SUPPORT_DIR/tools-log4j2.properties" -cp "$LIBS/*")
run_tool() { "${TOOL_JAVA[@]}" "$@"; }

# --- process state --------------------------------------------------------------------------

# The pid of the broker of THIS run dir, if it is running. The command line is checked as well
# as the pid, so a stale pid file whose number now belongs to another process is not mistaken
# for the broker (and is never signalled).
broker_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "kafka.Kafka $CONFIG" || return 1
  echo "$pid"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A port for a listener: random, below the kernel's ephemeral range (so no outgoing connection
# can be sitting on it, which matters when `restart` must get the same port back), and with
# nothing listening on it now.
pick_port() {
  local avoid="${1:-0}" ephemeral_low port _
  ephemeral_low="$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
  ((ephemeral_low > 21000)) || ephemeral_low=32768 # an unusual range: fall back to the default
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % (ephemeral_low - 20000)))
    if [[ "$port" != "$avoid" ]] && ! port_open "$port"; then
      echo "$port"
      return 0
    fi
  done
  die "no free loopback port found between 20000 and $ephemeral_low"
}

# --- start ----------------------------------------------------------------------------------

write_config() {
  local port="$1" cport="$2"
  cat >"$CONFIG" <<EOF
# Written by scripts/kafka.sh on every start; edit the script, not this file.
# One JVM is both KRaft controller and broker: the smallest real Kafka there is.
process.roles=broker,controller
node.id=1

# Loopback only, on both listeners; clients are told to come back to 127.0.0.1:$port.
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER

# A static quorum of one voter. (Kafka 4's sample config uses the dynamic
# controller.quorum.bootstrap.servers instead, which then needs 'format --standalone'; the
# static form needs no extra format flag and is just as good for a single node.)
controller.quorum.voters=1@127.0.0.1:$cport

# Topic data and the KRaft metadata log (which defaults to the first log dir).
log.dirs=$DATA_DIR

# Internal topics must fit one broker: the defaults (3 replicas) cannot be met and would make
# consumer groups, transactions and share groups fail. One partition each also keeps the first
# consumer group / transaction quick to set up (the default is 50 partitions).
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
num.partitions=1
default.replication.factor=1
min.insync.replicas=1

# Consumer groups start consuming at once instead of waiting 3 s for more members.
group.initial.rebalance.delay.ms=0

# After a crash (stop --kill / restart --kill) the controller keeps the dead incarnation's
# registration until its session times out, and the new broker cannot register before that:
# with the 9 s default a crash-restart took ~14 s to serve clients. 4 s keeps a margin against
# heartbeats delayed by a busy 2-core machine (the heartbeat must stay well below the timeout).
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=4000

# Tests create their topics explicitly (scripts/kafka.sh topic create NAME PARTITIONS) with the
# partition count they rely on. With auto-creation on, a typo'd topic name or a producer that
# races the create would silently get a 1-partition topic. KAFKA_AUTO_CREATE_TOPICS=true to allow.
auto.create.topics.enable=$AUTO_CREATE_TOPICS
EOF
}

cmd_start() {
  mkdir -p "$RUN_DIR"
  # Serialise start/stop/restart on this run dir (parallel test binaries may all call start).
  # The broker is launched with fd 9 closed so it does not inherit this lock.
  exec 9>"$RUN_DIR/.lock"
  flock 9

  local port cport fresh=0
  if broker_pid >/dev/null; then
    if [[ ! -s "$BOOTSTRAP_FILE" ]]; then
      # An earlier start was interrupted while waiting for readiness (its caller was killed):
      # the broker runs on the recorded ports, so finish that wait instead of starting another.
      read -r port cport <"$PORTS_FILE"
      wait_ready "$port" "$SECONDS"
      echo "127.0.0.1:$port" >"$BOOTSTRAP_FILE"
    fi
    if [[ -n "${KAFKA_PORT:-}" && "$(cat "$BOOTSTRAP_FILE")" != "127.0.0.1:$KAFKA_PORT" ]]; then
      die "a broker already runs at $(cat "$BOOTSTRAP_FILE"), not on KAFKA_PORT=$KAFKA_PORT"
    fi
    cat "$BOOTSTRAP_FILE"
    return 0
  fi
  rm -f "$PID_FILE" "$BOOTSTRAP_FILE"

  ensure_jars

  # Ports: a run dir that still holds data (stop --keep, restart, or a broker that died) keeps
  # the ports it was started with, because clients and tests hold on to the address. A fresh
  # run dir takes KAFKA_PORT / KAFKA_CONTROLLER_PORT or free ports.
  if [[ -f "$DATA_DIR/meta.properties" && -f "$PORTS_FILE" ]]; then
    read -r port cport <"$PORTS_FILE"
    if [[ -n "${KAFKA_PORT:-}" && "$KAFKA_PORT" != "$port" ]]; then
      die "$RUN_DIR holds a broker's data for port $port, not KAFKA_PORT=$KAFKA_PORT; run '$0 stop' to wipe it"
    fi
  else
    fresh=1
    rm -rf "$DATA_DIR" "$LOG_DIR" "$CLUSTER_ID_FILE" "$PORTS_FILE"
    port="${KAFKA_PORT:-$(pick_port)}"
    cport="${KAFKA_CONTROLLER_PORT:-$(pick_port "$port")}"
    [[ "$port" != "$cport" ]] || die "broker and controller ports are both $port"
  fi
  for p in "$port" "$cport"; do
    if port_open "$p"; then die "127.0.0.1:$p is already in use by another process"; fi
  done
  mkdir -p "$DATA_DIR" "$LOG_DIR"
  echo "$port $cport" >"$PORTS_FILE"
  write_config "$port" "$cport"

  # KRaft needs its storage formatted once with a cluster id before the first start (this writes
  # data/meta.properties and the bootstrap metadata); a restart reuses the formatted dir.
  if [[ ! -f "$DATA_DIR/meta.properties" ]]; then
    [[ -s "$CLUSTER_ID_FILE" ]] || run_tool kafka.tools.StorageTool random-uuid >"$CLUSTER_ID_FILE"
    if ! run_tool kafka.tools.StorageTool format -t "$(cat "$CLUSTER_ID_FILE")" -c "$CONFIG" \
      >"$LOG_DIR/format.out" 2>&1; then
      cat "$LOG_DIR/format.out" >&2
      die "formatting the KRaft storage in $DATA_DIR failed"
    fi
  fi

  log "starting Kafka $KAFKA_VERSION on 127.0.0.1:$port (controller :$cport, run dir $RUN_DIR)"
  local started=$SECONDS
  echo "==== $(date -u +%FT%TZ) kafka.sh starting the broker" >>"$LOG_DIR/broker.out"
  # setsid: the broker gets its own session, so it outlives this script and is not hit by a
  # Ctrl-C or hangup aimed at whoever called us. All of its fds are redirected: a caller that
  # captures our output (a Rust test using Command::output, CI) must not wait for the broker's
  # end of file. The child writes its own pid before exec'ing java, so the pid file holds the
  # JVM's pid whether or not setsid had to fork.
  # shellcheck disable=SC2086,SC2016 # HEAP_OPTS, KAFKA_JVM_OPTS: option lists, split on purpose;
  # the single-quoted $$ and "$@" are for the inner bash
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PID_FILE" \
    java $HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true ${KAFKA_JVM_OPTS:-} \
    -Dkafka.logs.dir="$LOG_DIR" \
    -Dlog4j2.configurationFile="$SUPPORT_DIR/broker-log4j2.properties" \
    -cp "$LIBS/*" kafka.Kafka "$CONFIG" \
    </dev/null >>"$LOG_DIR/broker.out" 2>&1 9>&- &

  wait_ready "$port" "$started"
  echo "127.0.0.1:$port" >"$BOOTSTRAP_FILE"
  log "broker ready after $((SECONDS - started)) s$([[ $fresh == 1 ]] && echo ' (fresh data)' || echo ' (existing data)')"
  cat "$BOOTSTRAP_FILE"
}

# Ready means a real client round trip: Kafka's BrokerApiVersionsCommand bootstraps an admin
# client, fetches cluster metadata and lists our broker only once it is registered and unfenced,
# i.e. can lead partitions and accept topic creation. A listening socket alone is not enough:
# KRaft binds the port long before it serves requests. The JVM probe is only tried once the port
# is open, to keep two cores free for the starting broker.
wait_ready() {
  local port="$1" started="$2" out left
  local deadline=$((started + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if [[ -s "$PID_FILE" ]] && ! kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
      fail_start "the broker process exited during startup"
    fi
    if port_open "$port" && broker_pid >/dev/null; then
      left=$((deadline - SECONDS))
      ((left > 1)) || left=1
      out="$(timeout "$left" "${TOOL_JAVA[@]}" org.apache.kafka.tools.BrokerApiVersionsCommand \
        --bootstrap-server "127.0.0.1:$port" 2>/dev/null || true)"
      if grep -q "^127.0.0.1:$port (id: 1 " <<<"$out" && ! grep -q "isFenced: true" <<<"$out"; then
        return 0
      fi
    fi
    sleep 0.5
  done
  fail_start "the broker did not serve clients within $START_TIMEOUT s (KAFKA_START_TIMEOUT)"
}

fail_start() {
  log "ERROR: $1"
  log "---- last lines of $LOG_DIR/server.log ----"
  tail -n 60 "$LOG_DIR/server.log" >&2 2>/dev/null || true
  log "---- last lines of $LOG_DIR/broker.out ----"
  tail -n 30 "$LOG_DIR/broker.out" >&2 2>/dev/null || true
  # Do not leave a half-started broker behind; its data and logs stay for inspection.
  stop_process 10 || true
  exit 1
}

# --- stop -----------------------------------------------------------------------------------

# SIGTERM lets Kafka shut down cleanly (flush, close the logs, leave the quorum); SIGKILL after
# the timeout, or at once with a timeout of 0 (stop --kill: a crash, for recovery tests).
stop_process() {
  local timeout="$1" pid
  if pid="$(broker_pid)"; then
    if ((timeout > 0)); then
      kill -TERM "$pid" 2>/dev/null || true
      local deadline=$((SECONDS + timeout))
      while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
      if kill -0 "$pid" 2>/dev/null; then log "no clean shutdown within $timeout s; sending SIGKILL"; fi
    fi
    kill -KILL "$pid" 2>/dev/null || true
    # Wait until it is really gone: a restart must find the ports free and the data unlocked.
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    log "stopped broker pid $pid"
  fi
  rm -f "$PID_FILE" "$BOOTSTRAP_FILE"
}

cmd_stop() {
  local keep=0 timeout="$STOP_TIMEOUT"
  for arg in "$@"; do
    case "$arg" in
      --keep) keep=1 ;;
      --kill) timeout=0 ;;
      --clean) keep=0 ;; # the default; accepted for readability in callers
      *) die "stop: unknown option $arg (expected --keep, --kill, --clean)" ;;
    esac
  done
  [[ -d "$RUN_DIR" ]] || return 0
  # A full stop takes a three-node cluster in this run dir with it (its data is always wiped);
  # `restart` (stop --keep) leaves the cluster alone.
  if ((keep == 0)); then (cmd_stop_cluster); fi
  exec 9>"$RUN_DIR/.lock"
  flock 9
  stop_process "$timeout"
  if ((keep == 0)); then
    # Wipe the data and the identity (ports, cluster id); keep logs/ for post-mortems.
    rm -rf "$DATA_DIR" "$PORTS_FILE" "$CLUSTER_ID_FILE" "$CONFIG"
  fi
}

cmd_restart() {
  local kill_opt=()
  for arg in "$@"; do
    case "$arg" in
      --kill) kill_opt=(--kill) ;;
      *) die "restart: unknown option $arg (expected --kill)" ;;
    esac
  done
  [[ -f "$PORTS_FILE" ]] || die "restart: no broker state in $RUN_DIR; use start"
  # Both halves take the run-dir lock themselves; --keep preserves data, ports and cluster id.
  (cmd_stop --keep "${kill_opt[@]}")
  cmd_start
}

# --- queries and tools ----------------------------------------------------------------------

cmd_status() {
  local pid
  if pid="$(broker_pid)" && [[ -s "$BOOTSTRAP_FILE" ]]; then
    cat "$BOOTSTRAP_FILE"
    return 0
  fi
  log "no broker running for $RUN_DIR"
  return 1
}

require_bootstrap() {
  cmd_status >/dev/null 2>&1 || die "no broker running for $RUN_DIR (run '$0 start')"
  cat "$BOOTSTRAP_FILE"
}

cmd_topic() {
  local sub="${1:-}"
  shift || true
  local bootstrap
  bootstrap="$(require_bootstrap)"
  local topic_cmd=(run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap")
  case "$sub" in
    create)
      (($# >= 2)) || die "usage: $0 topic create NAME PARTITIONS [TopicCommand args]"
      local name="$1" partitions="$2"
      shift 2
      "${topic_cmd[@]}" --create --topic "$name" --partitions "$partitions" --replication-factor 1 "$@"
      ;;
    list) "${topic_cmd[@]}" --list "$@" ;;
    describe) "${topic_cmd[@]}" --describe ${1:+--topic "$1"} "${@:2}" ;;
    delete)
      (($# >= 1)) || die "usage: $0 topic delete NAME"
      "${topic_cmd[@]}" --delete --topic "$1" "${@:2}"
      ;;
    *) die "usage: $0 topic create NAME PARTITIONS | list | describe [NAME] | delete NAME" ;;
  esac
}

cmd_produce() {
  (($# >= 1)) || die "usage: $0 produce TOPIC [ConsoleProducer args] < lines"
  local topic="$1" bootstrap
  shift
  bootstrap="$(require_bootstrap)"
  run_tool org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$bootstrap" --topic "$topic" "$@"
}

# ConsoleConsumer exits 0 even when it times out short of --max-messages, so the count is checked
# here from its closing "Processed a total of N messages" line.
cmd_consume() {
  (($# >= 2)) || die "usage: $0 consume TOPIC COUNT [ConsoleConsumer args]"
  local topic="$1" count="$2" bootstrap err rc=0
  shift 2
  bootstrap="$(require_bootstrap)"
  err="$(mktemp)"
  run_tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$bootstrap" \
    --topic "$topic" --from-beginning --max-messages "$count" \
    --timeout-ms "${KAFKA_CONSUME_TIMEOUT_MS:-20000}" "$@" 2>"$err" || rc=$?
  cat "$err" >&2
  local got
  got="$(sed -n 's/^Processed a total of \([0-9]*\) messages\{0,1\}$/\1/p' "$err" | tail -n 1)"
  rm -f "$err"
  ((rc == 0)) || die "console consumer failed (exit $rc)"
  [[ "${got:-0}" -ge "$count" ]] || die "consumed ${got:-0} of $count messages from $topic"
}

# --- three-node cluster ---------------------------------------------------------------------

CLUSTER_DIR="$RUN_DIR/cluster"
CLUSTER_PORTS_FILE="$CLUSTER_DIR/ports"
CLUSTER_BOOTSTRAP_FILE="$CLUSTER_DIR/bootstrap"
CLUSTER_HEAP_OPTS="${KAFKA_CLUSTER_HEAP_OPTS:--Xms96m -Xmx256m}"
CLUSTER_NODES=(1 2 3)

node_dir() { echo "$CLUSTER_DIR/node-$1"; }

# The pid of cluster node N if it runs (the command line is checked, as for broker_pid).
node_pid() {
  local dir pid
  dir="$(node_dir "$1")"
  [[ -f "$dir/kafka.pid" ]] || return 1
  pid="$(cat "$dir/kafka.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "kafka.Kafka $dir/server.properties" || return 1
  echo "$pid"
}

# Node N's client and controller ports (the ports file holds "P1 C1 P2 C2 P3 C3").
node_port() {
  local ports
  read -ra ports <"$CLUSTER_PORTS_FILE"
  echo "${ports[$((2 * ($1 - 1)))]}"
}
node_cport() {
  local ports
  read -ra ports <"$CLUSTER_PORTS_FILE"
  echo "${ports[$((2 * ($1 - 1) + 1))]}"
}

cluster_bootstrap() {
  local n list=()
  for n in "${CLUSTER_NODES[@]}"; do list+=("127.0.0.1:$(node_port "$n")"); done
  (
    IFS=,
    echo "${list[*]}"
  )
}

write_node_config() {
  local n="$1" dir voters=() m
  dir="$(node_dir "$n")"
  for m in "${CLUSTER_NODES[@]}"; do voters+=("$m@127.0.0.1:$(node_cport "$m")"); done
  mkdir -p "$dir/data" "$dir/logs"
  cat >"$dir/server.properties" <<EOF
# Written by scripts/kafka.sh start-cluster; edit the script, not this file.
# Node $n of three; each JVM is both a KRaft controller (a static quorum of three voters) and a
# broker, so losing any one node keeps a controller majority and two copies of every partition.
process.roles=broker,controller
node.id=$n
listeners=PLAINTEXT://127.0.0.1:$(node_port "$n"),CONTROLLER://127.0.0.1:$(node_cport "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(node_port "$n")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
controller.quorum.voters=$(
    IFS=,
    echo "${voters[*]}"
  )
log.dirs=$dir/data

# Production-like durability: three copies, two of them in sync before a write is acknowledged,
# and never an out-of-sync replica as leader.
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=3
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
num.partitions=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false

# A crashed node is fenced (and dropped from every ISR, so acks=all writes go on with the other
# two) after the session timeout; short, so a broker kill costs seconds, not the 9 s default.
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
replica.lag.time.max.ms=5000

# Three JVMs share two cores: fewer threads each.
num.network.threads=2
num.io.threads=2
background.threads=2
num.replica.fetchers=1
EOF
}

start_node() {
  local n="$1" dir
  dir="$(node_dir "$n")"
  echo "==== $(date -u +%FT%TZ) kafka.sh starting cluster node $n" >>"$dir/logs/broker.out"
  rm -f "$dir/kafka.pid"
  # As cmd_start: own session, all fds redirected, pid file written before exec'ing java. A small
  # heap, the serial collector and the C1 compiler only: three brokers on two cores start faster
  # and fit in well under a GiB.
  # shellcheck disable=SC2086,SC2016 # option lists split on purpose; $$ and "$@" for the inner bash
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$dir/kafka.pid" \
    java $CLUSTER_HEAP_OPTS -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true ${KAFKA_JVM_OPTS:-} \
    -Dkafka.logs.dir="$dir/logs" \
    -Dlog4j2.configurationFile="$SUPPORT_DIR/broker-log4j2.properties" \
    -cp "$LIBS/*" kafka.Kafka "$dir/server.properties" \
    </dev/null >>"$dir/logs/broker.out" 2>&1 8>&- 9>&- &
}

# Waits until every node in "$@" is registered and unfenced, asked through the whole cluster.
wait_nodes_ready() {
  local deadline=$((SECONDS + START_TIMEOUT)) out n ok left bootstrap
  bootstrap="$(cluster_bootstrap)"
  while ((SECONDS < deadline)); do
    for n in "$@"; do
      # Dead only once its pid is known and gone: right after start_node the pid file may not be
      # written yet, or still name the bash that is about to exec java.
      local pid_file
      pid_file="$(node_dir "$n")/kafka.pid"
      if [[ -s "$pid_file" ]] && ! kill -0 "$(cat "$pid_file")" 2>/dev/null; then
        fail_cluster "cluster node $n exited during startup" "$n"
      fi
    done
    left=$((deadline - SECONDS))
    ((left > 1)) || left=1
    out="$(timeout "$left" "${TOOL_JAVA[@]}" org.apache.kafka.tools.BrokerApiVersionsCommand \
      --bootstrap-server "$bootstrap" 2>/dev/null || true)"
    ok=1
    for n in "$@"; do
      if ! grep "^127.0.0.1:$(node_port "$n") (id: $n " <<<"$out" | grep -qv "isFenced: true"; then
        ok=0
      fi
    done
    ((ok == 1)) && return 0
    sleep 0.5
  done
  fail_cluster "cluster nodes $* did not all serve clients within $START_TIMEOUT s" "$@"
}

fail_cluster() {
  local why="$1" n
  shift
  log "ERROR: $why"
  for n in "$@"; do
    log "---- last lines of $(node_dir "$n")/logs/server.log ----"
    tail -n 30 "$(node_dir "$n")/logs/server.log" >&2 2>/dev/null || true
    log "---- last lines of $(node_dir "$n")/logs/broker.out ----"
    tail -n 10 "$(node_dir "$n")/logs/broker.out" >&2 2>/dev/null || true
  done
  exit 1
}

cmd_start_cluster() {
  mkdir -p "$CLUSTER_DIR"
  exec 9>"$CLUSTER_DIR/.lock"
  flock 9
  local n running=0
  for n in "${CLUSTER_NODES[@]}"; do
    if node_pid "$n" >/dev/null; then running=$((running + 1)); fi
  done
  if ((running == ${#CLUSTER_NODES[@]})) && [[ -s "$CLUSTER_BOOTSTRAP_FILE" ]]; then
    cat "$CLUSTER_BOOTSTRAP_FILE"
    return 0
  fi
  ensure_jars
  local started=$SECONDS
  if [[ ! -f "$CLUSTER_PORTS_FILE" || ! -f "$(node_dir 1)/data/meta.properties" ]]; then
    # Fresh: six distinct free ports, one cluster id, every node's storage formatted in parallel.
    local ports=() p _
    for _ in 1 2 3 4 5 6; do
      while :; do
        p="$(pick_port)"
        [[ " ${ports[*]} " == *" $p "* ]] || break
      done
      ports+=("$p")
    done
    rm -rf "${CLUSTER_DIR:?}"/node-*
    echo "${ports[*]}" >"$CLUSTER_PORTS_FILE"
    local id pids=()
    # A cluster id as StorageTool random-uuid makes one (16 random bytes, URL-safe base64, no
    # padding, not starting with '-'), without a JVM start.
    id=-
    while [[ "$id" == -* ]]; do
      id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    done
    for n in "${CLUSTER_NODES[@]}"; do
      write_node_config "$n"
      run_tool kafka.tools.StorageTool format -t "$id" -c "$(node_dir "$n")/server.properties" \
        >"$(node_dir "$n")/logs/format.out" 2>&1 &
      pids+=($!)
    done
    for n in "${!pids[@]}"; do
      if ! wait "${pids[$n]}"; then
        cat "$(node_dir $((n + 1)))/logs/format.out" >&2
        die "formatting cluster node $((n + 1)) failed"
      fi
    done
  fi
  log "starting a 3-node Kafka $KAFKA_VERSION cluster at $(cluster_bootstrap) (run dir $CLUSTER_DIR)"
  for n in "${CLUSTER_NODES[@]}"; do
    if ! node_pid "$n" >/dev/null; then start_node "$n"; fi
  done
  wait_nodes_ready "${CLUSTER_NODES[@]}"
  cluster_bootstrap >"$CLUSTER_BOOTSTRAP_FILE"
  log "cluster ready after $((SECONDS - started)) s"
  cat "$CLUSTER_BOOTSTRAP_FILE"
}

check_node() {
  [[ "${1:-}" =~ ^[1-3]$ ]] || die "expected a node number 1, 2 or 3, got '${1:-}'"
  [[ -f "$CLUSTER_PORTS_FILE" ]] || die "no cluster in $CLUSTER_DIR (run '$0 start-cluster')"
}

# True while PID runs: a zombie (killed, not yet reaped by whoever adopted it) counts as gone.
running() {
  kill -0 "$1" 2>/dev/null && [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]]
}

cmd_stop_broker() {
  local n="${1:-}" term=0 pid
  check_node "$n"
  if [[ "${2:-}" == "--term" ]]; then term=1; fi
  pid="$(node_pid "$n")" || die "cluster node $n is not running"
  if ((term == 1)); then kill -TERM "$pid"; else kill -KILL "$pid"; fi
  while running "$pid"; do sleep 0.05; done
  log "stopped cluster node $n (pid $pid, $([[ $term == 1 ]] && echo 'clean shutdown' || echo 'SIGKILL'))"
}

cmd_start_broker() {
  local n="${1:-}"
  check_node "$n"
  if node_pid "$n" >/dev/null; then die "cluster node $n is already running"; fi
  start_node "$n"
  wait_nodes_ready "$n"
  log "cluster node $n is back"
}

cmd_leader() {
  (($# == 1)) || die "usage: $0 leader TOPIC"
  [[ -s "$CLUSTER_BOOTSTRAP_FILE" ]] || die "no cluster running in $CLUSTER_DIR"
  run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$(cat "$CLUSTER_BOOTSTRAP_FILE")" \
    --describe --topic "$1" | sed -n 's/.*Partition: 0[[:space:]].*Leader: \([0-9-]*\).*/\1/p' | head -n 1
}

cmd_stop_cluster() {
  [[ -d "$CLUSTER_DIR" ]] || return 0
  exec 9>"$CLUSTER_DIR/.lock"
  flock 9
  local n pid
  for n in "${CLUSTER_NODES[@]}"; do
    if pid="$(node_pid "$n")"; then
      kill -KILL "$pid" 2>/dev/null || true
      while running "$pid"; do sleep 0.05; done
      log "stopped cluster node $n (pid $pid)"
    fi
  done
  # Data and identity go; logs/ stays for a post-mortem.
  rm -rf "${CLUSTER_DIR:?}"/node-*/data "$CLUSTER_PORTS_FILE" "$CLUSTER_BOOTSTRAP_FILE"
}

main() {
  local cmd="${1:-}"
  shift || true
  case "$cmd" in
    start)
      (($# == 0)) || die "start takes no arguments"
      cmd_start
      ;;
    stop) cmd_stop "$@" ;;
    restart) cmd_restart "$@" ;;
    status) cmd_status ;;
    bootstrap) require_bootstrap ;;
    topic) ensure_jars && cmd_topic "$@" ;;
    produce) ensure_jars && cmd_produce "$@" ;;
    consume) ensure_jars && cmd_consume "$@" ;;
    tool)
      (($# >= 1)) || die "usage: $0 tool CLASS [ARGS]"
      ensure_jars && run_tool "$@"
      ;;
    jars) ensure_jars && echo "$LIBS" ;;
    start-cluster) cmd_start_cluster ;;
    stop-broker) cmd_stop_broker "$@" ;;
    start-broker) ensure_jars && cmd_start_broker "$@" ;;
    leader) ensure_jars && cmd_leader "$@" ;;
    stop-cluster) cmd_stop_cluster ;;
    *)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
      exit 2
      ;;
  esac
}

main "$@"
