#!/usr/bin/env bash
# Runs a command as a named stage of a longer run (e.g. the parts of `make test`):
#
#   hack/timed.sh NAME CMD [ARG...]
#
# Without KOBE_STAGE_TIMES it only runs CMD. With KOBE_STAGE_TIMES=<file> (set by .ci/run) it
# also appends "NAME<TAB>seconds<TAB>ok|failed (exit N)" to the file, so that CI can say which
# part took how long even when a part fails. The exit code is CMD's.
set -uo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 NAME CMD [ARG...]" >&2; exit 2; }
name=$1; shift
if [[ -z ${KOBE_STAGE_TIMES:-} ]]; then
  exec "$@"
fi
t0=$(date +%s.%N)
"$@"
rc=$?
status=ok
[[ $rc -eq 0 ]] || status="failed (exit $rc)"
printf '%s\t%s\t%s\n' "$name" "$(awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')" "$status" >>"$KOBE_STAGE_TIMES"
exit $rc
