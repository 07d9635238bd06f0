#!/usr/bin/env bash
# A fault-injecting run of the replicated cluster, checked end to end: starts a cluster on this
# machine (scripts/cluster.sh: ZooKeeper, 4 store nodes, 2 proxies, E=3 Qw=3 Qa=2: one node
# spare, to replace a failed one), runs two clients (cairn_cluster_client) producing to and
# consuming from two topics (one on exclusive subscriptions, one on failover) for SECONDS, while
# a seeded nemesis kills store nodes and proxies (SIGKILL, restarted on their data after a
# moment) and stops them (SIGSTOP, SIGCONT a few seconds later); then heals everything, reads
# every topic from the start, and checks the clients' histories with cairn_cluster_check, whose
# summary line it prints last:
#
#   cluster-check seed=.. minutes=.. ops=.. acked=.. lost=0 duplicated=0 inconsistent=0 aborted_read=0 reordered=0 unread=0
#
#   scripts/cluster_fault.sh [--seconds S] [--seed N] [--keep] [--no-faults] [DIRECTORY]
#
# --no-faults: the same run without the nemesis (a control: any anomaly then is not a fault's).
# Exits 0 only if the checker found no anomaly. The run's data, logs, histories and the
# nemesis' log (what it did, when) are under DIRECTORY (default: a new temporary directory),
# removed after a clean run unless --keep. The same seed makes the same choices of fault, victim
# and timing (the cluster's own timing still varies).
#
# The faults here are process faults on loopback. Network partitions (each node in a network
# namespace of its own) and damaged files are not injected yet.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }

seconds=60
seed=$(( $(date +%s) % 100000 ))
keep=false
faults=true
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --seconds) [ $# -ge 2 ] || { echo "cluster_fault: --seconds needs a number" >&2; exit 2; }
      seconds=$2; shift 2 ;;
    --seed) [ $# -ge 2 ] || { echo "cluster_fault: --seed needs a number" >&2; exit 2; }
      seed=$2; shift 2 ;;
    --keep) keep=true; shift ;;
    --no-faults) faults=false; shift ;;
    -*) echo "cluster_fault: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -ge 5 ] ||
  { echo "cluster_fault: --seconds must be a whole number of at least 5" >&2; exit 2; }
[[ "$seed" =~ ^[0-9]+$ ]] || { echo "cluster_fault: --seed must be a number" >&2; exit 2; }
data=${1:-$(mktemp -d /tmp/cairn-cluster-fault.XXXXXX)}
mkdir -p "$data"
pidfile=$data/pids

# A free port for ZooKeeper, so that the run does not depend on 2181 being free.
export CAIRN_ZK_PORT=${CAIRN_ZK_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
"$root/scripts/cluster.sh" --stores 4 "$data" >"$data/cluster.out"
cmake --build "$root/build" -j "$(nproc)" --target cairn_cluster_client cairn_cluster_check >/dev/null
client=$root/build/test/cairn_cluster_client
check=$root/build/test/cairn_cluster_check
proxies=127.0.0.1:7120,127.0.0.1:7121

stopped=false
finish() {
  $stopped && return
  stopped=true
  # Whatever the nemesis left stopped goes on, so that it can end.
  while read -r pid _; do kill -CONT "$pid" 2>/dev/null || true; done <"$pidfile"
  "$root/scripts/cluster.sh" --stop "$data" >/dev/null || true
}
trap finish EXIT

# Each process' command line, to start it again after a kill.
mkdir -p "$data/cmdlines"
while read -r pid name; do cp "/proc/$pid/cmdline" "$data/cmdlines/$name"; done <"$pidfile"
pid_of() { awk -v name="$1" '$2 == name { pid = $1 } END { print pid }' "$pidfile"; }
restart() {
  local name=$1 args
  mapfile -d '' args <"$data/cmdlines/$name"
  setsid "${args[@]}" </dev/null >/dev/null 2>>"$data/$name.log" &
  echo "$! $name" >>"$pidfile"
  disown  # The nemesis kills it later: no job notice from this shell.
}
log() { echo "$(date +%T.%3N) $*" >>"$data/nemesis.log"; }

RANDOM=$seed
victims=(store-0 store-1 store-2 store-3 proxy-0 proxy-1)
nemesis() {
  local end=$((SECONDS + seconds - 3))
  sleep 2
  while [ $SECONDS -lt $end ]; do
    local victim=${victims[RANDOM % ${#victims[@]}]} pid
    pid=$(pid_of "$victim")
    case $((RANDOM % 2)) in
      0)
        log "kill -KILL $victim ($pid)"
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
        sleep "0.$((RANDOM % 10))"
        restart "$victim"
        log "restarted $victim ($(pid_of "$victim"))" ;;
      1)
        local pause=$((1 + RANDOM % 3))
        log "kill -STOP $victim ($pid) for ${pause} s"
        kill -STOP "$pid" 2>/dev/null || true
        sleep "$pause"
        kill -CONT "$pid" 2>/dev/null || true
        log "kill -CONT $victim ($pid)" ;;
    esac
    sleep "$((1 + RANDOM % 3)).$((RANDOM % 10))"
  done
}

start=$SECONDS
echo "cluster_fault: seed $seed, $seconds s of faults; data in $data"
"$client" --proxy "$proxies" --history "$data/history-a" --name a --seconds "$seconds" \
  --topics fault-x,fault-y --rate 200 2>"$data/client-a.log" &
client_a=$!
"$client" --proxy "$proxies" --history "$data/history-b" --name b --seconds "$seconds" \
  --topics fault-x,fault-y --rate 200 --type failover 2>"$data/client-b.log" &
client_b=$!
if $faults; then nemesis; fi
status=0
wait "$client_a" || status=$?
wait "$client_b" || status=$?
[ $status -eq 0 ] || { cat "$data"/client-*.log >&2; echo "cluster_fault: a client failed" >&2; exit 1; }
# Healed: every process runs, then one reader reads everything.
while read -r pid name; do kill -CONT "$pid" 2>/dev/null || true; done <"$pidfile"
"$client" --proxy "$proxies" --history "$data/history-final" --name final \
  --topics fault-x,fault-y --final-read 2>"$data/client-final.log" ||
  echo "cluster_fault: the final read fell short: $(tail -1 "$data/client-final.log")" >&2
minutes=$(awk -v s=$((SECONDS - start)) 'BEGIN { printf "%.1f", s / 60 }')
injected=$(grep -c -e "kill -KILL" -e "kill -STOP" "$data/nemesis.log" 2>/dev/null || true)
echo "cluster_fault: ${injected:-0} faults injected (nemesis log: $data/nemesis.log)"
checked=0
"$check" --seed "$seed" --minutes "$minutes" "$data"/history-* || checked=$?
finish
if [ $checked -eq 0 ] && ! $keep; then rm -rf "$data"; fi
exit $checked
