#!/usr/bin/env bash
# Builds the Grafana dashboards with Grafana's own SDK (grafana-foundation-sdk from PyPI).
#
#   bash scripts/dashboards.sh          # fail if dashboards/*.json differ from what the SDK builds
#                                       # (scripts/test.sh runs this)
#   bash scripts/dashboards.sh write    # rewrite dashboards/*.json
#
# The SDK is pinned with its hash in dashboards/requirements.txt and installed with
# --require-hashes --only-binary=:all: into a virtualenv under ~/.cache, made once and reused
# while the requirements file is unchanged (a stamp beside it holds the file's sha256). Any step
# that fails (no Python 3.11+, the virtualenv, pip) stops the script loudly, naming the step.
#
# Environment:
#   DASHBOARDS_VENV   the virtualenv (default ~/.cache/tidegate-dashboards/venv)
#   PYTHON            the interpreter that makes it (default python3; the SDK needs 3.11+)
set -euo pipefail
cd "$(dirname "$0")/.."

REQUIREMENTS=dashboards/requirements.txt
VENV="${DASHBOARDS_VENV:-$HOME/.cache/tidegate-dashboards/venv}"
PYTHON="${PYTHON:-python3}"

say() { echo "dashboards.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

case "${1:-check}" in
  check) mode=--check ;;
  write) mode= ;;
  *) die "usage: bash scripts/dashboards.sh [check|write]" ;;
esac

want="$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/python" || "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" != "$want" ]]; then
  start=$SECONDS
  command -v "$PYTHON" >/dev/null || die "step 'python': $PYTHON is not installed"
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "step 'python': grafana-foundation-sdk needs Python 3.11 or newer; $PYTHON is $("$PYTHON" -V 2>&1)"
  say "installing the pinned grafana-foundation-sdk into $VENV (one-off)..."
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  log="$(mktemp)"
  "$PYTHON" -m venv "$VENV" >"$log" 2>&1 || {
    cat "$log" >&2
    die "step 'virtualenv': $PYTHON -m venv $VENV failed (on Debian: apt-get install python3-venv)"
  }
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input --no-deps \
    --require-hashes --only-binary=:all: -r "$REQUIREMENTS" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    rm -rf "$VENV"
    die "step 'pip install': pip could not install $REQUIREMENTS (the pinned grafana-foundation-sdk) into $VENV; see the output above"
  fi
  rm -f "$log"
  echo "$want" >"$VENV/.requirements.sha256"
  say "grafana-foundation-sdk installed in $((SECONDS - start)) s"
fi

"$VENV/bin/python" dashboards/generate.py $mode || die "step 'generate': dashboards/generate.py ${mode:-(write)} failed"
