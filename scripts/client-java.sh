#!/usr/bin/env bash
# Builds and tests the Java client library (clients/java, Maven) against the real tidegate
# binary: tag agreement with POST /v1/tag on 100 000 users, following dial moves with acks,
# convergence held by a non-acking client, the write check, the disk cache with the
# coordinator killed, bad coordinator input, the OpenFeature provider, and the Kafka partitioner
# against the Rust LaneProducer (through `tidegate demo` and its mock Kafka).
#   TIDEGATE_TEST_BIN     the tidegate binary (default ${CARGO_TARGET_DIR:-target}/debug/tidegate);
#                         the tests fail, not skip, when it is missing
#   TIDEGATE_MAVEN_REPO   the local Maven repository (default ~/.cache/tidegate-maven); the first
#                         run resolves from Maven Central, later runs are offline
#   TIDEGATE_TEST_KAFKA   bootstrap of a Kafka broker for the lane consumer test; when unset, a
#                         broker is started with scripts/kafka.sh in its own run dir
#                         (/tmp/tidegate-kafka-client-java) and stopped at the end
#   CLIENT_JAVA_TESTS     a surefire -Dtest filter (default: every test)
#   TIDEGATE_KAFKA_PYTHON a Python with confluent-kafka, the independent reader of the Rust
#                         producer's records in the partitioner test (default: a venv under
#                         ~/.cache/tidegate-client-java, installed here once from PyPI)
# Prints the figures the tests measure (lines starting with [figures]).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "scripts/client-java.sh: $*" >&2; exit 1; }

bin="${TIDEGATE_TEST_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/tidegate}"
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac
[ -x "$bin" ] || die "no tidegate binary at $bin (build it, or set TIDEGATE_TEST_BIN)"
command -v javac >/dev/null && command -v mvn >/dev/null ||
  die "javac and mvn are required (Debian: apt-get install default-jdk-headless maven)"
repo="${TIDEGATE_MAVEN_REPO:-$HOME/.cache/tidegate-maven}"
mkdir -p "$repo"
stamp="$repo/.tidegate-client-java-$(sha256sum "$root/clients/java/pom.xml" | cut -c1-16)"
offline=()
[ -f "$stamp" ] && offline=(-o)

started=$SECONDS
# The partitioner test reads librdkafka's mock cluster with librdkafka (confluent-kafka): the Java
# Kafka client cannot talk to the mock.
if [ -z "${TIDEGATE_KAFKA_PYTHON:-}" ]; then
  venv="$HOME/.cache/tidegate-client-java/venv"
  if ! "$venv/bin/python" -c 'import confluent_kafka' 2>/dev/null; then
    python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$venv/bin/pip" install -q --disable-pip-version-check confluent-kafka==2.16.1 >&2 ||
      die "pip install confluent-kafka==2.16.1 failed"
  fi
  export TIDEGATE_KAFKA_PYTHON="$venv/bin/python"
fi
log="$(mktemp)"
kafka_run=""
cleanup() {
  rm -f "$log"
  if [ -n "$kafka_run" ]; then
    KAFKA_RUN_DIR="$kafka_run" "$root/scripts/kafka.sh" stop >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
if [ -z "${TIDEGATE_TEST_KAFKA:-}" ]; then
  kafka_run=/tmp/tidegate-kafka-client-java
  TIDEGATE_TEST_KAFKA="$(KAFKA_RUN_DIR="$kafka_run" KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms128m -Xmx384m}" \
    "$root/scripts/kafka.sh" start)" || die "scripts/kafka.sh start failed (see $kafka_run/logs)"
  export TIDEGATE_TEST_KAFKA
fi
args=(-B -Dstyle.color=never "${offline[@]}" -Dmaven.repo.local="$repo" -f "$root/clients/java/pom.xml" test)
[ -n "${CLIENT_JAVA_TESTS:-}" ] && args+=(-Dtest="$CLIENT_JAVA_TESTS")
export TIDEGATE_TEST_BIN="$bin"
export MAVEN_OPTS="${MAVEN_OPTS:--Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
if ! mvn -q "${args[@]}" >"$log" 2>&1; then
  cat "$log" >&2
  die "mvn test failed (TIDEGATE_TEST_BIN=$bin); the surefire reports are in clients/java/target/surefire-reports"
fi
touch "$stamp"
grep -o '\[figures\].*' "$log" || true
echo "client-java: passed in $((SECONDS - started)) s (${offline[*]:-online} Maven)" >&2
