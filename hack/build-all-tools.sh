#!/usr/bin/env bash
# `make tools`: every tool the tests, `make dev`, `make generate` and the bench use, cached by
# version under KOBE_TOOLS_DIR (each build-*-tools.sh says what it builds and how).
#
# build-tools.sh first: it writes versions.env anew, and the others add their lines to it. Then
# two streams at once: controller-gen, the node tools, the Cluster API managers and the vcluster
# syncer one after the other, and k3s (the longest single build) beside them. On a cold machine a build spends a
# good part of its time on one core (module downloads, linking) or none (waiting on the module
# proxy); a second build fills that time. Warm, each script only checks its files. Each line of a
# stream's output is prefixed with its name; the exit code is non-zero when any script failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

hack/build-tools.sh || exit 1

# stream NAME CMD...: runs CMD with its output prefixed by NAME; returns CMD's exit code.
stream() {
  local name=$1; shift
  "$@" 2>&1 | sed -u "s/^/[$name] /"
  return "${PIPESTATUS[0]}"
}
node_capi_vcluster() {
  hack/build-controller-gen.sh && hack/build-node-tools.sh && hack/build-capi-tools.sh && hack/build-vcluster-tools.sh
}

stream node+capi+vcluster node_capi_vcluster &
first=$!
stream k3s hack/build-k3s-tools.sh &
second=$!
rc=0
wait "$first" || rc=1
wait "$second" || rc=1
exit $rc
