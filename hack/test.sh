#!/usr/bin/env bash
# `make test`: the whole suite, with the race detector, in two lanes that run at once, each
# starting as soon as the tools its first packages need are built.
#
# Most of the suite's time is spent waiting on real processes (an API server starting, a pod
# scheduled, a certificate expiring): run one package at a time, the machine's two cores were
# idle half of the time. Two lanes run side by side instead, each one package at a time:
#
#   machine  the packages that use what a machine has only one of: the shared datastore servers
#            whose leftovers the k3s tests check by name prefix (backends/local, instance,
#            datastore, server), and the two that must not overlap each other, the check that no
#            `kobe dev --ephemeral` cluster outlives its process and the end-to-end runs of the
#            binary (internal/service, testsuite/e2e); then the pool's and the lease's property
#            tests at their full count, without -race; then the real-pods node and what runs on
#            it (bridge kobe0, /var/lib/kubelet: backends/k3s, backends/vcluster,
#            testsuite/hostcluster) and the image test's containerd (hack/image)
#   rest     every other package (controller-gen's check of the CRDs among them); last, the two that must not overlap each other and need the
#            Cluster API managers (their fixed ports: backends/capi, testsuite)
#
# The tools (hack/build-all-tools.sh) build in the background from the start. Each part of a
# lane first calls the build scripts of the tools it needs: warm, a check of files; cold, it
# waits for the background build of those (the scripts hold a lock) and not for the rest. So
# on a cold machine the control plane's tests run while the node tools, the vcluster syncer and
# k3s are still building (at nice 10, below the tests).
#
# The fuzz targets' seed corpora (server/testdata/fuzz) run as tests in package server; the
# search for new inputs (`make fuzz`) is not part of `make test`: it rebuilds every dependency
# with coverage instrumentation, ~14 min of both cores on a cold build cache (860 s in CI on
# 3 December, 34 s of it fuzzing), which put it on the suite's critical path.
#
# Then, alone: the fault-injection soak's short form (its fault windows are timed) and the
# 50-lease burst on real clusters, without -race (it skips itself under -race).
#
# Each line of a lane's output is prefixed with the lane's name; the exit code is non-zero when
# any part failed. Every part is timed through hack/timed.sh (.ci/run prints the times).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO=${GO:-go}
TIMED=hack/timed.sh
# One package at a time in a lane: several packages each starting clusters and Temporal servers
# at once overload a 2-core machine until start-up deadlines pass.
RACE_FLAGS=(-race -count=1 -p 1 -timeout 60m)

# The machine lane in two parts: what needs only the control plane, then what needs the node.
MACHINE_CONTROL_PLANE=(./backends/local ./instance ./datastore ./server ./internal/service ./testsuite/e2e)
MACHINE_NODE=(./backends/k3s ./backends/vcluster ./testsuite/hostcluster/... ./hack/image)
# The rest lane's last part: the Cluster API managers.
REST_CAPI=(./backends/capi ./testsuite)
ALONE=(./testsuite/soak)

list() { "$GO" list "$@"; }
all=$(list ./...) || exit 1
machine_control_plane=$(list "${MACHINE_CONTROL_PLANE[@]}") || exit 1
machine_node=$(list "${MACHINE_NODE[@]}") || exit 1
rest_capi=$(list "${REST_CAPI[@]}") || exit 1
alone=$(list "${ALONE[@]}") || exit 1
# rest: every package of ./... in none of the lists above, in go list's order.
rest=$(grep -vxF -f <(printf '%s\n%s\n%s\n%s\n' "$machine_control_plane" "$machine_node" "$rest_capi" "$alone") <<<"$all")

# lane NAME CMD...: runs CMD with its output prefixed by NAME; returns CMD's exit code.
lane() {
  local name=$1; shift
  "$@" 2>&1 | sed -u "s/^/[$name] /"
  return "${PIPESTATUS[0]}"
}

# tools NAME SCRIPT...: the build scripts of what the next part needs (warm, a check of files;
# cold, a wait for the background build), timed as NAME.
tools() {
  local name=$1; shift
  $TIMED "$name" bash -c 'for script; do "hack/$script" || exit 1; done' tools "$@"
}

machine_lane() {
  local rc=0
  tools "test: machine, waiting for the control plane" build-tools.sh || return 1
  # shellcheck disable=SC2086 # one package path a word
  KOBE_TEST_REQUIRE_POSTGRES=1 $TIMED "test: machine, control plane (race)" "$GO" test "${RACE_FLAGS[@]}" $machine_control_plane || rc=1
  # The pool's and the lease's property tests at their full count, 100,000 random sequences each
  # (under -race they play 10,000: the race detector makes them ten times slower).
  $TIMED "test: pool property" "$GO" test -count=1 -run TestPoolDecisionsHoldTheirInvariants ./pool/ || rc=1
  $TIMED "test: lease property" "$GO" test -count=1 -run TestLeaseDecisionsHoldTheirInvariants ./lease/ || rc=1
  tools "test: machine, waiting for the node tools" build-node-tools.sh build-vcluster-tools.sh build-k3s-tools.sh || return 1
  # shellcheck disable=SC2086
  KOBE_TEST_REQUIRE_POSTGRES=1 $TIMED "test: machine, real node (race)" "$GO" test "${RACE_FLAGS[@]}" $machine_node || rc=1
  return $rc
}

rest_lane() {
  local rc=0
  tools "test: rest, waiting for the control plane" build-tools.sh build-controller-gen.sh || return 1
  # shellcheck disable=SC2086
  KOBE_TEST_REQUIRE_POSTGRES=1 $TIMED "test: rest (race)" "$GO" test "${RACE_FLAGS[@]}" $rest || rc=1
  tools "test: rest, waiting for the capi tools" build-capi-tools.sh || return 1
  # shellcheck disable=SC2086
  KOBE_TEST_REQUIRE_POSTGRES=1 $TIMED "test: rest, capi (race)" "$GO" test "${RACE_FLAGS[@]}" $rest_capi || rc=1
  return $rc
}

# Every tool, in the background (warm: a check of files in under a second).
lane tools hack/build-all-tools.sh &
tools_pid=$!

# Compile first, with both cores: the lanes would otherwise compile the same dependencies twice
# at once on a cold build cache. `go list -export` compiles every package and test package
# (into the build cache the lanes then read) without linking: a few seconds on a warm cache.
$TIMED "test: compile (race)" "$GO" list -race -export -test -deps ./... >/dev/null || exit 1

lane machine machine_lane &
machine_pid=$!
lane rest rest_lane &
rest_pid=$!
rc=0
wait "$machine_pid" || rc=1
wait "$rest_pid" || rc=1
wait "$tools_pid" || rc=1

# shellcheck disable=SC2086
KOBE_TEST_REQUIRE_POSTGRES=1 $TIMED "test: soak (race)" "$GO" test "${RACE_FLAGS[@]}" $alone || rc=1
# The 50-lease burst on real clusters, without the race detector.
KOBE_TEST_REQUIRE_POSTGRES=1 $TIMED "test: burst" "$GO" test -count=1 -timeout 30m -run TestBurstOfLeasesOnASmallPool ./testsuite/ || rc=1

if [[ $rc -ne 0 ]]; then
  echo "make test: FAILED (the failing parts are above: search for FAIL)"
fi
exit $rc
