#!/usr/bin/env bash
# `make tools`: every tool the tests, `make dev`, `make generate` and the bench use, cached by
# version under KOBE_TOOLS_DIR (each build-*-tools.sh says what it builds and how).
#
# The control plane first (kube-apiserver, etcd, kine, kwok: every part of the suite needs it),
# on both cores. Then two streams at once: controller-gen (`make generate`, and the check that
# the committed CRDs match their types) and the Cluster API managers (the last tools the `rest`
# lane of hack/test.sh needs), then the node tools and the vcluster syncer; and k3s (the
# longest single build) beside them. The node tools, the vcluster syncer and k3s are needed
# only by the second part of the `machine` lane, so on a cold machine they are built at a lower
# priority (nice 10) beside the first tests, which then keep the cores they need for their
# start-up deadlines and leave the builds the rest. Warm, each script only checks its files.
#
# Each script holds a lock while it runs (hack/lib.sh, hold_build_lock): .ci/run starts this
# script in the background beside `make lint`, and hack/test.sh calls the same scripts before
# each part of the suite, waiting for the background build of what that part needs. Each line
# of a stream's output is prefixed with its name; the exit code is non-zero when any script
# failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

hack/build-tools.sh || exit 1

# stream NAME CMD...: runs CMD with its output prefixed by NAME; returns CMD's exit code.
stream() {
  local name=$1; shift
  "$@" 2>&1 | sed -u "s/^/[$name] /"
  return "${PIPESTATUS[0]}"
}
capi_node_vcluster() {
  hack/build-controller-gen.sh && hack/build-capi-tools.sh && nice -n 10 hack/build-node-tools.sh && nice -n 10 hack/build-vcluster-tools.sh
}

stream capi+node+vcluster capi_node_vcluster &
first=$!
stream k3s nice -n 10 hack/build-k3s-tools.sh &
second=$!
rc=0
wait "$first" || rc=1
wait "$second" || rc=1
exit $rc
