#!/usr/bin/env bash
# MariaDB and NATS (JetStream) for the shared-datastore tests (package datastore, backends/local):
# by default MariaDB on 127.0.0.1:3306 as root with an empty password, NATS on 127.0.0.1:4222
# with JetStream. PostgreSQL, the third, is hack/postgres.sh's.
#
#   hack/datastores.sh check    exit 0 if both answer, else say what is missing (exit 1)
#   hack/datastores.sh ensure   install Debian's mariadb-server / nats-server if missing, start
#                               them, let root log in over TCP without a password (test machines
#                               only; needs root; what .ci/run does)
set -euo pipefail

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

mariadb_ok() {
  command -v mariadb >/dev/null 2>&1 || return 1
  mariadb --protocol=tcp -h127.0.0.1 -P3306 -uroot --connect-timeout=3 -e 'select 1' >/dev/null 2>&1
}

nats_ok() {
  # JetStream answers on the HTTP monitor only if enabled there; the tests' own Ping checks
  # JetStream itself. Here: the client port accepts connections.
  port_open 4222
}

install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "$@" >/dev/null
}

ensure_mariadb() {
  if mariadb_ok; then echo "MariaDB answers on 127.0.0.1:3306"; return; fi
  command -v mariadbd >/dev/null 2>&1 || [[ -x /usr/sbin/mariadbd ]] || { echo "==> installing Debian's mariadb-server"; install mariadb-server; }
  if ! port_open 3306; then
    echo "==> starting MariaDB"
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
    for _ in $(seq 1 100); do port_open 3306 && break; sleep 0.2; done
  fi
  # Debian's root logs in through the socket only; the tests connect over TCP as root.
  if ! mariadb_ok; then
    echo "==> letting root log in on 127.0.0.1 without a password (test machines only)"
    mariadb -uroot -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; FLUSH PRIVILEGES;"
  fi
  mariadb_ok || { echo "MariaDB does not answer on 127.0.0.1:3306 as root" >&2; exit 1; }
  echo "MariaDB answers on 127.0.0.1:3306"
}

ensure_nats() {
  if nats_ok; then echo "NATS answers on 127.0.0.1:4222"; return; fi
  [[ -x /usr/sbin/nats-server ]] || { echo "==> installing Debian's nats-server"; install nats-server; }
  echo "==> starting NATS with JetStream"
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  for _ in $(seq 1 100); do nats_ok && { echo "NATS answers on 127.0.0.1:4222"; return; }; sleep 0.2; done
  echo "NATS does not answer on 127.0.0.1:4222" >&2
  exit 1
}

case "${1:-check}" in
check)
  rc=0
  mariadb_ok || { echo "MariaDB is not reachable on 127.0.0.1:3306 as root (hack/datastores.sh ensure, or KOBE_TEST_MYSQL)" >&2; rc=1; }
  nats_ok || { echo "NATS is not reachable on 127.0.0.1:4222 (hack/datastores.sh ensure, or KOBE_TEST_NATS)" >&2; rc=1; }
  exit $rc
  ;;
ensure)
  ensure_mariadb
  ensure_nats
  ;;
*)
  echo "usage: $0 check|ensure" >&2
  exit 2
  ;;
esac
