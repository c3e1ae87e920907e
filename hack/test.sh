#!/usr/bin/env bash
# `make test`: the whole suite, with the race detector, in two lanes that run at once.
#
# Most of the suite's time is spent waiting on real processes (an API server starting, a pod
# scheduled, a certificate expiring): run one package at a time, the machine's two cores were
# idle half of the time. Two lanes run side by side instead, each one package at a time:
#
#   machine  the packages that use what a machine has only one of: the real-pods node
#            (bridge kobe0, /var/lib/kubelet: backends/k3s, backends/vcluster,
#            testsuite/hostcluster), and the shared datastore servers whose leftovers the k3s
#            tests check by name prefix (backends/local, instance, datastore, server); and the
#            two that must not overlap each other, the check that no `kobe dev --ephemeral`
#            cluster outlives its process and the end-to-end runs of the binary
#            (internal/service, testsuite/e2e), here to balance the lanes; then the pool's and
#            the lease's property tests at their full count, without -race
#   rest     every other package, among them two that must not overlap each other: the Cluster
#            API managers' fixed ports (backends/capi, testsuite)
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

MACHINE=(./backends/k3s ./backends/vcluster ./testsuite/hostcluster/... ./backends/local ./instance ./datastore ./server
  ./internal/service ./testsuite/e2e)
ALONE=(./testsuite/soak)

list() { "$GO" list "$@"; }
all=$(list ./...) || exit 1
machine=$(list "${MACHINE[@]}") || exit 1
alone=$(list "${ALONE[@]}") || exit 1
# rest: every package of ./... in neither list, in go list's order.
rest=$(grep -vxF -f <(printf '%s\n%s\n' "$machine" "$alone") <<<"$all")

# lane NAME CMD...: runs CMD with its output prefixed by NAME; returns CMD's exit code.
lane() {
  local name=$1; shift
  "$@" 2>&1 | sed -u "s/^/[$name] /"
  return "${PIPESTATUS[0]}"
}

machine_lane() {
  local rc=0
  # shellcheck disable=SC2086 # one package path a word
  KOBE_TEST_REQUIRE_POSTGRES=1 $TIMED "test: lane machine (race)" "$GO" test "${RACE_FLAGS[@]}" $machine || rc=1
  # The pool's and the lease's property tests at their full count, 100,000 random sequences each
  # (under -race they play 10,000: the race detector makes them ten times slower).
  $TIMED "test: pool property" "$GO" test -count=1 -run TestPoolDecisionsHoldTheirInvariants ./pool/ || rc=1
  $TIMED "test: lease property" "$GO" test -count=1 -run TestLeaseDecisionsHoldTheirInvariants ./lease/ || rc=1
  return $rc
}

rest_lane() {
  # shellcheck disable=SC2086
  KOBE_TEST_REQUIRE_POSTGRES=1 $TIMED "test: lane rest (race)" "$GO" test "${RACE_FLAGS[@]}" $rest
}

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

# shellcheck disable=SC2086
KOBE_TEST_REQUIRE_POSTGRES=1 $TIMED "test: soak (race)" "$GO" test "${RACE_FLAGS[@]}" $alone || rc=1
# The 50-lease burst on real clusters, without the race detector.
KOBE_TEST_REQUIRE_POSTGRES=1 $TIMED "test: burst" "$GO" test -count=1 -timeout 30m -run TestBurstOfLeasesOnASmallPool ./testsuite/ || rc=1

if [[ $rc -ne 0 ]]; then
  echo "make test: FAILED (the failing parts are above: search for FAIL)"
fi
exit $rc
