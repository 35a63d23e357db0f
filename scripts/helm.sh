#!/usr/bin/env bash
# Installs helm (from the Go module proxy, built with `go install`) and prints its path on stdout.
#
#   bash scripts/helm.sh            # install if missing or another version; print the binary
#   bash scripts/helm.sh check      # helm lint --strict + helm template of deploy/helm/tidegate for
#                                   # values.yaml and values-kafka.yaml (written to $HELM_RENDER_DIR,
#                                   # printed), both validated against the Kubernetes API types
#                                   # (scripts/kubecheck), and a refusal of 3 replicas on a file log
#   bash scripts/helm.sh validate FILE...   # only that validation, of any rendered manifests
#
# helm is built from source (helm.sh/helm/v3/cmd/helm at HELM_VERSION) into its own GOBIN under
# ~/.cache, so it is installed once per machine and never touches another Go installation's bin
# directory. Installing is idempotent: a binary that already reports HELM_VERSION is reused.
# Anything that fails (no go, the build, a version mismatch after it) stops the script loudly.
#
# The validation: scripts/kubecheck, a small Go program on k8s.io/api and the Prometheus
# Operator's API module (versions pinned in its go.mod and go.sum, from the Go module proxy),
# decodes every rendered object strictly into its API type, so an unknown field, a duplicate
# field, a value of the wrong type or an unknown kind fails the check. (The JSON schemas that
# kubeconform reads are not published in a package registry.) It is built once into
# ~/.cache/tidegate-helm/kubecheck/<hash of its sources>/.
#
# Environment:
#   HELM_CACHE        where the binary goes (default ~/.cache/tidegate-helm/<version>/bin)
#   HELM_RENDER_DIR   where `check` writes the rendered manifests (default /tmp/tidegate-helm-render)
#   KUBECHECK_CACHE   where kubecheck binaries go (default ~/.cache/tidegate-helm/kubecheck)
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=v3.22.0
# The Kubernetes version helm assumes without a cluster (helm template, lint), as its own Makefile
# sets it: from the k8s.io/client-go its go.mod names (v0.37.0 for helm v3.22.0, so 1.37).
# Without it a `go install` build assumes Kubernetes 1.20.
HELM_K8S_MAJOR=1
HELM_K8S_MINOR=37
HELM_CACHE="${HELM_CACHE:-$HOME/.cache/tidegate-helm/$HELM_VERSION/bin}"
HELM="$HELM_CACHE/helm"
CHART=deploy/helm/tidegate

say() { echo "helm.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

LDFLAGS="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in pkg/lint/rules pkg/chartutil; do
  LDFLAGS+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=$HELM_K8S_MAJOR -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$HELM_K8S_MINOR"
done

# The version the binary reports, when it was built with these -ldflags (go does not record
# -ldflags under -trimpath, so a stamp beside the binary says how it was built).
installed_version() {
  [[ -x "$HELM" && -f "$HELM.stamp" ]] || return 0
  [[ "$(cat "$HELM.stamp")" == "$HELM_VERSION $LDFLAGS" ]] || return 0
  "$HELM" version --template '{{.Version}}' 2>/dev/null || true
}

install() {
  if [[ "$(installed_version)" == "$HELM_VERSION" ]]; then
    return 0
  fi
  command -v go >/dev/null || die "go is not installed; helm is built with \`go install\` from the Go module proxy"
  say "installing helm $HELM_VERSION with go install into $HELM_CACHE (one-off)..."
  local start=$SECONDS
  mkdir -p "$HELM_CACHE"
  rm -f "$HELM.stamp"
  # -trimpath: a reproducible binary; the build cache stays Go's own (reused across versions).
  GOBIN="$HELM_CACHE" GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
    go install -trimpath -ldflags "$LDFLAGS" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" ||
    die "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION failed"
  echo "$HELM_VERSION $LDFLAGS" >"$HELM.stamp"
  local got
  got="$(installed_version)"
  [[ "$got" == "$HELM_VERSION" ]] || die "$HELM reports version '$got', expected $HELM_VERSION"
  say "helm $HELM_VERSION installed in $((SECONDS - start)) s"
}

KUBECHECK_SRC=scripts/kubecheck
kubecheck_install() {
  local key
  key="$(cat "$KUBECHECK_SRC/go.mod" "$KUBECHECK_SRC/go.sum" "$KUBECHECK_SRC/main.go" | sha256sum | cut -c1-16)"
  KUBECHECK="${KUBECHECK_CACHE:-$HOME/.cache/tidegate-helm/kubecheck}/$key/kubecheck"
  [[ -x "$KUBECHECK" ]] && return 0
  command -v go >/dev/null || die "go is not installed; scripts/kubecheck is built with the Go module proxy"
  say "building scripts/kubecheck (the Kubernetes API types) into $(dirname "$KUBECHECK") (one-off)..."
  local start=$SECONDS
  mkdir -p "$(dirname "$KUBECHECK")"
  (cd "$KUBECHECK_SRC" && GOFLAGS="${GOFLAGS:-} -buildvcs=false -mod=readonly" \
    go build -trimpath -o "$KUBECHECK.tmp" .) || die "building scripts/kubecheck failed"
  mv "$KUBECHECK.tmp" "$KUBECHECK"
  say "kubecheck built in $((SECONDS - start)) s"
}

validate() {
  (($#)) || die "usage: scripts/helm.sh validate FILE..."
  kubecheck_install
  "$KUBECHECK" "$@" || die "the manifests in $* do not all decode strictly into the Kubernetes API types (see above)"
}

check() {
  local out="${HELM_RENDER_DIR:-/tmp/tidegate-helm-render}"
  rm -rf "$out"
  mkdir -p "$out"
  local values
  for values in values.yaml values-kafka.yaml; do
    local name="${values%.yaml}"
    say "helm lint $CHART -f $CHART/$values"
    "$HELM" lint --strict "$CHART" -f "$CHART/$values" >&2 || die "helm lint failed for $values"
    say "helm template $CHART -f $CHART/$values > $out/$name.yaml"
    "$HELM" template tidegate "$CHART" --namespace tidegate -f "$CHART/$values" >"$out/$name.yaml" ||
      die "helm template failed for $values"
  done
  validate "$out/values.yaml" "$out/values-kafka.yaml"
  # A file log has one writer: the chart must refuse several replicas on it.
  if "$HELM" template tidegate "$CHART" -f "$CHART/values.yaml" --set coordinator.replicas=3 >/dev/null 2>&1; then
    die "helm template accepted coordinator.replicas=3 with store.kind=file"
  fi
  echo "$out"
}

case "${1:-install}" in
  install) install; echo "$HELM" ;;
  check) install; check ;;
  validate) shift; validate "$@" ;;
  *) die "usage: scripts/helm.sh [install|check|validate FILE...]" ;;
esac
