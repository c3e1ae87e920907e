#!/usr/bin/env bash
# Builds what kobe's vcluster backend is tested against: the upstream vcluster syncer
# (github.com/loft-sh/vcluster/cmd/vcluster, the binary an upstream vcluster image carries
# as /vcluster) and the upstream Helm chart, both from the same Go module version. The chart
# ships in the module zip (chart/) with a placeholder version (0.0.1); the copy in the cache
# has its version set to the module's, because the chart's templates take the syncer image
# tag from .Chart.Version.
#
# Usage:
#   hack/build-vcluster-tools.sh        build whatever is missing, then record it in versions.env
#   hack/build-vcluster-tools.sh sync   regenerate hack/tools/vcluster/go.mod + go.sum from the version below
#   hack/build-vcluster-tools.sh chart  copy only the chart (no syncer: seconds, not minutes) and
#                                       print its directory (`make images` puts it in kobe's image)
#
# Output: ${KOBE_TOOLS_DIR:-<repo>/.cache/tools}/vcluster-<version>/{vcluster,chart/}. Keyed by
# version: a warm run only checks files. Run after hack/build-tools.sh (which rewrites
# versions.env); this script adds its VCLUSTER_* lines to versions.env.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# v0.34.0 is the newest version the module proxy here serves (and the chart upstream kobe pins).
VCLUSTER_VERSION=v0.34.0

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODDIR=$REPO_ROOT/hack/tools/vcluster
OUT=${KOBE_TOOLS_DIR:-$REPO_ROOT/.cache/tools}
DEST=$OUT/vcluster-$VCLUSTER_VERSION
MODULE=github.com/loft-sh/vcluster

# A static binary, as upstream builds it (CGO_ENABLED=0 -trimpath); it runs in an image with
# nothing else in it.
export CGO_ENABLED=0
export GOWORK=off

command -v go >/dev/null || die "go is not on PATH"

build_syncer() {
  if [[ -x $DEST/vcluster ]]; then log "vcluster $VCLUSTER_VERSION: syncer up to date"; return; fi
  log "vcluster $VCLUSTER_VERSION: building the syncer ($MODULE/cmd/vcluster; ~7 min cold on 2 cores)"
  local t0; t0=$(now)
  # The SyncerVersion stamp is what `vcluster version` prints and what the syncer reports to
  # the chart's status.
  go_build_to "$OUT" "$DEST/vcluster" "$MODDIR" "$MODULE/cmd/vcluster" -mod=readonly -trimpath \
    -ldflags "-s -w -X $MODULE/pkg/telemetry.SyncerVersion=${VCLUSTER_VERSION#v}"
  log "vcluster $VCLUSTER_VERSION: syncer done in $(since "$t0")"
}

# The chart exactly as the module ships it, except Chart.yaml's version and appVersion.
copy_chart() {
  # The marker sits beside the chart, not in it: Helm would load it as a chart file.
  if [[ -f $DEST/chart.complete && -d $DEST/chart ]]; then log "vcluster $VCLUSTER_VERSION: chart up to date"; return; fi
  local src
  src=$(cd "$MODDIR" && go list -m -f '{{.Dir}}' "$MODULE") || die "$MODULE not in the module cache"
  if [[ -z $src ]]; then
    (cd "$MODDIR" && go mod download "$MODULE") || die "cannot download $MODULE"
    src=$(cd "$MODDIR" && go list -m -f '{{.Dir}}' "$MODULE")
  fi
  [[ -f $src/chart/Chart.yaml && -f $src/chart/values.yaml ]] || die "no chart in $src/chart"
  local tmp; tmp=$(mktemp -d "$OUT/.build.XXXXXX")
  cp -R "$src/chart/." "$tmp/"
  chmod -R u+w "$tmp"
  # helm-unittest files are not part of what gets installed.
  rm -rf "$tmp/tests"
  local v=${VCLUSTER_VERSION#v}
  sed -i -E "s/^version:.*/version: $v/" "$tmp/Chart.yaml"
  if grep -q '^appVersion:' "$tmp/Chart.yaml"; then
    sed -i -E "s/^appVersion:.*/appVersion: \"$v\"/" "$tmp/Chart.yaml"
  else
    printf 'appVersion: "%s"\n' "$v" >>"$tmp/Chart.yaml"
  fi
  grep -q "^version: $v\$" "$tmp/Chart.yaml" || { rm -rf "$tmp"; die "could not set the chart version in Chart.yaml"; }
  chmod 0755 "$tmp"
  rm -rf "$DEST/chart" "$DEST/chart.complete"
  mkdir -p "$DEST"
  mv "$tmp" "$DEST/chart"
  touch "$DEST/chart.complete"
  log "vcluster $VCLUSTER_VERSION: chart copied (version $v)"
}

# Adds (or replaces) the VCLUSTER_* lines of versions.env, atomically.
record_manifest() {
  record_versions "$OUT" '^VCLUSTER_' 'VCLUSTER_*' <<EOV
VCLUSTER_VERSION=$VCLUSTER_VERSION
VCLUSTER_SYNCER=$DEST/vcluster
VCLUSTER_CHART_DIR=$DEST/chart
EOV
}

sync_module() {
  log "sync $MODDIR: $MODULE $VCLUSTER_VERSION"
  local header
  header=$(awk '/^module /{exit} {print}' "$MODDIR/go.mod")
  cat >"$MODDIR/go.mod" <<EOM
$header
module github.com/kunobi-ninja/kobe/hack/tools/vcluster

go 1.26.0

require $MODULE $VCLUSTER_VERSION

replace github.com/loft-sh/e2e-framework => ./stub/e2e-framework
EOM
  tidy_module "$MODDIR"
  check_pin "$MODDIR" "$MODULE" "$VCLUSTER_VERSION" "hack/build-vcluster-tools.sh sync"
}

main() {
  if [[ ${1:-} == chart ]]; then
    hold_build_lock "$OUT" build-vcluster-tools
    check_pin "$MODDIR" "$MODULE" "$VCLUSTER_VERSION" "hack/build-vcluster-tools.sh sync"
    copy_chart
    printf '%s\n' "$DEST/chart"
    return
  fi
  tools_command sync_module "$MODDIR" "$OUT" "$@"
  hold_build_lock "$OUT" build-vcluster-tools
  local t0; t0=$(now)
  check_pin "$MODDIR" "$MODULE" "$VCLUSTER_VERSION" "hack/build-vcluster-tools.sh sync"
  build_syncer
  copy_chart
  record_manifest
  log "vcluster tools ready in $(since "$t0") ($DEST)"
}

main "$@"; exit
