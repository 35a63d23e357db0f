#!/usr/bin/env bash
# The test command (README.md "Two commands", .ci/run): installs what the suites need, then runs them all.
#
# Every suite runs; none is skipped for a missing component. A component that cannot be
# installed or started fails this script loudly, before any test runs. Tests start their own
# instances (tidegate binaries, Prometheus via scripts/prometheus.sh) on free loopback ports.
# One real Kafka broker (scripts/kafka.sh) is started here and shared by the tests/mq_* suites,
# each on its own topics and groups, and one PostgreSQL cluster (scripts/postgres.sh) for
# tests/pg_zero_loss.rs; both are stopped (and their data wiped) when this script exits.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== the manual: mdbook build docs, every internal link (scripts/docs.sh)"
bash scripts/docs.sh

# helm comes from the Go module proxy (go install, cached under ~/.cache/tidegate-helm); then
# helm lint + helm template for the file-log and the Kafka values, each rendered object decoded
# strictly into its Kubernetes API type (scripts/kubecheck, built once from the Go module proxy).
# tests/helm_chart.rs parses the rendered manifests (it renders them again itself).
echo "== the Helm chart: helm lint, helm template and the API types, both values files (scripts/helm.sh check)"
bash scripts/helm.sh check >/dev/null

echo "== real components"
bash scripts/prometheus.sh install
command -v promtool >/dev/null || { echo "promtool is missing after install" >&2; exit 1; }

# Grafana's own SDK (grafana-foundation-sdk, pinned with its hash in dashboards/requirements.txt)
# into a virtualenv under ~/.cache, reused; then the committed JSON must equal what it builds.
echo "== dashboards are built with Grafana's SDK by dashboards/generate.py (scripts/dashboards.sh)"
bash scripts/dashboards.sh

echo "== the HTTP API reference is generated from src/http/openapi.json (scripts/openapi_docs.py)"
python3 scripts/openapi_docs.py --check

# The operator UI's browser tests (tests/ui_browser.rs) drive Debian's Chromium through its
# chromedriver. They fail, never skip, without them, so install them here or stop.
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  [ "$(id -u)" -eq 0 ] || { echo "chromium or chromedriver is missing and we are not root; run: apt-get install -y chromium chromium-driver" >&2; exit 1; }
  echo "installing Debian's chromium and chromium-driver (one-off)..."
  apt_log="$(mktemp)"
  if ! { apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 chromium chromium-driver; } >"$apt_log" 2>&1; then
    tail -n 30 "$apt_log" >&2
    echo "installing chromium and chromium-driver with apt-get failed; see the output above" >&2
    exit 1
  fi
  rm -f "$apt_log"
fi
/usr/bin/chromium --version
/usr/bin/chromedriver --version


# tests/docs_curl.rs runs the README's commands as printed, and they read versions with jq.
if ! command -v jq >/dev/null; then
  [ "$(id -u)" -eq 0 ] || { echo "jq is missing and we are not root; run: apt-get install -y jq" >&2; exit 1; }
  echo "installing Debian's jq (one-off)..."
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 jq >/dev/null ||
    { echo "installing jq with apt-get failed" >&2; exit 1; }
fi

# The edge's gateway tests (tests/edge_nginx.rs) run Debian's nginx with config/nginx/.
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  [ "$(id -u)" -eq 0 ] || { echo "nginx is missing and we are not root; run: apt-get install -y nginx-light (or nginx)" >&2; exit 1; }
  echo "installing Debian's nginx (one-off)..."
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 nginx >/dev/null ||
    { echo "installing nginx with apt-get failed" >&2; exit 1; }
fi
/usr/sbin/nginx -v

# The OpenFeature SDK tests (tests/edge_openfeature.rs): the Python SDK + OFREP provider (PyPI),
# the JavaScript server SDK + OFREP provider (npm), and the Java (Maven Central) and Go (the Go
# module proxy) SDKs + OFREP providers, built once from tests/openfeature/{java,go} and cached.
echo "== OpenFeature SDKs (scripts/openfeature-sdks.sh)"
OPENFEATURE_SDK_DIR="$(bash scripts/openfeature-sdks.sh)" ||
  { echo "scripts/test.sh: installing the OpenFeature SDKs failed" >&2; exit 1; }
export OPENFEATURE_SDK_DIR

# Kafka runs on Java and its jars come from Maven Central through mvn (cached after the first
# run); a machine without them gets Debian's packages.
if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
  apt-get update -qq && apt-get install -y -qq default-jre-headless maven >/dev/null
fi

# Run dirs of our own, so a broker or database someone else started by hand is neither reused
# nor stopped.
own_run_dir=0
if [[ -z "${KAFKA_RUN_DIR:-}" ]]; then
  export KAFKA_RUN_DIR="/tmp/tidegate-kafka-test-$$"
  own_run_dir=1
fi
own_pg_run_dir=0
if [[ -z "${POSTGRES_RUN_DIR:-}" ]]; then
  export POSTGRES_RUN_DIR="/tmp/tidegate-postgres-test-$$"
  own_pg_run_dir=1
fi
stop_components() {
  local rc=$?
  # Side builds still running when a step failed (see the cargo test step) stop too.
  if [[ -n "${side_builds:-}" ]] && kill -0 "$side_builds" 2>/dev/null; then
    pkill -TERM -P "$side_builds" 2>/dev/null || true
    kill -TERM "$side_builds" 2>/dev/null || true
  fi
  bash scripts/kafka.sh stop >/dev/null 2>&1 || true
  bash scripts/postgres.sh stop >/dev/null 2>&1 || true
  # The logs stay for a post-mortem when something failed.
  if ((rc == 0 && own_run_dir == 1)); then rm -rf "$KAFKA_RUN_DIR"; fi
  if ((rc == 0 && own_pg_run_dir == 1)); then rm -rf "$POSTGRES_RUN_DIR"; fi
}
trap stop_components EXIT
echo "== Kafka broker (scripts/kafka.sh start, run dir $KAFKA_RUN_DIR)"
if ! bootstrap="$(bash scripts/kafka.sh start)"; then
  echo "scripts/test.sh: the Kafka broker did not start; the tests/mq_* suites need it (see $KAFKA_RUN_DIR/logs)" >&2
  exit 1
fi
echo "Kafka at $bootstrap"
# tests/ha_kafka_cluster.rs, ha_gates.rs and ha_writers.rs share one three-node cluster (three
# more JVMs, 256 MiB heap each, through tests/ha_support/cluster.rs). It boots in the background
# while cargo builds; each test calls `start-cluster` itself, which waits for this start (or
# reuses the cluster, or restarts a node left down) and fails the test loudly with the script's
# output if the cluster cannot start. No test stops it: `kafka.sh stop` in the EXIT trap stops it
# with the single broker.
echo "== Kafka three-node cluster (scripts/kafka.sh start-cluster, in the background; log $KAFKA_RUN_DIR/cluster-start.log)"
mkdir -p "$KAFKA_RUN_DIR"
bash scripts/kafka.sh start-cluster >"$KAFKA_RUN_DIR/cluster-start.log" 2>&1 &

# tests/pg_zero_loss.rs commits to a real PostgreSQL (Debian's postgresql; the script installs
# it when missing) and reads its URL from POSTGRES_TEST_URL; without it the test fails.
echo "== PostgreSQL (scripts/postgres.sh start, run dir $POSTGRES_RUN_DIR)"
if ! POSTGRES_TEST_URL="$(bash scripts/postgres.sh start)"; then
  echo "scripts/test.sh: PostgreSQL did not start; tests/pg_zero_loss.rs needs it (see $POSTGRES_RUN_DIR/logs)" >&2
  exit 1
fi
export POSTGRES_TEST_URL
echo "PostgreSQL at $POSTGRES_TEST_URL"

# tests/partition.rs (issue 45's partition suite) builds three zones as network namespaces with
# veth pairs and nftables cuts, each with a Kafka node, a replica, an edge and a zone writer, and
# its own PostgreSQL (scripts/postgres.sh) in a core namespace. It must run as root, as CI does:
# otherwise it fails, never skips. It needs iproute2 and nftables.
if ! command -v ip >/dev/null || ! command -v nft >/dev/null; then
  [ "$(id -u)" -eq 0 ] || { echo "ip or nft is missing and we are not root; run: apt-get install -y iproute2 nftables" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 iproute2 nftables >/dev/null ||
    { echo "installing iproute2 and nftables with apt-get failed" >&2; exit 1; }
fi

CARGO_TARGET_DIR_RESOLVED="${CARGO_TARGET_DIR:-$PWD/target}"
echo "== cargo test (unit, property, HTTP, restart, drains, real Prometheus, real Kafka, UI in Chromium, tidy, a rolling upgrade; benches once in test mode)"
# The examples as binaries first: tests/pg_zero_loss.rs and tests/partition.rs run
# examples/zone_writer as the zones' writers, and `cargo test` builds examples without putting
# them at target/debug/examples/.
cargo build -j 2 --examples
cargo test -j 2 --all-targets --no-run
# While the tests run (most of their time is waiting on real time: brokers, browsers, timeouts),
# the builds that later steps need go on beside them at a lower priority, each in a target dir
# that cargo test no longer locks: the previous release's binary for tests/rolling_upgrade.rs
# (scripts/release-bin.sh; the test waits for it), the fuzz targets (nightly, instrumented) and
# the benchmark smoke run's binaries. On a fresh machine that hides about 9 minutes of building.
side_log="$(mktemp /tmp/tidegate-side-builds.XXXXXX)"
TIDEGATE_RELEASE_BIN="$(bash scripts/release-bin.sh --path)" ||
  { echo "scripts/test.sh: no previous release to build (see above); tests/rolling_upgrade.rs needs it" >&2; exit 1; }
export TIDEGATE_RELEASE_BIN
(
  set -e
  nice -n 10 bash scripts/release-bin.sh
  FUZZ_TARGET_DIR="${FUZZ_TARGET_DIR:-$HOME/.cache/tidegate-fuzz-target}" nice -n 10 bash scripts/fuzz.sh build
  nice -n 10 bash scripts/bench.sh --smoke-build
) >"$side_log" 2>&1 &
side_builds=$!
echo "side builds (pid $side_builds, log $side_log): the previous release at $TIDEGATE_RELEASE_BIN, the fuzz targets, the benchmarks"
side_started=$SECONDS
# --no-fail-fast: one failing binary no longer hides the rest (a run that stopped at a flaky
# client_router test, 445 s in, said nothing about the other hundred binaries).
cargo test -j 2 --all-targets --no-fail-fast
if ! wait "$side_builds"; then
  tail -n 60 "$side_log" >&2
  echo "scripts/test.sh: a side build failed (the whole log: $side_log)" >&2
  exit 1
fi
echo "side builds done $((SECONDS - side_started)) s after the tests started: $(grep -h 'built in\|^fuzz: built\|^bench: built' "$side_log" | tr '\n' ' ')"
rm -f "$side_log"

# The packages, from the binary the tests just ran (docs/src/install.md): the .deb installed with
# dpkg -i, its units verified, started as the units start it, removed and purged; the container
# image built with buildah (FROM scratch, no daemon), its config and contents checked and its
# root filesystem run as its user.
echo "== packages: the .deb and the container image (scripts/package.sh ci)"
bash scripts/package.sh ci

# The client libraries in other languages against the binary the tests just ran
# (docs/src/client-libraries.md): tags, dial follow and acks, the write check, the disk cache.
echo "== the Go client (scripts/client-go.sh)"
TIDEGATE_TEST_BIN="$CARGO_TARGET_DIR_RESOLVED/debug/tidegate" bash scripts/client-go.sh
echo "== the Java client (scripts/client-java.sh, on this script's Kafka broker)"
TIDEGATE_TEST_BIN="$CARGO_TARGET_DIR_RESOLVED/debug/tidegate" TIDEGATE_TEST_KAFKA="$bootstrap" \
  bash scripts/client-java.sh

echo "== API contract: schemathesis against the real binary (scripts/schemathesis.sh)"
bash scripts/schemathesis.sh

# cargo-fuzz needs nightly and rebuilds every dependency with coverage instrumentation, so its
# target dir is kept outside the clone (warm on a machine that ran CI before). The smoke uses the
# dev profile (cold build ~4 min instead of ~19; about 25x fewer executions per second, so it
# catches panics on the seeds and their near neighbours; FUZZ_PROFILE=release for real runs).
echo "== fuzz smoke (scripts/fuzz.sh: log decoder, config loader, SSE parser, ${FUZZ_SECONDS:-15}s each)"
FUZZ_SECONDS="${FUZZ_SECONDS:-15}" FUZZ_TARGET_DIR="${FUZZ_TARGET_DIR:-$HOME/.cache/tidegate-fuzz-target}" \
  bash scripts/fuzz.sh

echo "== benchmark smoke (scripts/bench.sh --smoke: a few seconds each, no thresholds)"
bash scripts/bench.sh --smoke
