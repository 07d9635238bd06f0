#!/usr/bin/env bash
# A replicated cluster on this machine, on loopback: one ZooKeeper server (Debian's `zookeeper`
# package), store nodes registered in it (three unless --stores says otherwise) and two
# `cairnd proxy` processes that replicate every ledger on the registered nodes (E=3, Qw=3, Qa=2
# by default, per topic with `cairn topics create --ensemble/--write-quorum/--ack-quorum`;
# docs/replication.md). Builds cairn first and installs missing Debian packages. Starts the
# processes in the background, prints their addresses and returns; they keep serving, their data
# and logs under DIRECTORY, their process ids in DIRECTORY/pids, until `--stop`.
#
#   scripts/cluster.sh [--stores N] [--demo] [DIRECTORY]   start (DIRECTORY: build/cluster-data)
#   scripts/cluster.sh --stop [DIRECTORY]                  stop the cluster started there
#
# --demo, once started: a topic replicated on two nodes (E=Qw=Qa=2, so that a node is spare),
# messages produced through the first proxy, a store node of the ledger's ensemble killed, more
# messages produced (the proxy replaces the node: the producer sees no error), everything consumed
# through the second proxy, the ledger's record shown (its second fragment names the replacement),
# and the killed node started again. Each topic is served by the proxy that owns its bundle: the
# other sends clients there (`--proxy 127.0.0.1:7120,127.0.0.1:7121` lets a client start at
# either), and takes the topic over within about a second when the owner dies (docs/cluster.md).
#
# Ports on 127.0.0.1: ZooKeeper $CAIRN_ZK_PORT (default 2181), store nodes from 7110, proxies
# 7120 and 7121; metrics off.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }

stop=false
demo=false
store_count=3
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --stop) stop=true; shift ;;
    --demo) demo=true; shift ;;
    --stores)
      [ $# -ge 2 ] || { echo "cluster: --stores needs a number" >&2; exit 2; }
      store_count=$2; shift 2 ;;
    -*) echo "cluster: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if ! [[ "$store_count" =~ ^[0-9]+$ ]] || [ "$store_count" -lt 1 ] || [ "$store_count" -gt 9 ]; then
  echo "cluster: --stores must be 1 to 9, not $store_count" >&2
  exit 2
fi
data=${1:-$root/build/cluster-data}
pidfile=$data/pids

# Whether `pid` is still one of this cluster's processes (not a recycled id).
ours() {
  local pid=$1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -e cairnd -e QuorumPeerMain
}

# SIGTERM, then SIGKILL whatever has not ended within 15 seconds. Proxies first, ZooKeeper last.
stop_pids() {
  local pids=("$@") pid i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    ours "${pids[i]}" && kill -TERM "${pids[i]}" 2>/dev/null || true
  done
  for _ in $(seq 1 150); do
    local alive=0
    for pid in "${pids[@]}"; do ours "$pid" && alive=1; done
    [ $alive -eq 0 ] && return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    if ours "$pid"; then
      echo "cluster: process $pid did not end within 15 s of SIGTERM: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

if $stop; then
  [ -f "$pidfile" ] || { echo "cluster: no cluster started in $data (no $pidfile)" >&2; exit 1; }
  mapfile -t pids < <(cut -d' ' -f1 "$pidfile")
  stop_pids "${pids[@]}"
  rm -f "$pidfile"
  echo "cluster: stopped (${#pids[@]} processes; the data stays in $data)"
  exit 0
fi

if [ -f "$pidfile" ]; then
  while read -r pid _; do
    if ours "$pid"; then
      echo "cluster: a cluster is running in $data already (process $pid); stop it first:" >&2
      echo "  $0 --stop $data" >&2
      exit 1
    fi
  done <"$pidfile"
  rm -f "$pidfile"
fi

"$root/scripts/setup.sh"
"$root/scripts/configure.sh" "$root/build" >/dev/null
cmake --build "$root/build" -j "$(nproc)" --target cairnd cairn_cli
cairnd=$root/build/net/cairnd
cairn=$root/build/net/cli/cairn
mkdir -p "$data"

# Until the cluster is up, a failure stops what was started (all of it is in the pid file: some
# is started from subshells).
started=false
on_exit() {
  $started && return
  [ -f "$pidfile" ] || return
  local started_pids
  mapfile -t started_pids < <(cut -d' ' -f1 "$pidfile")
  [ ${#started_pids[@]} -eq 0 ] || stop_pids "${started_pids[@]}"
  rm -f "$pidfile"
}
trap on_exit EXIT

# Starts a process in the background, detached from this script (its own session: a Ctrl-C or a
# closed terminal does not reach it), and records its id.
spawn() {
  local name=$1 log=$2
  shift 2
  setsid "$@" </dev/null >/dev/null 2>"$log" &
  echo "$! $name" >>"$pidfile"
}

# Waits until `log` has a line matching `pattern` (sed -n 's/.../\1/p' style) and prints \1.
wait_for() {
  local log=$1 pattern=$2 pid=$3 found=""
  for _ in $(seq 1 300); do
    found=$(sed -n "s/$pattern/\\1/p" "$log" 2>/dev/null | head -1)
    [ -n "$found" ] && { echo "$found"; return 0; }
    if ! kill -0 "$pid" 2>/dev/null; then cat "$log" >&2; echo "cluster: a process exited" >&2; return 1; fi
    sleep 0.1
  done
  cat "$log" >&2
  echo "cluster: timed out waiting for $log" >&2
  return 1
}

# ZooKeeper: one server on loopback.
zk_port=${CAIRN_ZK_PORT:-2181}
if (exec 3<>"/dev/tcp/127.0.0.1/$zk_port") 2>/dev/null; then
  echo "cluster: port $zk_port is taken (another ZooKeeper?); set CAIRN_ZK_PORT" >&2
  exit 1
fi
mkdir -p "$data/zookeeper/data"
cat >"$data/zookeeper/zoo.cfg" <<EOF
tickTime=200
initLimit=20
syncLimit=10
dataDir=$data/zookeeper/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok
EOF
spawn zookeeper "$data/zookeeper/server.log" java -Xmx256m -XX:+UseSerialGC \
  -Dzookeeper.admin.enableServer=false -Dzookeeper.jmx.log4j.disable=true \
  -cp /usr/share/java/zookeeper.jar org.apache.zookeeper.server.quorum.QuorumPeerMain \
  "$data/zookeeper/zoo.cfg"
# Serving once it takes connections (its client port opens after it loaded its data).
zk_up=false
for _ in $(seq 1 600); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$zk_port") 2>/dev/null; then zk_up=true; break; fi
  kill -0 "$(head -1 "$pidfile" | cut -d' ' -f1)" 2>/dev/null || break
  sleep 0.1
done
$zk_up || { cat "$data/zookeeper/server.log" >&2; echo "cluster: ZooKeeper did not start" >&2; exit 1; }
zk=zk://127.0.0.1:$zk_port/cairn
echo "ZooKeeper   127.0.0.1:$zk_port   (--metadata $zk; log $data/zookeeper/server.log)"

# The store nodes, registered in ZooKeeper: every node is equal; the topics' metadata and the
# ledgers' records live in ZooKeeper.
start_store() {
  local i=$1
  spawn "store-$i" "$data/store-$i.log" "$cairnd" store --data-dir "$data/store-$i" \
    --listen "127.0.0.1:$((7110 + i))" --metrics-listen none --metadata-dir none \
    --metadata "$zk" --session-timeout-ms 4000
  wait_for "$data/store-$i.log" '.*store node listening on \([0-9.]*:[0-9]*\).*' "$!"
}
for ((i = 0; i < store_count; i++)); do
  echo "store node  $(start_store "$i")   (log $data/store-$i.log)"
done

proxies=()
for i in 0 1; do
  spawn "proxy-$i" "$data/proxy-$i.log" "$cairnd" proxy --stores registered --metadata "$zk" \
    --ensemble 3 --write-quorum 3 --ack-quorum 2 --replica-timeout-ms 1000 \
    --session-timeout-ms 600 --listen "127.0.0.1:712$i" --metrics-listen none
  proxies+=("$(wait_for "$data/proxy-$i.log" '.*proxy listening on \([0-9.]*:[0-9]*\).*' "$!")")
  echo "proxy       ${proxies[i]}   (log $data/proxy-$i.log)"
done
started=true
echo "process ids in $pidfile; stop with: $0 --stop $data"

if $demo; then
  topic=replicated-demo-$(date +%s)
  echo "== cairn topics create $topic --ensemble 2 --write-quorum 2 --ack-quorum 2 (through ${proxies[0]})"
  "$cairn" topics create "$topic" --partitions 1 --ensemble 2 --write-quorum 2 --ack-quorum 2 \
    --proxy "${proxies[0]}"
  echo "== 1000 messages produced"
  seq 1 1000 | sed 's/^/before-/' | "$cairn" produce "$topic" --proxy "${proxies[0]}"

  ledgers=$("$cairn" replicated-ledgers --metadata "$zk" --json)
  ensemble=$(python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["replicated_ledgers"][-1]["ensemble"]))' <<<"$ledgers")
  victim=${ensemble%% *}
  victim_index=$((${victim##*:} - 7110))
  victim_pid=$(awk -v name="store-$victim_index" '$2 == name { pid = $1 } END { print pid }' "$pidfile")
  echo "== store node $victim (in the ledger's ensemble: $ensemble) killed with SIGKILL"
  kill -KILL "$victim_pid"
  while kill -0 "$victim_pid" 2>/dev/null; do sleep 0.05; done
  echo "== 1000 more messages produced: the proxy replaces the dead node, the producer sees no error"
  seq 1 1000 | sed 's/^/after-/' | "$cairn" produce "$topic" --proxy "${proxies[0]}"

  echo "== consumed through the other proxy (${proxies[1]})"
  count=$("$cairn" consume "$topic" --subscription demo --count 2000 --wait-ms 5000 \
    --proxy "${proxies[1]}" | wc -l)
  echo "$count messages"
  [ "$count" -eq 2000 ] || { echo "cluster: expected 2000 messages, got $count" >&2; exit 1; }

  echo "== the replicated ledgers (cairn replicated-ledgers --metadata $zk)"
  "$cairn" replicated-ledgers --metadata "$zk"
  echo "== store node $victim started again on its data"
  start_store "$victim_index" >/dev/null
fi
