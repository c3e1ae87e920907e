#!/usr/bin/env bash
# Builds the parts of a real Kubernetes node that testsuite/hostcluster runs on this machine:
# kubelet and kube-proxy (k8s.io/kubernetes, through the wrapper module hack/tools/kubernetes-node),
# containerd with ctr and its runc shim, and CoreDNS -- all from the Go module proxy. runc, the
# CNI plugins and busybox come from Debian's packages (.ci/run installs them); this script only
# checks for them and records their paths.
#
# Usage:
#   hack/build-node-tools.sh        build whatever is missing, then add the node tools to versions.env
#   hack/build-node-tools.sh sync   regenerate the go.mod + go.sum of hack/tools/kubernetes-node and hack/tools/coredns
#
# Output: ${KOBE_TOOLS_DIR:-<repo>/.cache/tools}/<tool>-<version>/<binary>, keyed by version like
# hack/build-tools.sh: a warm run only checks files.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The Kubernetes version is defined once, in hack/build-tools.sh: the node must match the
# control plane it joins.
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KUBERNETES_VERSION=$(awk -F= '$1=="KUBERNETES_VERSION" {print $2; exit}' "$REPO_ROOT/hack/build-tools.sh")
CONTAINERD_VERSION=v2.4.2
COREDNS_VERSION=v1.15.0
# Debian packages the node uses as they are (bookworm: runc 1.1.5, containernetworking-plugins
# 1.1.1, busybox-static 1.35.0). crun is not an option: it refuses the hybrid cgroup v1 layout.
DEBIAN_PACKAGES="runc containernetworking-plugins busybox-static iptables nftables"
RUNC=/usr/sbin/runc
CNI_BIN_DIR=/usr/lib/cni
BUSYBOX=/bin/busybox

TOOLS_SRC=$REPO_ROOT/hack/tools
OUT=${KOBE_TOOLS_DIR:-$REPO_ROOT/.cache/tools}

export CGO_ENABLED=0
export GOWORK=off

command -v go >/dev/null || die "go is not on PATH"
[[ -n $KUBERNETES_VERSION ]] || die "no KUBERNETES_VERSION in hack/build-tools.sh"

NOMOD=$(mktemp -d)
trap 'rm -rf "$NOMOD"' EXIT

# Builds into a temporary folder and renames: an interrupted build leaves no half-written binary.
# go_into <dest dir> <workdir> go install <args...>: binaries land under their default names.
go_into() {
  local dest=$1 dir=$2; shift 2
  local tmp; tmp=$(mktemp -d "$OUT/.build.XXXXXX")
  if ! (cd "$dir" && GOBIN="$tmp" "$@"); then
    rm -rf "$tmp"
    die "$* (in $dir) failed (see the compiler output above)"
  fi
  mkdir -p "$dest"
  local f
  for f in "$tmp"/*; do mv -f "$f" "$dest/"; done
  rm -rf "$tmp"
}

build_kubelet() {
  # Beside kube-apiserver & co. (hack/build-tools.sh), which builds only its own binaries there.
  local dest=$OUT/kubernetes-$KUBERNETES_VERSION
  check_pin "$TOOLS_SRC/kubernetes-node" k8s.io/kubernetes "$KUBERNETES_VERSION" "hack/build-node-tools.sh sync"
  local todo; todo=$(missing "$dest" kubelet kube-proxy)
  if [[ -z $todo ]]; then log "kubelet, kube-proxy $KUBERNETES_VERSION: up to date"; return; fi
  log "kubernetes $KUBERNETES_VERSION: building $todo(cold: ~4 min on 2 cores)"
  local t0 b pkgs=()
  t0=$(now)
  for b in $todo; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  local tmp; tmp=$(mktemp -d "$OUT/.build.XXXXXX")
  if ! (cd "$TOOLS_SRC/kubernetes-node" &&
    go build -mod=readonly -trimpath -ldflags "$(kube_ldflags "$KUBERNETES_VERSION")" -o "$tmp/" "${pkgs[@]}"); then
    rm -rf "$tmp"
    die "go build of ${pkgs[*]} failed (see the compiler output above)"
  fi
  mkdir -p "$dest"
  for b in $todo; do
    [[ -x $tmp/$b ]] || { rm -rf "$tmp"; die "go build produced no $b"; }
    mv -f "$tmp/$b" "$dest/$b"
  done
  rm -rf "$tmp"
  log "kubelet, kube-proxy $KUBERNETES_VERSION: done in $(since "$t0")"
}

build_containerd() {
  local dest=$OUT/containerd-$CONTAINERD_VERSION
  local todo; todo=$(missing "$dest" containerd ctr containerd-shim-runc-v2)
  if [[ -z $todo ]]; then log "containerd $CONTAINERD_VERSION: up to date"; return; fi
  log "containerd $CONTAINERD_VERSION: building $todo(cold: ~3 min on 2 cores)"
  local t0 b pkgs=()
  t0=$(now)
  for b in $todo; do pkgs+=("github.com/containerd/containerd/v2/cmd/$b@$CONTAINERD_VERSION"); done
  # containerd's go.mod has no replace directives, so go install uses it (and its go.sum, checked
  # against the checksum database) as it is. The storage drivers the node does not use need cgo
  # or kernel headers; overlayfs is all it needs.
  go_into "$dest" "$NOMOD" go install -trimpath -tags "no_btrfs no_devmapper no_zfs" \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" "${pkgs[@]}"
  log "containerd $CONTAINERD_VERSION: done in $(since "$t0")"
}

# CoreDNS from the wrapper module hack/tools/coredns: its main compiles in only the plugins a
# cluster's DNS uses (see main.go), not every plugin of upstream's plugin.cfg. The folder's name
# says so (-kube), so that a full build of the same version in an older cache is not taken for it.
COREDNS_DIR=coredns-$COREDNS_VERSION-kube

build_coredns() {
  local dest=$OUT/$COREDNS_DIR
  check_pin "$TOOLS_SRC/coredns" github.com/coredns/coredns "$COREDNS_VERSION" "hack/build-node-tools.sh sync"
  if [[ -x $dest/coredns ]]; then log "coredns $COREDNS_VERSION: up to date"; return; fi
  log "coredns $COREDNS_VERSION: building coredns (the plugins of hack/tools/coredns/main.go)"
  local t0; t0=$(now)
  go_into "$dest" "$TOOLS_SRC/coredns" go install -mod=readonly -trimpath -ldflags "-s -w" .
  log "coredns $COREDNS_VERSION: done in $(since "$t0")"
}

check_debian() {
  local f ok=1
  for f in "$RUNC" "$CNI_BIN_DIR/bridge" "$CNI_BIN_DIR/host-local" "$CNI_BIN_DIR/loopback" "$BUSYBOX" /usr/sbin/iptables /usr/sbin/nft; do
    [[ -x $f ]] || { ok=0; log "missing $f"; }
  done
  if [[ $ok == 0 ]]; then
    # Not fatal: only the real-node tests need them, and they skip saying so.
    log "node packages missing: as root, apt-get install $DEBIAN_PACKAGES (.ci/run does)"
  fi
}

# Replaces the node tools' lines of versions.env and keeps every other script's.
write_manifest() {
  local k=$OUT/kubernetes-$KUBERNETES_VERSION c=$OUT/containerd-$CONTAINERD_VERSION
  local keys='^# node tools\|^\(KUBELET\|KUBE_PROXY\|CONTAINERD_VERSION\|CONTAINERD\|CTR\|CONTAINERD_SHIM_RUNC_V2\|COREDNS_VERSION\|COREDNS\|RUNC\|CNI_BIN_DIR\|BUSYBOX\)='
  record_versions "$OUT" "$keys" "node tools" <<EOF
# node tools: generated by hack/build-node-tools.sh; do not edit.
KUBELET=$k/kubelet
KUBE_PROXY=$k/kube-proxy
CONTAINERD_VERSION=$CONTAINERD_VERSION
CONTAINERD=$c/containerd
CTR=$c/ctr
CONTAINERD_SHIM_RUNC_V2=$c/containerd-shim-runc-v2
COREDNS_VERSION=$COREDNS_VERSION
COREDNS=$OUT/$COREDNS_DIR/coredns
RUNC=$RUNC
CNI_BIN_DIR=$CNI_BIN_DIR
BUSYBOX=$BUSYBOX
EOF
}

sync_kubernetes_node() {
  local dir=$TOOLS_SRC/kubernetes-node
  local staging_version=v0.${KUBERNETES_VERSION#v1.}
  log "sync $dir: k8s.io/kubernetes $KUBERNETES_VERSION, staging modules at $staging_version"
  local gomod
  gomod=$(cd "$NOMOD" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | awk -F'"' '$2=="GoMod" {print $4}') ||
    die "could not download k8s.io/kubernetes@$KUBERNETES_VERSION from the module proxy"
  local replaces
  replaces=$(awk -v v="$staging_version" '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" &&
      $1 != "k8s.io/sample-cli-plugin" && $1 != "k8s.io/sample-controller" {
        printf "\t%s => %s %s\n", $1, $1, v }' "$gomod")
  [[ -n $replaces ]] || die "found no k8s.io/* v0.0.0 requirements in $gomod"
  mkdir -p "$dir"
  cat >"$dir/go.mod" <<EOF
// Wrapper module that builds kubelet and kube-proxy from k8s.io/kubernetes. Generated by
// \`hack/build-node-tools.sh sync\`; the version comes from hack/build-tools.sh.
// A module apart from hack/tools/kubernetes so that the node's extra dependencies (cadvisor,
// libcontainer's cgroup code…) do not touch the control plane's go.sum.
module github.com/kunobi-ninja/kobe/hack/tools/kubernetes-node

go 1.26.0

require k8s.io/kubernetes $KUBERNETES_VERSION

// k8s.io/kubernetes requires its staging modules at v0.0.0 (replaced by ./staging in its own
// repository); here each is replaced with its published tag.
replace (
$replaces
)
EOF
  rm -f "$dir/go.sum"
  (cd "$dir" && go get -tool k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy && go mod tidy) ||
    die "sync of $dir failed"
  check_pin "$dir" k8s.io/kubernetes "$KUBERNETES_VERSION" "hack/build-node-tools.sh sync"
}

sync_coredns() {
  local dir=$TOOLS_SRC/coredns
  [[ -f $dir/main.go ]] || die "no $dir/main.go"
  log "sync $dir: github.com/coredns/coredns $COREDNS_VERSION"
  cat >"$dir/go.mod" <<EOF
// Wrapper module that builds CoreDNS with the plugins of main.go. Generated by
// \`hack/build-node-tools.sh sync\`; the version comes from hack/build-node-tools.sh.
module github.com/kunobi-ninja/kobe/hack/tools/coredns

go 1.26.0

require github.com/coredns/coredns $COREDNS_VERSION
EOF
  rm -f "$dir/go.sum"
  (cd "$dir" && go mod tidy) || die "sync of $dir failed"
  check_pin "$dir" github.com/coredns/coredns "$COREDNS_VERSION" "hack/build-node-tools.sh sync"
}

main() {
  case ${1:-build} in
    sync) sync_kubernetes_node; sync_coredns; log "sync done; review and commit hack/tools/kubernetes-node and hack/tools/coredns"; return ;;
    build) ;;
    *) die "unknown command '$1' (usage: $0 [build|sync])" ;;
  esac
  mkdir -p "$OUT"
  [[ -f $OUT/.gitignore ]] || printf '*\n' >"$OUT/.gitignore"
  hold_build_lock "$OUT" build-node-tools
  local t0; t0=$(now)
  build_kubelet
  build_containerd
  build_coredns
  check_debian
  write_manifest
  log "node tools ready in $(since "$t0") ($OUT)"
}

main "$@"; exit
