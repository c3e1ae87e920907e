#!/usr/bin/env bash
# Builds the k3s server that kobe's k3s backend is tested against: the multicall binary of
# github.com/k3s-io/k3s (cmd/server), from the Go module proxy, through the wrapper module
# hack/tools/k3s. testsuite/hostcluster/images puts it into the image rancher/k3s:<version>, so
# the backend's StatefulSet runs the real k3s server on the real-pods host cluster.
#
# Usage:
#   hack/build-k3s-tools.sh        build k3s if it is missing, then record it in versions.env
#   hack/build-k3s-tools.sh sync   regenerate hack/tools/k3s/go.mod + go.sum from the version below
#
# Output: ${KOBE_TOOLS_DIR:-<repo>/.cache/tools}/k3s-<version>/k3s. Keyed by version: a warm run
# only checks the file. Run after hack/build-tools.sh (which rewrites versions.env); this script
# adds its K3S_* lines to versions.env.
#
# What this binary is not: the module's pkg/data is an empty stub (upstream fills it with
# containerd, runc and the CNI plugins at release time), so this k3s has no bundled agent. It
# runs `k3s server --disable-agent`, which is what the tests need: a real k3s control plane.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

K3S_VERSION=v1.32.0+k3s1
# What the proxy resolves github.com/k3s-io/k3s@v1.32.0+k3s1 to (the tag's commit).
K3S_MODULE_VERSION=v1.32.1-0.20250107171309-cca8facaa33a
K3S_COMMIT=cca8facaa33a3ec7897349a8740fd96029590c31

# The modules the proxy serves but the checksum database does not know (its lookup answers 404):
# k3s itself and 27 of its forks. Only `sync` skips the checksum database, for exactly these;
# their hashes are then pinned in hack/tools/k3s/go.sum, and every build checks them there (a
# changed module fails the build). Every other module stays verified by the checksum database.
K3S_UNVERIFIED_MODULES=(
  github.com/k3s-io/k3s
  github.com/k3s-io/etcd/etcdutl/v3
  github.com/k3s-io/runc
)
for m in apiextensions-apiserver cli-runtime cloud-provider code-generator component-helpers \
  controller-manager cri-api csi-translation-lib dynamic-resource-allocation endpointslice \
  externaljwt kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl \
  kubelet metrics mount-utils node-api pod-security-admission sample-apiserver \
  sample-cli-plugin sample-controller; do
  K3S_UNVERIFIED_MODULES+=("github.com/k3s-io/kubernetes/staging/src/k8s.io/$m")
done

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODDIR=$REPO_ROOT/hack/tools/k3s
OUT=${KOBE_TOOLS_DIR:-$REPO_ROOT/.cache/tools}
DEST=$OUT/k3s-${K3S_VERSION/+/-}

export GOWORK=off
# kine's SQLite driver (k3s's default datastore) is cgo-only; go-sqlite3 compiles its own
# amalgamation, so only a C compiler is needed, no libsqlite3.
export CGO_ENABLED=1

command -v go >/dev/null || die "go is not on PATH"

gonosumdb() { local IFS=,; printf '%s' "${K3S_UNVERIFIED_MODULES[*]}"; }

# Upstream's scripts/build version stamps. pkg/version.UpstreamGolang is required: the server
# refuses to start when it differs from the Go version that built it.
k3s_ldflags() {
  local v=$K3S_VERSION c=$K3S_COMMIT f="-w -s" pkg
  f+=" -X github.com/k3s-io/k3s/pkg/version.UpstreamGolang=$(go env GOVERSION)"
  f+=" -X github.com/k3s-io/k3s/pkg/version.Version=$v -X github.com/k3s-io/k3s/pkg/version.GitCommit=${c:0:8}"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    f+=" -X $pkg.gitVersion=$v -X $pkg.gitCommit=$c -X $pkg.gitTreeState=clean"
  done
  f+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=HEAD"
  printf '%s' "$f"
}

build_k3s() {
  check_pin "$MODDIR" github.com/k3s-io/k3s "$K3S_MODULE_VERSION" "hack/build-k3s-tools.sh sync"
  if [[ -x $DEST/k3s ]]; then log "k3s $K3S_VERSION: up to date"; return; fi
  command -v gcc >/dev/null || die "k3s needs cgo (kine's sqlite): install gcc (apt-get install gcc)"
  log "k3s $K3S_VERSION: building k3s (cold: ~12 min on 2 cores, 220 MB)"
  local t0; t0=$(now)
  # -mod=readonly with the committed go.sum: every module, the 28 above included, is checked
  # against the hashes pinned there; no checksum-database lookup is skipped at build time.
  # Tags as upstream's scripts/build minus ctrd (containerd's Main, for the agent), apparmor and
  # seccomp (libseccomp; the agent's container runtime only).
  go_build_to "$OUT" "$DEST/k3s" "$MODDIR" github.com/k3s-io/k3s/cmd/server -mod=readonly -buildvcs=false \
    -tags "netcgo osusergo providerless urfave_cli_no_docs" -ldflags "$(k3s_ldflags)"
  "$DEST/k3s" --version >/dev/null || { rm -f "$DEST/k3s"; die "the built k3s does not run"; }
  log "k3s $K3S_VERSION: done in $(since "$t0")"
}

# Adds (or replaces) the K3S_* lines of versions.env, atomically.
record_manifest() {
  record_versions "$OUT" '^K3S_\|^K3S=' 'K3S_*' <<EOF
K3S_VERSION=$K3S_VERSION
K3S=$DEST/k3s
EOF
}

sync_module() {
  log "sync $MODDIR: github.com/k3s-io/k3s $K3S_MODULE_VERSION ($K3S_VERSION)"
  local nomod; nomod=$(mktemp -d)
  local gomod
  gomod=$(cd "$nomod" && GONOSUMDB=github.com/k3s-io/k3s GOFLAGS=-mod=mod \
    go mod download -json "github.com/k3s-io/k3s@$K3S_MODULE_VERSION" | awk -F'"' '$2=="GoMod" {print $4}') ||
    { rm -rf "$nomod"; die "could not download github.com/k3s-io/k3s@$K3S_MODULE_VERSION from the module proxy"; }
  rm -rf "$nomod"
  local goline replaces
  goline=$(awk '$1=="go" {print $2; exit}' "$gomod")
  # k3s builds against its forks (k3s-io/kubernetes, etcd, containerd, runc…): every replace
  # directive of its go.mod is needed, as it is.
  replaces=$(awk '/^replace \(/ {f=1; next} f && /^\)/ {f=0} f' "$gomod")
  [[ $(grep -c '=>' <<<"$replaces") -gt 0 ]] || die "found no replace directives in $gomod"
  mkdir -p "$MODDIR"
  cat >"$MODDIR/go.mod" <<EOF
// Wrapper module that builds the k3s server (github.com/k3s-io/k3s/cmd/server) for kobe's k3s
// backend tests. Generated by \`hack/build-k3s-tools.sh sync\`; edit the version there, not here.
//
// Why a wrapper: k3s builds against its own forks of kubernetes, etcd, containerd, runc… through
// replace directives, which only the main module's go.mod applies; they are copied here as k3s
// has them. It also keeps k3s's k8s.io v1.32 pins out of kobe's own go.mod.
module github.com/kunobi-ninja/kobe/hack/tools/k3s

go $goline

require github.com/k3s-io/k3s $K3S_MODULE_VERSION

tool github.com/k3s-io/k3s/cmd/server

// The replace directives of github.com/k3s-io/k3s $K3S_MODULE_VERSION's go.mod, verbatim.
replace (
$replaces
)
EOF
  tidy_module "$MODDIR" GONOSUMDB="$(gonosumdb)" GOFLAGS=-mod=mod
  check_pin "$MODDIR" github.com/k3s-io/k3s "$K3S_MODULE_VERSION" "hack/build-k3s-tools.sh sync"
}

main() {
  tools_command sync_module "$MODDIR" "$OUT" "$@"
  hold_build_lock "$OUT" build-k3s-tools
  local t0; t0=$(now)
  build_k3s
  record_manifest
  log "k3s tools ready in $(since "$t0") ($DEST)"
}

main "$@"; exit
