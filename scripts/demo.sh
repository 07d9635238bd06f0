#!/usr/bin/env bash
# The standalone demo: starts `cairnd standalone` on DATA_DIR, creates the topic `demo`,
# produces a few messages, consumes them back, prints the topic's stats, and then either stops
# the daemon (--stop) or keeps it serving in the foreground until Ctrl-C.
#
#   scripts/demo.sh [--stop] CAIRND CAIRN DATA_DIR
#
# CAIRND and CAIRN are the built binaries. The daemon listens on $CAIRN_LISTEN (default
# 127.0.0.1:7020) and serves metrics on $CAIRN_METRICS_LISTEN (default 127.0.0.1:7021); port 0
# picks a free one.
set -euo pipefail
stop=false
if [ "${1:-}" = "--stop" ]; then stop=true; shift; fi
case "${1:-}" in -h|--help|"") sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cairnd=$1 cairn=$2 data=$3
mkdir -p "$data"
log="$data/standalone.log"

"$cairnd" standalone --data-dir "$data/store" --listen "${CAIRN_LISTEN:-127.0.0.1:7020}" \
  --metrics-listen "${CAIRN_METRICS_LISTEN:-127.0.0.1:7021}" 2>"$log" &
pid=$!
cleanup() { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
trap cleanup EXIT

# The daemon's log line names the port it listens on.
address=""
for _ in $(seq 1 100); do
  address=$(sed -n 's/.*proxy listening on \([0-9.]*:[0-9]*\).*/\1/p' "$log" | head -1)
  [ -n "$address" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then cat "$log" >&2; echo "demo: cairnd exited" >&2; exit 1; fi
  sleep 0.1
done
[ -n "$address" ] || { cat "$log" >&2; echo "demo: cairnd did not start" >&2; exit 1; }
metrics=$(sed -n 's/.*serving metrics on \(http[^ ]*\).*/\1/p' "$log" | head -1)
echo "== cairnd standalone is serving on $address (metrics: ${metrics:-none}; log: $log)"

echo "== cairn topics create demo --partitions 2"
if ! out=$("$cairn" topics create demo --partitions 2 --proxy "$address" 2>&1); then
  case "$out" in *ALREADY_EXISTS*|*"already exists"*) echo "(the topic exists from an earlier run)" ;;
                 *) echo "$out" >&2; exit 1 ;; esac
else
  echo "$out"
fi

echo "== three messages into cairn produce demo"
printf 'cheddar\ncomte\nstilton\n' | "$cairn" produce demo --proxy "$address"

echo "== cairn consume demo --subscription demo-reader --count 3"
consumed=$("$cairn" consume demo --subscription demo-reader --count 3 --proxy "$address")
echo "$consumed"
for cheese in cheddar comte stilton; do
  grep -qx "$cheese" <<<"$consumed" || { echo "demo: '$cheese' was not consumed" >&2; exit 1; }
done

echo "== cairn topics stats demo"
"$cairn" topics stats demo --proxy "$address"

if $stop; then
  # A clean stop exits with status 0 (docs/network.md); anything else fails the demo.
  trap - EXIT
  kill -TERM "$pid"
  status=0
  wait "$pid" || status=$?
  if [ "$status" -ne 0 ]; then
    cat "$log" >&2
    echo "demo: cairnd exited with status $status after SIGTERM" >&2
    exit 1
  fi
  echo "== stopped cairnd standalone"
  exit 0
fi
echo "== cairnd standalone keeps serving on $address; try:"
echo "     echo hello | $cairn produce demo --proxy $address"
echo "     $cairn consume demo --subscription me --follow --proxy $address"
echo "   Ctrl-C stops it."
trap - EXIT
trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM
wait "$pid"
