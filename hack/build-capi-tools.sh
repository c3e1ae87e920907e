#!/usr/bin/env bash
# Builds the Cluster API managers that kobe's capi backend is tested against, as plain
# processes (no Docker, no images): core CAPI, the kubeadm bootstrap provider (CABPK), the
# kubeadm control-plane provider (KCP) and CAPD, whose manager carries the in-memory
# infrastructure provider (DevCluster/DevMachine with backend.inMemory). Also copies the
# CRDs, webhook manifests and the in-memory ClusterClass from the same module versions.
#
# Usage:
#   hack/build-capi-tools.sh        build whatever is missing, then record it in versions.env
#   hack/build-capi-tools.sh sync   regenerate hack/tools/capi/go.mod + go.sum from the version below
#
# Output: ${KOBE_TOOLS_DIR:-<repo>/.cache/tools}/capi-<version>/{bin,config}. Keyed by version:
# a warm run only checks files. Run after hack/build-tools.sh (which rewrites versions.env);
# this script adds its CAPI_* lines to versions.env.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Core, api and test modules must be the same patch version (test v1.14.4 exists, core does not).
CAPI_VERSION=v1.14.2

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODDIR=$REPO_ROOT/hack/tools/capi
OUT=${KOBE_TOOLS_DIR:-$REPO_ROOT/.cache/tools}
DEST=$OUT/capi-$CAPI_VERSION

export CGO_ENABLED=0
export GOWORK=off

command -v go >/dev/null || die "go is not on PATH"

# binary name = main package. bootstrap/kubeadm and controlplane/kubeadm are both "kubeadm",
# so every binary is built on its own (one shared build cache makes the later ones quick).
MANAGERS=(
  "capi-manager=sigs.k8s.io/cluster-api/core"
  "kubeadm-bootstrap-manager=sigs.k8s.io/cluster-api/bootstrap/kubeadm"
  "kubeadm-control-plane-manager=sigs.k8s.io/cluster-api/controlplane/kubeadm"
  "capd-manager=sigs.k8s.io/cluster-api/test/infrastructure/docker"
)

check_pin() {
  local have
  for mod in sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/test sigs.k8s.io/cluster-api/api; do
    have=$(cd "$MODDIR" && go list -m -f '{{.Version}}{{with .Replace}} {{.Version}}{{end}}' "$mod" 2>/dev/null | awk '{print $NF}') ||
      die "cannot read $MODDIR/go.mod"
    [[ $have == "$CAPI_VERSION" ]] || die "$MODDIR/go.mod resolves $mod to ${have:-<none>}, but build-capi-tools.sh says $CAPI_VERSION.
       Run: hack/build-capi-tools.sh sync"
  done
}

# ldflags that make `--version` and the managers' user agent say the real version.
capi_ldflags() {
  printf '%s' "-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$CAPI_VERSION -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"
}

build_managers() {
  mkdir -p "$DEST/bin"
  local entry name pkg t0
  for entry in "${MANAGERS[@]}"; do
    name=${entry%%=*} pkg=${entry#*=}
    if [[ -x $DEST/bin/$name ]]; then log "capi $CAPI_VERSION: $name up to date"; continue; fi
    log "capi $CAPI_VERSION: building $name ($pkg)"
    t0=$(now)
    go_build_to "$OUT" "$DEST/bin/$name" "$MODDIR" "$pkg" -mod=readonly -trimpath -ldflags "$(capi_ldflags)"
    log "capi $CAPI_VERSION: $name done in $(since "$t0")"
  done
}

# The managers' CRDs and webhook manifests, as the modules ship them; testsuite/capimgmt adds
# what kustomize and cert-manager normally add (contract labels, 127.0.0.1 webhook URLs, CA).
copy_config() {
  if [[ -f $DEST/config/.complete ]]; then log "capi $CAPI_VERSION: config up to date"; return; fi
  local core test
  core=$(cd "$MODDIR" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api) || die "sigs.k8s.io/cluster-api not in the module cache"
  test=$(cd "$MODDIR" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api/test) || die "sigs.k8s.io/cluster-api/test not in the module cache"
  [[ -n $core && -n $test ]] || { (cd "$MODDIR" && go mod download sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/test); copy_config; return; }
  local tmp; tmp=$(mktemp -d "$OUT/.build.XXXXXX")
  local p src
  for p in core:"$core/core/config" bootstrap:"$core/bootstrap/kubeadm/config" controlplane:"$core/controlplane/kubeadm/config" infrastructure:"$test/infrastructure/docker/config"; do
    src=${p#*:} p=${p%%:*}
    [[ -d $src/crd/bases && -f $src/webhook/manifests.yaml ]] || { rm -rf "$tmp"; die "no CRDs or webhooks in $src"; }
    mkdir -p "$tmp/$p/crd"
    install -m 0644 "$src"/crd/bases/*.yaml "$tmp/$p/crd/"
    install -m 0644 "$src/webhook/manifests.yaml" "$tmp/$p/webhooks.yaml"
  done
  mkdir -p "$tmp/templates"
  install -m 0644 "$test/infrastructure/docker/templates/clusterclass-in-memory.yaml" "$tmp/templates/"
  touch "$tmp/.complete"
  rm -rf "$DEST/config"
  mkdir -p "$DEST"
  mv "$tmp" "$DEST/config"
  log "capi $CAPI_VERSION: config copied"
}

# Adds (or replaces) the CAPI_* lines of versions.env, atomically.
record_manifest() {
  record_versions "$OUT" '^CAPI_' 'CAPI_*' <<EOF
CAPI_VERSION=$CAPI_VERSION
CAPI_BIN_DIR=$DEST/bin
CAPI_CONFIG_DIR=$DEST/config
EOF
}

sync_module() {
  log "sync $MODDIR: sigs.k8s.io/cluster-api{,/api,/test} $CAPI_VERSION"
  local header
  header=$(awk '/^module /{exit} {print}' "$MODDIR/go.mod")
  cat >"$MODDIR/go.mod" <<EOF
$header
module github.com/kunobi-ninja/kobe/hack/tools/capi

go 1.26.0

require (
	sigs.k8s.io/cluster-api $CAPI_VERSION
	sigs.k8s.io/cluster-api/api $CAPI_VERSION
	sigs.k8s.io/cluster-api/test $CAPI_VERSION
)

replace (
	sigs.k8s.io/cluster-api => sigs.k8s.io/cluster-api $CAPI_VERSION
	sigs.k8s.io/cluster-api/api => sigs.k8s.io/cluster-api/api $CAPI_VERSION
)
EOF
  tidy_module "$MODDIR"
  check_pin
}

main() {
  tools_command sync_module "$MODDIR" "$OUT" "$@"
  hold_build_lock "$OUT" build-capi-tools
  local t0; t0=$(now)
  check_pin
  build_managers
  copy_config
  record_manifest
  log "capi tools ready in $(since "$t0") ($DEST)"
}

main "$@"; exit
