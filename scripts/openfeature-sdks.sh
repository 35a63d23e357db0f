#!/usr/bin/env bash
# Installs the real OpenFeature SDKs that tests/edge_openfeature.rs drives against the edge:
# the official Python SDK with its OFREP provider (PyPI, in a venv), the JavaScript server SDK
# with the OFREP provider (npm), the Java SDK with the java-sdk-contrib OFREP provider (Maven
# Central; tests/openfeature/java, built into a jar plus its runtime dependencies) and the Go SDK
# with the go-sdk-contrib OFREP provider (the Go module proxy; tests/openfeature/go, built into
# one binary). Idempotent: each part has a stamp named after a hash of its pins (and, for Java and
# Go, of its sources) and is redone when the stamp or what it installed is missing, so a warm
# run does nothing. Fails loudly when an install or build fails.
#   OPENFEATURE_SDK_DIR (default ~/.cache/tidegate-openfeature) holds venv/, js/, java/ and go/.
# Prints that directory on stdout; everything else goes to stderr.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${OPENFEATURE_SDK_DIR:-$HOME/.cache/tidegate-openfeature}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
# xxhash: the reference XXH3 for scripts/reference_tag.py (tests/reference_tag.rs).
py_pkgs=(openfeature-sdk==0.10.0 openfeature-provider-ofrep==0.3.0 xxhash==3.5.0)
js_pkgs=(@openfeature/server-sdk@1.23.0 @openfeature/ofrep-provider@0.1.3 @openfeature/ofrep-core@0.1.4 @openfeature/core@1.12.0)
# The Java and Go versions are pinned in their projects: dev.openfeature:sdk 1.22.0 and
# dev.openfeature.contrib.providers:ofrep 0.0.2 in java/pom.xml; github.com/open-feature/go-sdk
# v1.20.0 and github.com/open-feature/go-sdk-contrib/providers/ofrep v0.1.7 in go/go.mod (go.sum).
java_src="$root/tests/openfeature/java"
go_src="$root/tests/openfeature/go"
java_files=("$java_src/pom.xml" "$java_src/src/main/java/dev/tidegate/ofrep/Main.java")
go_files=("$go_src/go.mod" "$go_src/go.sum" "$go_src/main.go")

die() { echo "scripts/openfeature-sdks.sh: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" -eq 0 ] || die "$1 missing and we are not root; run: apt-get install -y $2"; }

command -v python3 >/dev/null || die "python3 is required for the OpenFeature Python SDK"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  need_root "node/npm" "nodejs npm"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
# The Java project needs a JDK (javac), not only the JRE that scripts/kafka.sh runs on.
if ! command -v javac >/dev/null || ! command -v mvn >/dev/null; then
  need_root "javac/mvn" "default-jdk-headless maven"
  apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 default-jdk-headless maven >/dev/null ||
    die "installing default-jdk-headless and maven with apt-get failed"
fi
# The Go toolchain of the machine (go.mod asks for go 1.26; GOTOOLCHAIN=local so that an older
# one fails here, loudly, instead of trying to download another).
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  PATH="/usr/local/go/bin:$PATH"
fi
command -v go >/dev/null || die "go is required for the OpenFeature Go SDK (go.mod asks for go 1.26)"

# stamp PART TEXT...: the path of PART's stamp for that content.
stamp() {
  local part="$1"
  shift
  echo "$dir/.installed-$part-$(printf '%s\n' "$@" | sha256sum | cut -c1-16)"
}
# done_with PART STAMP: drops PART's older stamps, records this one and says how long PART took.
started=$SECONDS
done_with() {
  rm -f "$dir/.installed-$1-"*
  touch "$2"
  echo "openfeature-sdks: $1 ready in $((SECONDS - started)) s" >&2
  started=$SECONDS
}

py_stamp="$(stamp py "${py_pkgs[@]}")"
if [[ ! -f "$py_stamp" || ! -x "$dir/venv/bin/python" ]]; then
  if [[ ! -x "$dir/venv/bin/python" ]]; then
    python3 -m venv "$dir/venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  fi
  "$dir/venv/bin/pip" install -q --disable-pip-version-check "${py_pkgs[@]}" >&2 ||
    die "pip install ${py_pkgs[*]} failed"
  done_with py "$py_stamp"
fi

js_stamp="$(stamp js "${js_pkgs[@]}")"
if [[ ! -f "$js_stamp" || ! -d "$dir/js/node_modules" ]]; then
  npm install --silent --no-audit --no-fund --prefix "$dir/js" "${js_pkgs[@]}" >&2 ||
    die "npm install ${js_pkgs[*]} failed"
  done_with js "$js_stamp"
fi

# Java: the jar and its runtime dependencies go to java/lib (the test runs `java -cp 'lib/*'`).
# The directory is emptied first so that no jar of an older pin stays on that classpath.
java_stamp="$(stamp java "$(cat "${java_files[@]}")")"
if [[ ! -f "$java_stamp" || ! -f "$dir/java/lib/tidegate-ofrep.jar" ]]; then
  rm -rf "$dir/java"
  mkdir -p "$dir/java"
  if ! mvn -B -q -Dstyle.color=never -f "$java_src/pom.xml" -Dofrep.out="$dir/java" package \
    >"$dir/java/build.log" 2>&1; then
    tail -n 40 "$dir/java/build.log" >&2
    die "building tests/openfeature/java with Maven failed (log: $dir/java/build.log)"
  fi
  [[ -f "$dir/java/lib/tidegate-ofrep.jar" ]] || die "the Maven build left no $dir/java/lib/tidegate-ofrep.jar"
  rm -rf "$dir/java/build"
  done_with java "$java_stamp"
fi

# Go: one static binary, go/ofrep-evaluate; go.sum pins every module it downloads.
go_stamp="$(stamp go "$(cat "${go_files[@]}")")"
if [[ ! -f "$go_stamp" || ! -x "$dir/go/ofrep-evaluate" ]]; then
  rm -rf "$dir/go"
  mkdir -p "$dir/go"
  if ! (cd "$go_src" && GOTOOLCHAIN=local go build -mod=readonly -buildvcs=false -trimpath \
    -o "$dir/go/ofrep-evaluate" .) >"$dir/go/build.log" 2>&1; then
    tail -n 40 "$dir/go/build.log" >&2
    die "building tests/openfeature/go failed (log: $dir/go/build.log)"
  fi
  done_with go "$go_stamp"
fi
echo "$dir"
