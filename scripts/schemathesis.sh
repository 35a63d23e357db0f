#!/usr/bin/env bash
# Property-based API testing of the real binary against its own contract (GET /v1/openapi.json).
#
# Creates a venv with a pinned schemathesis (PyPI), starts target/debug/tidegate (or
# $TIDEGATE_BIN) on a free loopback port with a temporary data dir and a config holding an
# operator, a service and a viewer token, then runs `schemathesis run` over every operation once
# per token with the checks: no 5xx, the status is documented, the content type is documented,
# the body matches the documented schema. Fails loudly on any finding or if anything cannot be
# installed or started. SCHEMATHESIS_EXAMPLES bounds the examples per operation (default 10, to keep CI short).
set -euo pipefail
cd "$(dirname "$0")/.."

version="4.32.5"
examples="${SCHEMATHESIS_EXAMPLES:-10}"
venv="${SCHEMATHESIS_VENV:-$HOME/.cache/tidegate-schemathesis-$version}"
bin="${TIDEGATE_BIN:-${CARGO_TARGET_DIR:-target}/debug/tidegate}"

if [[ ! -x "$venv/bin/schemathesis" ]]; then
  echo "installing schemathesis $version into $venv (one-off)..."
  rm -rf "$venv"
  python3 -m venv "$venv" || { echo "scripts/schemathesis.sh: python3 -m venv failed (apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install -q "schemathesis==$version" || { echo "scripts/schemathesis.sh: pip install schemathesis==$version failed" >&2; exit 1; }
fi
"$venv/bin/schemathesis" --version

if [[ ! -x "$bin" ]]; then
  cargo build -j 2 --bin tidegate
fi

work="$(mktemp -d)"
pid=""
cleanup() {
  local rc=$?
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if ((rc == 0)); then rm -rf "$work"; else echo "scripts/schemathesis.sh: binary log and reports kept in $work" >&2; fi
}
trap cleanup EXIT

sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
operator_token="tg_schemathesis_operator"
viewer_token="tg_schemathesis_viewer"
service_token="tg_schemathesis_service"
# Moves at once: a generated watch registers subscribers that never acknowledge, and a move
# frozen by default would wait for them up to a generated freeze_window (as long as 10m).
cat >"$work/tidegate.toml" <<TOML
service_tokens_sha256 = ["$(sha "$service_token")"]

[freeze]
by_default = false

[[operators]]
name = "olga"
token_sha256 = "$(sha "$operator_token")"
role = "operator"

[[operators]]
name = "vera"
token_sha256 = "$(sha "$viewer_token")"
role = "viewer"
TOML

"$bin" serve --address 127.0.0.1 --port 0 --config "$work/tidegate.toml" --data-dir "$work/data" \
  >"$work/stdout.log" 2>"$work/stderr.log" &
pid=$!
url=""
for _ in $(seq 1 200); do
  url="$(sed -n 's/^tidegate listening on //p' "$work/stdout.log" | head -n 1)"
  [[ -n "$url" ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [[ -z "$url" ]]; then
  cat "$work/stderr.log" >&2
  echo "scripts/schemathesis.sh: $bin did not announce its port" >&2
  exit 1
fi
echo "tidegate under test at $url"

failed=()
for role in operator service viewer; do
  token_var="${role}_token"
  echo "== schemathesis as $role ($examples examples per operation)"
  # The watch stream never ends, so it cannot be read whole: tests/client_router.rs and
  # tests/http_api.rs cover it.
  if ! "$venv/bin/schemathesis" run "$url/v1/openapi.json" \
    --header "Authorization: Bearer ${!token_var}" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --exclude-path /v1/routing/watch \
    --max-examples "$examples" \
    --request-timeout 10 \
    --seed 1 \
    --workers 1 \
    --no-color \
    --report junit --report-dir "$work/report-$role"; then
    failed+=("$role")
  fi
  kill -0 "$pid" 2>/dev/null || { cat "$work/stderr.log" >&2; echo "scripts/schemathesis.sh: tidegate died" >&2; exit 1; }
done
if ((${#failed[@]})); then
  echo "scripts/schemathesis.sh: schemathesis found problems as: ${failed[*]} (see above)" >&2
  exit 1
fi
echo "schemathesis: every operation conforms as operator, service and viewer"
