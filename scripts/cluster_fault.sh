#!/usr/bin/env bash
# A fault-injecting run of the replicated cluster, checked end to end: starts a cluster on this
# machine (scripts/cluster.sh: ZooKeeper, 4 store nodes, 2 proxies, E=3 Qw=3 Qa=2: one node
# spare, to replace a failed one), runs two clients (cairn_cluster_client) producing to and
# consuming from two topics (one on exclusive subscriptions, one on failover) for SECONDS, while
# a seeded nemesis kills store nodes, proxies and ZooKeeper (SIGKILL, restarted on their data
# after a moment), stops them (SIGSTOP, SIGCONT a few seconds later), and damages the files of
# one store node (always the same one: a minority of each ledger's copies): a byte flipped in a
# segment of a sealed ledger, or the tail of a ledger's last segment cut off while it is down;
# with --netns (root) each process has a network namespace of its own and the nemesis also cuts
# links: one process isolated, two store nodes at once (a minority), one-way (a blackhole route
# from one process to another), and a proxy from ZooKeeper. Then it heals everything, reads
# every topic from the start, and checks the clients' histories with cairn_cluster_check, whose
# summary line it prints last:
#
#   cluster-check seed=.. minutes=.. ops=.. acked=.. lost=0 duplicated=0 inconsistent=0 aborted_read=0 reordered=0 unread=0
#
#   scripts/cluster_fault.sh [--seconds S] [--seed N] [--netns] [--keep] [--no-faults] [DIRECTORY]
#
# --no-faults: the same run without the nemesis (a control: any anomaly then is not a fault's).
# Exits 0 only if the checker found no anomaly. The run's data, logs, histories and the
# nemesis' log (what it did, when) are under DIRECTORY (default: a new temporary directory),
# removed after a clean run unless --keep. The same seed makes the same choices of fault, victim
# and timing (the cluster's own timing still varies).
#
# Clock jumps are not injected: no decision of the cluster rests on the wall clock (timeouts,
# sessions, delays and grace periods use monotonic clocks; the wall clock only stamps records
# for people and for garbage collection's report).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }

seconds=60
seed=$(( $(date +%s) % 100000 ))
keep=false
faults=true
netns=false
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --seconds) [ $# -ge 2 ] || { echo "cluster_fault: --seconds needs a number" >&2; exit 2; }
      seconds=$2; shift 2 ;;
    --seed) [ $# -ge 2 ] || { echo "cluster_fault: --seed needs a number" >&2; exit 2; }
      seed=$2; shift 2 ;;
    --keep) keep=true; shift ;;
    --no-faults) faults=false; shift ;;
    --netns) netns=true; shift ;;
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
prefix=${CAIRN_NETNS_PREFIX:-cairn}
if $netns; then
  "$root/scripts/cluster.sh" --stores 4 --netns "$data" >"$data/cluster.out"
  proxies=10.77.0.20:7120,10.77.0.21:7120
else
  "$root/scripts/cluster.sh" --stores 4 "$data" >"$data/cluster.out"
  proxies=127.0.0.1:7120,127.0.0.1:7121
fi
cmake --build "$root/build" -j "$(nproc)" --target cairn_cluster_client cairn_cluster_check >/dev/null
client=$root/build/test/cairn_cluster_client
check=$root/build/test/cairn_cluster_check

stopped=false
finish() {
  $stopped && return
  stopped=true
  # Whatever the nemesis left stopped goes on, so that it can end.
  while read -r pid _; do kill -CONT "$pid" 2>/dev/null || true; done <"$pidfile"
  heal_links
  "$root/scripts/cluster.sh" --stop "$data" >/dev/null || true
}
trap finish EXIT

# Each process' command line, to start it again after a kill.
mkdir -p "$data/cmdlines"
while read -r pid name _; do cp "/proc/$pid/cmdline" "$data/cmdlines/$name"; done <"$pidfile"
pid_of() { awk -v name="$1" '$2 == name { pid = $1 } END { print pid }' "$pidfile"; }
restart() {
  local name=$1 args
  mapfile -d '' args <"$data/cmdlines/$name"
  if $netns; then
    setsid ip netns exec "$prefix-$name" "${args[@]}" </dev/null >/dev/null 2>>"$data/$name.log" &
  else
    setsid "${args[@]}" </dev/null >/dev/null 2>>"$data/$name.log" &
  fi
  echo "$! $name" >>"$pidfile"
  disown  # The nemesis kills it later: no job notice from this shell.
}
log() { echo "$(date +%T.%3N) $*" >>"$data/nemesis.log"; }

# --netns: each process' address and host-side link (scripts/cluster.sh --netns).
ip_of() {
  case $1 in
    zookeeper) echo 10.77.0.2 ;;
    store-*) echo "10.77.0.$((10 + ${1#store-}))" ;;
    proxy-*) echo "10.77.0.$((20 + ${1#proxy-}))" ;;
  esac
}
link_of() { local link="$prefix-$1"; echo "${link:0:15}"; }
cut_link() { ip link set "$(link_of "$1")" down; }
mend_link() { ip link set "$(link_of "$1")" up; }
# No route from `from` to `to` (a one-way partition: what `to` sends still arrives).
blackhole() { ip -n "$prefix-$1" route add blackhole "$(ip_of "$2")/32"; }
unblackhole() { ip -n "$prefix-$1" route del blackhole "$(ip_of "$2")/32" 2>/dev/null || true; }
heal_links() {
  $netns || return 0
  local a b
  for a in zookeeper store-0 store-1 store-2 store-3 proxy-0 proxy-1; do
    ip link set "$(link_of "$a")" up 2>/dev/null || true
    for b in zookeeper store-0 store-1 store-2 store-3 proxy-0 proxy-1; do
      [ "$a" = "$b" ] || unblackhole "$a" "$b"
    done
  done
}

# A byte flipped in a segment of a sealed ledger of `store`, inside its batches; logged. Ledgers
# roll often here and most hold one segment: any ledger but the four written last (one per
# partition of the two topics) is taken as sealed.
flip_byte() {
  local store=$1 sealed=() dir dirs
  mapfile -t dirs < <(ls -dt "$data/$store"/ledgers/*/ 2>/dev/null | tail -n +5)
  for dir in "${dirs[@]}"; do
    sealed+=("$dir"*.seg)
  done
  [ ${#sealed[@]} -gt 0 ] && [ -e "${sealed[0]}" ] || { log "no sealed segment on $store yet"; return 0; }
  local file=${sealed[RANDOM % ${#sealed[@]}]} offset
  offset=$(python3 -c 'import sys
data = open(sys.argv[1], "rb").read()
end = len(data.rstrip(b"\0"))
if end <= 64: print(-1); sys.exit()
at = 64 + int(sys.argv[2]) % (end - 64)
with open(sys.argv[1], "r+b") as f:
    f.seek(at); f.write(bytes([data[at] ^ 0x5a]))
print(at)' "$file" "$((RANDOM * 32768 + RANDOM))")
  [ "$offset" -ge 0 ] || { log "no batches in ${file#"$data"/} to damage"; return 0; }
  log "flipped the byte at $offset of ${file#"$data"/}"
}

# The tail of the last segment of one of `store`'s ledgers cut off, as a crash loses writes that
# were never synced: the node is killed, the file truncated up to 4 KiB before its last non-zero
# byte (segments are preallocated with zeros; the header stays), and the node restarted; logged.
truncate_tail() {
  local store=$1 last=() dir segs pid
  for dir in "$data/$store"/ledgers/*/; do
    mapfile -t segs < <(ls "$dir"*.seg 2>/dev/null | sort)
    [ ${#segs[@]} -ge 1 ] && last+=("${segs[-1]}")
  done
  [ ${#last[@]} -gt 0 ] || { log "no segment on $store yet"; return 0; }
  local file=${last[RANDOM % ${#last[@]}]} cut=$((1 + RANDOM % 4096))
  pid=$(pid_of "$store")
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  local at
  at=$(python3 -c 'import os, sys
data = open(sys.argv[1], "rb").read()
end = len(data.rstrip(b"\0"))
at = max(64, end - int(sys.argv[2]))  # the segment header (docs/storage.md) is synced first
os.truncate(sys.argv[1], at)
print(at)' "$file" "$cut")
  log "kill -KILL $store ($pid), truncated ${file#"$data"/} at $at ($cut bytes before its last non-zero byte)"
  restart "$store"
  log "restarted $store ($(pid_of "$store"))"
}

RANDOM=$seed
victims=(store-0 store-1 store-2 store-3 proxy-0 proxy-1 zookeeper)
damaged_store=store-$((seed % 4))  # the one node whose files are damaged
nemesis() {
  # The kinds: 0 kill, 1 stop, 2 damage; with --netns also 3-6, the links.
  local end=$((SECONDS + seconds - 3)) kind_count=3 n=${#victims[@]}
  $netns && kind_count=7
  sleep 2
  while [ $SECONDS -lt $end ]; do
    local index=$((RANDOM % n)) pid
    local victim=${victims[index]}
    local other=${victims[(index + 1 + RANDOM % (n - 1)) % n]}
    local pause=$((1 + RANDOM % 3))
    pid=$(pid_of "$victim")
    case $((RANDOM % kind_count)) in
      0)
        log "kill -KILL $victim ($pid)"
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
        sleep "0.$((RANDOM % 10))"
        restart "$victim"
        log "restarted $victim ($(pid_of "$victim"))" ;;
      1)
        log "kill -STOP $victim ($pid) for ${pause} s"
        kill -STOP "$pid" 2>/dev/null || true
        sleep "$pause"
        kill -CONT "$pid" 2>/dev/null || true
        log "kill -CONT $victim ($pid)" ;;
      2) if [ $((RANDOM % 2)) -eq 0 ]; then flip_byte "$damaged_store"; else truncate_tail "$damaged_store"; fi ;;
      3)
        log "link of $victim down for ${pause} s"
        cut_link "$victim"; sleep "$pause"; mend_link "$victim"
        log "link of $victim up" ;;
      4)
        local second=store-$(( (${damaged_store#store-} + 1 + RANDOM % 3) % 4 ))
        log "links of $damaged_store and $second down for ${pause} s (a minority of store nodes)"
        cut_link "$damaged_store"; cut_link "$second"; sleep "$pause"
        mend_link "$damaged_store"; mend_link "$second"
        log "links of $damaged_store and $second up" ;;
      5)
        log "one way: nothing from $victim reaches $other for ${pause} s"
        blackhole "$victim" "$other"; sleep "$pause"; unblackhole "$victim" "$other"
        log "one way: $victim reaches $other again" ;;
      6)
        local owner=proxy-$((RANDOM % 2))
        log "$owner and ZooKeeper cut from each other for ${pause} s"
        blackhole "$owner" zookeeper; blackhole zookeeper "$owner"; sleep "$pause"
        unblackhole "$owner" zookeeper; unblackhole zookeeper "$owner"
        log "$owner and ZooKeeper joined again" ;;
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
# Healed: every link up, every process runs, then one reader reads everything.
heal_links
while read -r pid name _; do kill -CONT "$pid" 2>/dev/null || true; done <"$pidfile"
for name in zookeeper store-0 store-1 store-2 store-3 proxy-0 proxy-1; do
  kill -0 "$(pid_of "$name")" 2>/dev/null || log "healed, but $name ($(pid_of "$name")) is not running"
done
"$client" --proxy "$proxies" --history "$data/history-final" --name final \
  --topics fault-x,fault-y --final-read 2>"$data/client-final.log" ||
  echo "cluster_fault: the final read fell short: $(tail -1 "$data/client-final.log")" >&2
minutes=$(awk -v s=$((SECONDS - start)) 'BEGIN { printf "%.1f", s / 60 }')
injected=$(grep -c -e "kill -KILL" -e "kill -STOP" -e "flipped" -e " down for " -e "one way:.*for" \
  -e "cut from each other" "$data/nemesis.log" 2>/dev/null || true)
echo "cluster_fault: ${injected:-0} faults injected (nemesis log: $data/nemesis.log)"
checked=0
"$check" --seed "$seed" --minutes "$minutes" "$data"/history-* || checked=$?
finish
if [ $checked -eq 0 ] && ! $keep; then rm -rf "$data"; fi
exit $checked
