#!/usr/bin/env bash
# PostgreSQL for kobe's tests: the store suite and the production-layout tests run against a
# real server, by default postgres://postgres@127.0.0.1:5432 with trust auth on loopback
# (KOBE_TEST_POSTGRES overrides it).
#
#   hack/postgres.sh check    exit 0 if the test server answers, else say what to do (exit 1)
#   hack/postgres.sh ensure   install Debian's postgresql if missing, start it, allow loopback
#                             trust auth for the tests (needs root; what .ci/run does)
set -euo pipefail

DSN=${KOBE_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}

reachable() {
  command -v psql >/dev/null 2>&1 || return 1
  PGCONNECT_TIMEOUT=3 psql "$DSN" -Atqc 'select 1' >/dev/null 2>&1
}

case "${1:-check}" in
check)
  if reachable; then
    exit 0
  fi
  cat >&2 <<MSG
make test needs PostgreSQL: the store suite and the production-layout tests use a real server.
Not reachable: ${DSN}
  - on Debian/Ubuntu as root:  make postgres      (installs and starts Debian's postgresql)
  - or point KOBE_TEST_POSTGRES at an admin DSN of a server you have, e.g.
      KOBE_TEST_POSTGRES=postgres://me:pw@db:5432/postgres make test
  - or run the fast tests only:  make test-short
MSG
  exit 1
  ;;
ensure)
  if reachable; then
    echo "PostgreSQL answers at ${DSN}"
    exit 0
  fi
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "==> installing Debian's postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql >/dev/null
  fi
  version=$(ls /etc/postgresql | sort -V | tail -n1)
  [ -n "$version" ] || { echo "no PostgreSQL cluster found under /etc/postgresql" >&2; exit 1; }
  hba=/etc/postgresql/$version/main/pg_hba.conf
  # The tests connect over loopback as "postgres" without a password, like a developer box.
  if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    echo "==> allowing trust auth on loopback in $hba (test machines only)"
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
  echo "==> starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || \
    pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  for _ in $(seq 1 50); do
    reachable && { echo "PostgreSQL answers at ${DSN}"; exit 0; }
    sleep 0.2
  done
  echo "PostgreSQL $version did not answer at ${DSN}" >&2
  exit 1
  ;;
*)
  echo "usage: $0 check|ensure" >&2
  exit 2
  ;;
esac
