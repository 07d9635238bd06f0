#!/usr/bin/env bash
# A replicated cluster on this machine, on loopback: one ZooKeeper server (Debian's `zookeeper`
# package), store nodes registered in it (three unless --stores says otherwise) and two
# `cairnd proxy` processes that replicate every ledger on the registered nodes (E=3, Qw=3, Qa=2
# by default, per topic with `cairn topics create --ensemble/--write-quorum/--ack-quorum`;
# docs/replication.md). Builds cairn first and installs missing Debian packages. Starts the
# processes in the background, prints their addresses and returns; they keep serving, their data
# and logs under DIRECTORY, their process ids in DIRECTORY/pids, until `--stop`.
#
#   scripts/cluster.sh [--stores N] [--netns] [--demo] [DIRECTORY]   start (build/cluster-data)
#   scripts/cluster.sh --stop [DIRECTORY]                            stop the cluster started there
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
# 7120 and 7121; metrics off. $CAIRN_STORE_ARGS, if set, are more flags for every store node
# (--autorecovery-delay-ms 5000, say).
#
# --netns (root): each process in a network namespace of its own, joined to a bridge by a veth
# pair, so that links can really fail (scripts/cluster_fault.sh cuts them): the bridge
# $CAIRN_NETNS_PREFIX-br (prefix default "cairn") is 10.77.0.1/24 on this host, ZooKeeper
# 10.77.0.2:2181, store node i 10.77.0.(10+i):7110, proxy i 10.77.0.(20+i):7120; the namespace
# of process NAME is $CAIRN_NETNS_PREFIX-NAME, its host-side link $CAIRN_NETNS_PREFIX-NAME too
# (veth names are cut to 15 bytes). --stop removes them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }

stop=false
demo=false
netns=false
prefix=${CAIRN_NETNS_PREFIX:-cairn}
store_count=3
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --stop) stop=true; shift ;;
    --demo) demo=true; shift ;;
    --netns) netns=true; shift ;;
    --stores)
      [ $# -ge 2 ] || { echo "cluster: --stores needs a number" >&2; exit 2; }
      store_count=$2; shift 2 ;;
    -*) echo "cluster: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if $netns && $demo; then
  echo "cluster: --demo runs on loopback only (without --netns)" >&2
  exit 2
fi
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

# The namespaces, links and bridge of --netns (recorded in $data/netns), removed.
remove_netns() {
  [ -f "$data/netns" ] || return 0
  local name
  while read -r name; do
    ip netns del "$prefix-$name" 2>/dev/null || true
    ip link del "$(link_of "$name")" 2>/dev/null || true
  done <"$data/netns"
  ip link del "$prefix-br" 2>/dev/null || true
  rm -f "$data/netns"
}
link_of() { local link="$prefix-$1"; echo "${link:0:15}"; }

if $stop; then
  [ -f "$pidfile" ] || { echo "cluster: no cluster started in $data (no $pidfile)" >&2; exit 1; }
  mapfile -t pids < <(cut -d' ' -f1 "$pidfile")
  stop_pids "${pids[@]}"
  rm -f "$pidfile"
  remove_netns
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
  remove_netns
}
trap on_exit EXIT

# With --netns: namespace $prefix-NAME at 10.77.0.HOST, its eth0 the peer of a veth on the bridge.
add_netns() {
  local name=$1 host=$2 ns="$prefix-$1" link
  link=$(link_of "$name")
  if ! ip link show "$prefix-br" >/dev/null 2>&1; then
    ip link add "$prefix-br" type bridge
    ip addr add 10.77.0.1/24 dev "$prefix-br"
    ip link set "$prefix-br" up
  fi
  echo "$name" >>"$data/netns"
  ip netns add "$ns"
  ip link add "$link" type veth peer name eth0 netns "$ns"
  ip link set "$link" master "$prefix-br" up
  ip -n "$ns" addr add "10.77.0.$host/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" route add default via 10.77.0.1
}

# Starts a process in the background, detached from this script (its own session: a Ctrl-C or a
# closed terminal does not reach it), and records its id (and, with --netns, its namespace,
# where it runs).
spawn() {
  local name=$1 log=$2
  shift 2
  if $netns; then
    setsid ip netns exec "$prefix-$name" "$@" </dev/null >/dev/null 2>"$log" &
    echo "$! $name $prefix-$name" >>"$pidfile"
  else
    setsid "$@" </dev/null >/dev/null 2>"$log" &
    echo "$! $name" >>"$pidfile"
  fi
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

# ZooKeeper: one server on loopback (or in its namespace).
zk_port=${CAIRN_ZK_PORT:-2181}
zk_host=127.0.0.1
store_host() { echo "127.0.0.1:$((7110 + $1))"; }
proxy_host() { echo "127.0.0.1:712$1"; }
if $netns; then
  [ "$(id -u)" -eq 0 ] || { echo "cluster: --netns needs root" >&2; exit 1; }
  ip link show "$prefix-br" >/dev/null 2>&1 &&
    { echo "cluster: $prefix-br exists already (another cluster?); set CAIRN_NETNS_PREFIX" >&2; exit 1; }
  zk_port=2181
  zk_host=10.77.0.2
  store_host() { echo "10.77.0.$((10 + $1)):7110"; }
  proxy_host() { echo "10.77.0.$((20 + $1)):7120"; }
  # Beyond loopback, on a bridge only this machine reaches (the daemons have no TLS yet).
  insecure=--insecure
  add_netns zookeeper 2
  for ((i = 0; i < store_count; i++)); do add_netns "store-$i" $((10 + i)); done
  for i in 0 1; do add_netns "proxy-$i" $((20 + i)); done
elif (exec 3<>"/dev/tcp/127.0.0.1/$zk_port") 2>/dev/null; then
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
clientPortAddress=$zk_host
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
  if (exec 3<>"/dev/tcp/$zk_host/$zk_port") 2>/dev/null; then zk_up=true; break; fi
  kill -0 "$(head -1 "$pidfile" | cut -d' ' -f1)" 2>/dev/null || break
  sleep 0.1
done
$zk_up || { cat "$data/zookeeper/server.log" >&2; echo "cluster: ZooKeeper did not start" >&2; exit 1; }
zk=zk://$zk_host:$zk_port/cairn
echo "ZooKeeper   $zk_host:$zk_port   (--metadata $zk; log $data/zookeeper/server.log)"

# The store nodes, registered in ZooKeeper: every node is equal; the topics' metadata and the
# ledgers' records live in ZooKeeper.
start_store() {
  local i=$1
  spawn "store-$i" "$data/store-$i.log" "$cairnd" store --data-dir "$data/store-$i" \
    --listen "$(store_host "$i")" ${insecure:-} --metrics-listen none --metadata-dir none \
    --metadata "$zk" --session-timeout-ms 4000 ${CAIRN_STORE_ARGS:-}
  wait_for "$data/store-$i.log" '.*store node listening on \([0-9.]*:[0-9]*\).*' "$!"
}
for ((i = 0; i < store_count; i++)); do
  echo "store node  $(start_store "$i")   (log $data/store-$i.log)"
done

proxies=()
for i in 0 1; do
  spawn "proxy-$i" "$data/proxy-$i.log" "$cairnd" proxy --stores registered --metadata "$zk" \
    --ensemble 3 --write-quorum 3 --ack-quorum 2 --replica-timeout-ms 1000 \
    --session-timeout-ms 600 --listen "$(proxy_host "$i")" ${insecure:-} --metrics-listen none
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
