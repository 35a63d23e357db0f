#!/usr/bin/env bash
# Installs the real OpenFeature SDKs that tests/edge_openfeature.rs drives against the edge:
# the official Python SDK with its OFREP provider (PyPI, in a venv) and the JavaScript server SDK
# with the OFREP provider (npm). Idempotent; fails loudly when an install fails.
#   OPENFEATURE_SDK_DIR (default ~/.cache/tidegate-openfeature) holds venv/ and js/.
set -euo pipefail
dir="${OPENFEATURE_SDK_DIR:-$HOME/.cache/tidegate-openfeature}"
mkdir -p "$dir"
# xxhash: the reference XXH3 for scripts/reference_tag.py (tests/reference_tag.rs).
py_pkgs=(openfeature-sdk==0.10.0 openfeature-provider-ofrep==0.3.0 xxhash==3.5.0)
js_pkgs=(@openfeature/server-sdk@1.23.0 @openfeature/ofrep-provider@0.1.3 @openfeature/ofrep-core@0.1.4 @openfeature/core@1.12.0)

command -v python3 >/dev/null || { echo "python3 is required for the OpenFeature Python SDK" >&2; exit 1; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  [ "$(id -u)" -eq 0 ] || { echo "node/npm missing and we are not root; run: apt-get install -y nodejs npm" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi

stamp="$dir/.installed-$(echo "${py_pkgs[*]} ${js_pkgs[*]}" | sha256sum | cut -c1-16)"
if [[ -f "$stamp" ]]; then
  echo "$dir"
  exit 0
fi
if [[ ! -x "$dir/venv/bin/python" ]]; then
  python3 -m venv "$dir/venv" || { echo "python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
"$dir/venv/bin/pip" install -q --disable-pip-version-check "${py_pkgs[@]}" >&2 ||
  { echo "pip install ${py_pkgs[*]} failed" >&2; exit 1; }
npm install --silent --no-audit --no-fund --prefix "$dir/js" "${js_pkgs[@]}" >&2 ||
  { echo "npm install ${js_pkgs[*]} failed" >&2; exit 1; }
touch "$stamp"
echo "$dir"
