#!/bin/sh
# The upstream lease flow with nothing but curl (and sed): request a cluster from a pool, wait
# until it is Bound, save its kubeconfig, use it, and give the cluster back.
#
#   KOBE_SERVER=http://127.0.0.1:8080 KOBE_TOKEN=$(cat ~/.local/state/kobe/admin-token) \
#     docs/lease-with-curl.sh dev ./kubeconfig
#
# Exit status: 0 once the lease is released; 1 with the API's reason otherwise.
set -eu
: "${KOBE_SERVER:=http://127.0.0.1:8080}"
: "${KOBE_TOKEN:?set KOBE_TOKEN (kobe dev writes an admin token to <state-dir>/admin-token)}"
POOL=${1:-dev}
OUT=${2:-./kubeconfig}
AUTH="Authorization: Bearer $KOBE_TOKEN"

field() { # field NAME: the first "NAME": "value" of the JSON on stdin
  sed -n "s/.*\"$1\": *\"\([^\"]*\)\".*/\1/p" | head -n 1
}

# 1. Request a lease: 200 with {id, phase: Bound, kubeconfig, ...} on a warm bind, else 202 with
#    {id, phase: Pending, profile, effective_ttl, queue_position}.
lease=$(curl -sS --fail-with-body -X POST -H "$AUTH" -H 'Content-Type: application/json' \
  -d "{\"profile\": \"$POOL\", \"ttl\": \"1h\"}" "$KOBE_SERVER/v1/leases") || { echo "$lease" >&2; exit 1; }
id=$(printf '%s\n' "$lease" | field id)
echo "lease $id requested from pool $POOL"

# 2. Poll until Bound (the server holds each GET up to 20 s while the lease is Pending).
while :; do
  lease=$(curl -sS --fail-with-body -H "$AUTH" "$KOBE_SERVER/v1/leases/$id?wait=20s") || { echo "$lease" >&2; exit 1; }
  phase=$(printf '%s\n' "$lease" | field phase)
  case $phase in
    Bound) break ;;
    Pending) echo "still pending" ;;
    *) echo "lease $id ended $phase: $(printf '%s\n' "$lease" | field reason)" >&2; exit 1 ;;
  esac
done
echo "lease $id bound, expires $(printf '%s\n' "$lease" | field expires_at)"

# 3. The kubeconfig, as a file (it is also the "kubeconfig" field of the lease object).
umask 077
curl -sS --fail-with-body -H "$AUTH" "$KOBE_SERVER/v1/leases/$id/kubeconfig" -o "$OUT"
echo "kubeconfig written to $OUT"

# 4. Use the cluster here, e.g.: KUBECONFIG=$OUT kubectl get ns

# 5. Give it back: 204; the cluster is torn down and the pool refills.
code=$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE -H "$AUTH" "$KOBE_SERVER/v1/leases/$id")
[ "$code" = 204 ] || { echo "release answered $code" >&2; exit 1; }
echo "lease $id released"
