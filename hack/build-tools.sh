#!/usr/bin/env bash
# Builds the Kubernetes toolchain kobe's tests run as plain processes
# (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kine, kwok)
# from the Go module proxy -- no container images, no release downloads.
#
# Usage:
#   hack/build-tools.sh        build whatever is missing, then write the manifest
#   hack/build-tools.sh sync   regenerate hack/tools/*/go.mod + go.sum from the
#                              versions below (run after bumping a version)
#
# Output: ${KOBE_TOOLS_DIR:-<repo>/.cache/tools}/<tool>-<version>/<binary>.
# Binaries are keyed by version, so a binary that exists is never rebuilt and a
# warm run only checks files. Tests read <out>/versions.env (KEY=/abs/path).
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The single place where tool versions are defined. kubernetes and etcd are
# built through wrapper modules in hack/tools/; `sync` keeps those in step.
KUBERNETES_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
KINE_VERSION=v0.17.5
KWOK_VERSION=v0.8.0

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_SRC=$REPO_ROOT/hack/tools
OUT=${KOBE_TOOLS_DIR:-$REPO_ROOT/.cache/tools}

# Static, reproducible binaries that run on any Linux here (kine then uses its
# pure-Go SQLite driver).
export CGO_ENABLED=0
# Keep the caller's GOFLAGS (e.g. -buildvcs=false) but never let a stray
# -mod=vendor or go.work change what the wrapper modules resolve to.
export GOWORK=off

command -v go >/dev/null || die "go is not on PATH"

# `go install pkg@version` and `go mod download mod@version` must run outside
# any module: the cache folder sits inside the repo, and kobe's own go.mod
# (being edited concurrently) must neither be read nor touched.
NOMOD=$(mktemp -d)
trap 'rm -rf "$NOMOD"' EXIT

# go build into a temporary folder, then rename: an interrupted build never
# leaves a half-written file that a later run would take for a finished one.
# build_into <dest dir> <module dir> <ldflags> <name=package>...
# Each binary is named explicitly: go would call go.etcd.io/etcd/server/v3 "server".
build_into() {
  local dest=$1 dir=$2 ldflags=$3; shift 3
  local tmp; tmp=$(mktemp -d "$OUT/.build.XXXXXX")
  local arg pkgs=()
  for arg in "$@"; do pkgs+=("${arg#*=}"); done
  if ! (cd "$dir" && go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"); then
    rm -rf "$tmp"
    die "go build of ${pkgs[*]} in $dir failed (see the compiler output above)"
  fi
  # With several packages go build writes each under its default name, so
  # build all of them at once (shared compile work), then rename.
  mkdir -p "$dest"
  local name pkg default
  for arg in "$@"; do
    name=${arg%%=*} pkg=${arg#*=}
    default=$(basename "$pkg")
    [[ $default =~ ^v[0-9]+$ ]] && default=$(basename "$(dirname "$pkg")")
    [[ -f $tmp/$default ]] || { rm -rf "$tmp"; die "go build of $pkg produced no $default binary"; }
    mv -f "$tmp/$default" "$dest/$name"
  done
  rm -rf "$tmp"
}

# go install pkg@version uses the module's own go.mod and go.sum (checked
# against the checksum database), so kine and kwok need no wrapper module.
install_into() { # <dest dir> <ldflags> <pkg@version>
  local dest=$1 ldflags=$2 pkg=$3
  local tmp; tmp=$(mktemp -d "$OUT/.build.XXXXXX")
  if ! (cd "$NOMOD" && GOBIN="$tmp/bin" go install -trimpath -ldflags "$ldflags" "$pkg"); then
    rm -rf "$tmp"
    die "go install $pkg failed (see the compiler output above)"
  fi
  mkdir -p "$dest"
  local f
  for f in "$tmp"/bin/*; do mv -f "$f" "$dest/"; done
  rm -rf "$tmp"
}

build_kubernetes() {
  local dest=$OUT/kubernetes-$KUBERNETES_VERSION
  local bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  check_pin "$TOOLS_SRC/kubernetes" k8s.io/kubernetes "$KUBERNETES_VERSION" "hack/build-tools.sh sync"
  local todo; todo=$(missing "$dest" "${bins[@]}")
  if [[ -z $todo ]]; then log "kubernetes $KUBERNETES_VERSION: up to date"; return; fi
  log "kubernetes $KUBERNETES_VERSION: building $todo(cold: ~8 min on 2 cores)"
  local t0; t0=$(now)
  local pkgs=() b
  for b in $todo; do pkgs+=("$b=k8s.io/kubernetes/cmd/$b"); done
  # One go build for all three shares the compile of the common packages.
  build_into "$dest" "$TOOLS_SRC/kubernetes" "$(kube_ldflags "$KUBERNETES_VERSION")" "${pkgs[@]}"
  log "kubernetes $KUBERNETES_VERSION: done in $(since "$t0")"
}

build_etcd() {
  local dest=$OUT/etcd-$ETCD_VERSION
  check_pin "$TOOLS_SRC/etcd" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "hack/build-tools.sh sync"
  if [[ -x $dest/etcd ]]; then log "etcd $ETCD_VERSION: up to date"; return; fi
  log "etcd $ETCD_VERSION: building etcd (cold: ~1 min)"
  local t0; t0=$(now)
  # The server module's root package is etcd's `main`.
  build_into "$dest" "$TOOLS_SRC/etcd" "-s -w" etcd=go.etcd.io/etcd/server/v3
  log "etcd $ETCD_VERSION: done in $(since "$t0")"
}

build_kine() {
  local dest=$OUT/kine-$KINE_VERSION
  if [[ -x $dest/kine ]]; then log "kine $KINE_VERSION: up to date"; return; fi
  log "kine $KINE_VERSION: building kine"
  local t0; t0=$(now)
  install_into "$dest" "-s -w -X github.com/k3s-io/kine/pkg/version.Version=$KINE_VERSION" \
    "github.com/k3s-io/kine@$KINE_VERSION"
  log "kine $KINE_VERSION: done in $(since "$t0")"
}

build_kwok() {
  local dest=$OUT/kwok-$KWOK_VERSION
  if [[ -x $dest/kwok && -d $dest/stages ]]; then log "kwok $KWOK_VERSION: up to date"; return; fi
  log "kwok $KWOK_VERSION: building kwok"
  local t0; t0=$(now)
  if [[ ! -x $dest/kwok ]]; then
    # kwok's version string is a constant in its source; no -X needed.
    install_into "$dest" "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  fi
  # kwok only fakes what Stage objects tell it to (node heartbeats, pod
  # readiness, deletion...). The stock Stages ship in the module's
  # kustomize/stage folder; copy them next to the binary so tests can apply them.
  local moddir
  moddir=$(cd "$NOMOD" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | awk -F'"' '$2=="Dir" {print $4}') ||
    die "go mod download sigs.k8s.io/kwok@$KWOK_VERSION failed"
  [[ -d $moddir/kustomize/stage ]] || die "kwok module $KWOK_VERSION has no kustomize/stage folder (looked in '$moddir')"
  rm -rf "$dest/stages.tmp"
  mkdir -p "$dest/stages.tmp"
  # Copy only the Stage objects (not kustomization.yaml, testdata, RBAC or
  # StorageClass), keeping the folder layout: it names the profile, e.g.
  # node/fast/node-initialize.yaml, node/heartbeat-with-lease/..., pod/general/...
  local f rel
  while IFS= read -r f; do
    grep -q '^kind: Stage$' "$f" || continue
    rel=${f#"$moddir/kustomize/stage/"}
    mkdir -p "$dest/stages.tmp/$(dirname "$rel")"
    install -m 0644 "$f" "$dest/stages.tmp/$rel"
  done < <(find "$moddir/kustomize/stage" -name '*.yaml' -not -path '*/testdata/*' | sort)
  rm -rf "$dest/stages"
  mv "$dest/stages.tmp" "$dest/stages"
  log "kwok $KWOK_VERSION: done in $(since "$t0")"
}

# Replaces this script's lines of versions.env and keeps the other scripts' (they may be
# writing theirs at the same time: hack/test.sh runs the scripts in its own order).
write_manifest() {
  local k=$OUT/kubernetes-$KUBERNETES_VERSION
  local keys='^# Generated by hack/build-tools.sh\|^\(KOBE_TOOLS_DIR\|KUBERNETES_VERSION\|KUBE_APISERVER\|KUBE_CONTROLLER_MANAGER\|KUBE_SCHEDULER\|KUBECTL\|ETCD_VERSION\|ETCD\|KINE_VERSION\|KINE\|KWOK_VERSION\|KWOK\|KWOK_STAGES_DIR\)='
  # Plain KEY=value lines, no quoting: trivially parsed by Go tests and
  # sourceable by shells (as long as the path has no spaces).
  record_versions "$OUT" "$keys" "control plane" <<EOF
# Generated by hack/build-tools.sh; do not edit.
KOBE_TOOLS_DIR=$OUT
KUBERNETES_VERSION=$KUBERNETES_VERSION
KUBE_APISERVER=$k/kube-apiserver
KUBE_CONTROLLER_MANAGER=$k/kube-controller-manager
KUBE_SCHEDULER=$k/kube-scheduler
KUBECTL=$k/kubectl
ETCD_VERSION=$ETCD_VERSION
ETCD=$OUT/etcd-$ETCD_VERSION/etcd
KINE_VERSION=$KINE_VERSION
KINE=$OUT/kine-$KINE_VERSION/kine
KWOK_VERSION=$KWOK_VERSION
KWOK=$OUT/kwok-$KWOK_VERSION/kwok
KWOK_STAGES_DIR=$OUT/kwok-$KWOK_VERSION/stages
EOF
}

# ---------------------------------------------------------------------------
# sync: regenerate the wrapper modules from the versions at the top.

sync_kubernetes() {
  local dir=$TOOLS_SRC/kubernetes
  local staging_version=v0.${KUBERNETES_VERSION#v1.}
  log "sync $dir: k8s.io/kubernetes $KUBERNETES_VERSION, staging modules at $staging_version"
  local gomod
  gomod=$(cd "$NOMOD" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | awk -F'"' '$2=="GoMod" {print $4}') ||
    die "could not download k8s.io/kubernetes@$KUBERNETES_VERSION from the module proxy"
  [[ -f $gomod ]] || die "could not download k8s.io/kubernetes@$KUBERNETES_VERSION from the module proxy"
  # sample-cli-plugin and sample-controller are not on the proxy and no
  # binary we build needs them, so they are left out.
  local replaces
  replaces=$(awk -v v="$staging_version" '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" &&
      $1 != "k8s.io/sample-cli-plugin" && $1 != "k8s.io/sample-controller" {
        printf "\t%s => %s %s\n", $1, $1, v }' "$gomod")
  [[ -n $replaces ]] || die "found no k8s.io/* v0.0.0 requirements in $gomod"
  mkdir -p "$dir"
  cat >"$dir/go.mod" <<EOF
// Wrapper module that builds kube-apiserver, kube-controller-manager and
// kube-scheduler from k8s.io/kubernetes. Generated by
// \`hack/build-tools.sh sync\`; edit the versions there, not here.
module github.com/kunobi-ninja/kobe/hack/tools/kubernetes

go 1.26.0

require k8s.io/kubernetes $KUBERNETES_VERSION

// Why a wrapper: k8s.io/kubernetes requires its staging modules
// (k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and points them at
// ./staging with replace directives, which only apply inside its own repo.
// Here every one of them is replaced with its published tag instead.
replace (
$replaces
)
EOF
  rm -f "$dir/go.sum"
  (cd "$dir" &&
    go get -tool k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl &&
    go mod tidy) || die "sync of $dir failed"
  check_pin "$dir" k8s.io/kubernetes "$KUBERNETES_VERSION" "hack/build-tools.sh sync"
}

sync_etcd() {
  local dir=$TOOLS_SRC/etcd
  log "sync $dir: go.etcd.io/etcd/server/v3 $ETCD_VERSION"
  mkdir -p "$dir"
  cat >"$dir/go.mod" <<EOF
// Wrapper module that builds etcd. Generated by \`hack/build-tools.sh sync\`;
// edit the version there, not here.
//
// Why a wrapper: \`go install go.etcd.io/etcd/server/v3@...\` is refused
// because etcd's go.mod has replace directives (../api, ../client/...); from
// a module of our own those replaces are ignored and the published
// api/client/pkg modules of the same tag are used.
module github.com/kunobi-ninja/kobe/hack/tools/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
  rm -f "$dir/go.sum"
  (cd "$dir" && go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" && go mod tidy) || die "sync of $dir failed"
  # MVS must not have moved etcd's own modules off the tag.
  check_pin "$dir" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "hack/build-tools.sh sync"
}

main() {
  case ${1:-build} in
    sync)
      sync_kubernetes
      sync_etcd
      log "sync done; review and commit hack/tools/*/go.mod and go.sum"
      return ;;
    build) ;;
    *) die "unknown command '$1' (usage: $0 [build|sync])" ;;
  esac

  mkdir -p "$OUT"
  # Keep the cache out of git without touching the repo's own .gitignore.
  [[ -f $OUT/.gitignore ]] || printf '*\n' >"$OUT/.gitignore"
  hold_build_lock "$OUT" build-tools
  # Leftovers of an interrupted run. Other scripts may be building beside this one (their
  # temporary folders are .build.* too), so only folders no build could still be writing.
  find "$OUT" -maxdepth 1 -name '.build.*' -mmin +600 -exec rm -rf {} + 2>/dev/null || true
  rm -rf "$OUT"/kwok-*/stages.tmp

  local t0; t0=$(now)
  build_kubernetes
  build_etcd
  build_kine
  build_kwok
  write_manifest
  log "all tools ready in $(since "$t0") ($OUT)"
}

# `exit` on the same line: bash reads a script as it runs, so without it an
# edit to this file during a long build would execute whatever text now
# follows the old end of file.
main "$@"; exit
