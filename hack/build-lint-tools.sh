#!/usr/bin/env bash
# The linters `make lint` runs beside gofmt and go vet: staticcheck, and Temporal's workflowcheck
# (determinism of workflow code). Built from the Go module proxy into $KOBE_TOOLS_DIR/lint-<tool>-<version>,
# so that a warm run builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh

STATICCHECK_VERSION=v0.8.2   # honnef.co/go/tools
WORKFLOWCHECK_VERSION=v0.6.0 # go.temporal.io/sdk/contrib/tools/workflowcheck

TOOLS=${KOBE_TOOLS_DIR:-$PWD/.cache/tools}

build() { # <name> <package@version> <dir>
  local name=$1 pkg=$2 dir=$3 t0
  [[ -x $dir/$name ]] && return
  t0=$(now)
  mkdir -p "$dir.tmp"
  GOBIN="$PWD/$dir.tmp" go install "$pkg"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  log "$name ${pkg##*@} built in $(since "$t0")"
}

mkdir -p "$TOOLS"
# Built outside the project's module, so that its go.mod and go.sum stay the project's own.
cd "$TOOLS"
build staticcheck "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" "lint-staticcheck-$STATICCHECK_VERSION"
build workflowcheck "go.temporal.io/sdk/contrib/tools/workflowcheck@$WORKFLOWCHECK_VERSION" "lint-workflowcheck-$WORKFLOWCHECK_VERSION"
printf 'STATICCHECK=%s\nWORKFLOWCHECK=%s\n' "$TOOLS/lint-staticcheck-$STATICCHECK_VERSION/staticcheck" \
  "$TOOLS/lint-workflowcheck-$WORKFLOWCHECK_VERSION/workflowcheck" >"$TOOLS/lint.env"
