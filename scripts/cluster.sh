#!/usr/bin/env bash
# A replicated cluster on this machine: one ZooKeeper server (Debian's `zookeeper` package),
# four `cairnd store` nodes registered in it and two `cairnd proxy` processes that replicate every
# ledger on three of the registered nodes (E=3, Qw=3, Qa=2; docs/replication.md). Builds cairn
# first and installs missing Debian packages. Then a short demo: a topic created through the
# first proxy, messages produced, one store node of the ledger's ensemble killed, more messages
# produced, everything consumed through the second proxy (which, opening the topic, recovers the
# ledger the first proxy was writing: topic ownership across proxies is not built yet, so give
# each topic one proxy), and the ledger's record shown (its second fragment names the
# replacement). Keeps serving until Ctrl-C, or stops with --stop.
#
#   scripts/cluster.sh [--stop] [DIRECTORY]   data goes to DIRECTORY (default: build/cluster-data)
#
# Ports on 127.0.0.1: ZooKeeper $CAIRN_ZK_PORT (default 2181), store nodes 7110-7113 (metrics
# none), proxies 7120 and 7121.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
stop=false
if [ "${1:-}" = "--stop" ]; then stop=true; shift; fi
data=${1:-$root/build/cluster-data}

"$root/scripts/setup.sh"
"$root/scripts/configure.sh" "$root/build" >/dev/null
cmake --build "$root/build" -j "$(nproc)" --target cairnd cairn_cli
cairnd=$root/build/net/cairnd
cairn=$root/build/net/cli/cairn
mkdir -p "$data"

pids=()
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

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
mkdir -p "$data/zookeeper/data"
cat >"$data/zookeeper/zoo.cfg" <<EOF
tickTime=500
initLimit=20
syncLimit=10
dataDir=$data/zookeeper/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok
EOF
java -Xmx256m -XX:+UseSerialGC -Dzookeeper.admin.enableServer=false \
  -Dzookeeper.jmx.log4j.disable=true -cp /usr/share/java/zookeeper.jar \
  org.apache.zookeeper.server.quorum.QuorumPeerMain "$data/zookeeper/zoo.cfg" \
  >"$data/zookeeper/server.log" 2>&1 &
pids+=($!)
# Serving once it takes connections (its client port opens after it loaded its data).
zk_up=false
for _ in $(seq 1 600); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$zk_port") 2>/dev/null; then zk_up=true; break; fi
  kill -0 "${pids[0]}" 2>/dev/null || break
  sleep 0.1
done
$zk_up || { cat "$data/zookeeper/server.log" >&2; echo "cluster: ZooKeeper did not start" >&2; exit 1; }
zk=zk://127.0.0.1:$zk_port/cairn
echo "== ZooKeeper serving on 127.0.0.1:$zk_port (log: $data/zookeeper/server.log)"

# Four store nodes, registered in ZooKeeper. The first also hosts nothing else: every node is
# equal; the topics' metadata and the ledgers' records live in ZooKeeper.
stores=()
for i in 0 1 2 3; do
  "$cairnd" store --data-dir "$data/store-$i" --listen "127.0.0.1:711$i" --metrics-listen none \
    --metadata-dir none --metadata "$zk" --session-timeout-ms 4000 2>"$data/store-$i.log" &
  pids+=($!)
  stores+=($!)
  wait_for "$data/store-$i.log" '.*store node listening on \([0-9.]*:[0-9]*\).*' "$!" >/dev/null
done
echo "== four store nodes on 127.0.0.1:7110-7113 (logs: $data/store-*.log)"

proxies=()
for i in 0 1; do
  "$cairnd" proxy --stores registered --metadata "$zk" --ensemble 3 --write-quorum 3 \
    --ack-quorum 2 --replica-timeout-ms 1000 --listen "127.0.0.1:712$i" --metrics-listen none \
    2>"$data/proxy-$i.log" &
  pids+=($!)
  proxies+=("$(wait_for "$data/proxy-$i.log" '.*proxy listening on \([0-9.]*:[0-9]*\).*' "$!")")
done
echo "== two proxies on ${proxies[0]} and ${proxies[1]}, replicating on the registered nodes"

topic=replicated-demo-$(date +%s)
echo "== cairn topics create $topic (through ${proxies[0]})"
"$cairn" topics create "$topic" --partitions 1 --proxy "${proxies[0]}"
echo "== 1000 messages produced"
seq 1 1000 | sed 's/^/before-/' | "$cairn" produce "$topic" --proxy "${proxies[0]}"

ledgers=$("$cairn" replicated-ledgers --metadata "$zk" --json)
ensemble=$(python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["replicated_ledgers"][-1]["ensemble"]))' <<<"$ledgers")
victim=${ensemble%% *}
for i in 0 1 2 3; do
  if [ "127.0.0.1:711$i" = "$victim" ]; then
    echo "== store node $victim (in the ledger's ensemble: $ensemble) killed with SIGKILL"
    { kill -KILL "${stores[i]}"; wait "${stores[i]}"; } 2>/dev/null || true
  fi
done
echo "== 1000 more messages produced: the proxy replaces the dead node, the producer sees no error"
seq 1 1000 | sed 's/^/after-/' | "$cairn" produce "$topic" --proxy "${proxies[0]}"

echo "== consumed through the other proxy (${proxies[1]})"
count=$("$cairn" consume "$topic" --subscription demo --count 2000 --wait-ms 5000 \
  --proxy "${proxies[1]}" | wc -l)
echo "$count messages"
[ "$count" -eq 2000 ] || { echo "cluster: expected 2000 messages, got $count" >&2; exit 1; }

echo "== the replicated ledgers (cairn replicated-ledgers --metadata $zk)"
"$cairn" replicated-ledgers --metadata "$zk"

if $stop; then
  echo "== stopping the cluster"
  exit 0
fi
echo "== the cluster keeps serving; try:"
echo "     echo hello | $cairn produce $topic --proxy ${proxies[0]}"
echo "     $cairn consume $topic --subscription me --follow --proxy ${proxies[1]}"
echo "     $cairn replicated-ledgers --metadata $zk"
echo "   Ctrl-C stops it."
trap 'cleanup; exit 0' INT TERM
wait
