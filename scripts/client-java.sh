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
# Then the packaging checks (issue 48), each a named step that fails loudly:
#   install    `mvn install -DskipTests` of the client into the same local repository: the jar,
#              its pom and the -sources and -javadoc jars Maven Central requires (javadoc with
#              doclint, failing on any warning), all four checked to be there;
#   consumer   tests/packaging/java-consumer, a project that depends on
#              dev.tidegate:tidegate-client:<version> from that repository, compiles a class that
#              tags users of a fixed table and runs write checks, and runs it in its test.
# They add about 29 s on an empty local repository (the source, javadoc and install plugins come
# from Maven Central), 15 s on a warm one in a fresh checkout (javadoc runs), 8 s when the
# javadoc is up to date (measured on the loaded 2-core machine, nice 10).
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
consumer="$root/tests/packaging/java-consumer"
stamp="$repo/.tidegate-client-java-$(cat "$root/clients/java/pom.xml" "$consumer/pom.xml" | sha256sum | cut -c1-16)"
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
grep -o '\[figures\].*' "$log" || true
echo "client-java: passed in $((SECONDS - started)) s (${offline[*]:-online} Maven)" >&2

# Packaging (issue 48): the coordinates a project depends on, from a local repository.
step=$SECONDS
mvn_repo=(-B -Dstyle.color=never "${offline[@]}" -Dmaven.repo.local="$repo")
if ! mvn -q "${mvn_repo[@]}" -f "$root/clients/java/pom.xml" -DskipTests install >"$log" 2>&1; then
  cat "$log" >&2
  die "packaging step 'install' failed: mvn install -DskipTests of clients/java (jar, sources, javadoc)"
fi
version=$(sed -n 's|^  <version>\(.*\)</version>$|\1|p' "$root/clients/java/pom.xml" | head -1)
[ -n "$version" ] || die "packaging step 'install': no project version in clients/java/pom.xml"
installed="$repo/dev/tidegate/tidegate-client/$version"
for f in "tidegate-client-$version.pom" "tidegate-client-$version.jar" \
  "tidegate-client-$version-sources.jar" "tidegate-client-$version-javadoc.jar"; do
  [ -s "$installed/$f" ] || die "packaging step 'install': $installed/$f is missing"
done
if ! mvn -q "${mvn_repo[@]}" -f "$consumer/pom.xml" -Dtidegate.client.version="$version" test >"$log" 2>&1; then
  cat "$log" >&2
  die "packaging step 'consumer': tests/packaging/java-consumer does not build or run against dev.tidegate:tidegate-client:$version from $repo"
fi
grep -o 'java consumer:.*' "$log" || die "packaging step 'consumer': the consumer printed nothing"
touch "$stamp"
echo "client-java packaging: dev.tidegate:tidegate-client:$version installed (jar, pom, sources, javadoc) and consumed in $((SECONDS - step)) s" >&2
