#!/usr/bin/env bash
# Measures auto re-replication: a cluster on this machine (scripts/cluster.sh: ZooKeeper, 4 store
# nodes, 2 proxies, E=3 Qw=3 Qa=2) is filled with GIB GiB of 1000-byte messages on a 4-partition
# topic; a producer at RATE messages/s is measured for 20 s; then one store node is killed
# (SIGKILL) for good and the same producer is measured again, in 10-second windows, while the
# other nodes copy that node's ledgers, until `cairn cluster status` reports every ledger back
# to its write quorum (at most 30 minutes). Prints, as key=value lines:
#
#   data_on_node_bytes   what the killed node held (its data directory)
#   copied_bytes         what the workers copied (from their logs)
#   heal_s               from the kill until nothing is under-replicated or missing, and
#   copy_s               the same less the delay before ledgers are marked
#   copy_mib_per_s       copied_bytes / copy_s
#   before_msgs_per_s, before_p99_us       the producer without the failure, then
#   during_msgs_per_s, during_p99_us       each 10-second window while copying (and medians)
#
#   scripts/perf_rereplication.sh [--gib G] [--rate R] [--delay-ms MS] [--rate-mib M] [--keep]
#                                 [DIRECTORY]
#
# Defaults: 2 GiB, 20000 messages/s (20 MB/s), a 5 s delay (--autorecovery-delay-ms), 50 MiB/s
# per worker. The cluster, its
# data and logs are under DIRECTORY (default: a new temporary directory), removed at the end
# unless --keep. Everything shares this machine's cores and disk with the copies.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }

gib=2
rate=20000
delay_ms=5000
rate_mib=50
keep=false
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --gib) gib=${2:?--gib needs a number}; shift 2 ;;
    --delay-ms) delay_ms=${2:?--delay-ms needs a number}; shift 2 ;;
    --rate) rate=${2:?--rate needs a number}; shift 2 ;;
    --rate-mib) rate_mib=${2:?--rate-mib needs a number}; shift 2 ;;
    --keep) keep=true; shift ;;
    -*) echo "perf_rereplication: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
for n in "$gib" "$rate" "$delay_ms" "$rate_mib"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "perf_rereplication: '$n' is not a whole number" >&2; exit 2; }
done
data=${1:-$(mktemp -d /tmp/cairn-rereplication.XXXXXX)}
mkdir -p "$data"

export CAIRN_ZK_PORT=${CAIRN_ZK_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
export CAIRN_STORE_ARGS="--autorecovery-delay-ms $delay_ms --autorecovery-rate-mib $rate_mib --autorecovery-interval-ms 1000"
"$root/scripts/cluster.sh" --stores 4 "$data" >"$data/cluster.out"
cleanup() {
  "$root/scripts/cluster.sh" --stop "$data" >/dev/null 2>&1 || true
  $keep || rm -rf "$data"
}
trap cleanup EXIT
cairn=$root/build/net/cli/cairn
proxy=127.0.0.1:7120,127.0.0.1:7121
zk=zk://127.0.0.1:$CAIRN_ZK_PORT/cairn
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

"$cairn" topics create perf-rr --partitions 4 --proxy "$proxy" >/dev/null
messages=$((gib * 1024 * 1024 * 1024 / 1000))
echo "perf_rereplication: filling with $gib GiB ($messages messages of 1000 bytes)" >&2
"$cairn" perf produce perf-rr --size 1000 --messages "$messages" --proxy "$proxy" --json >"$data/fill.json"
echo "fill_msgs_per_s=$(field append_msgs_per_s <"$data/fill.json")"
"$cairn" perf produce perf-rr --size 1000 --rate "$rate" --duration 20 --proxy "$proxy" --json \
  >"$data/before.json"
echo "before_msgs_per_s=$(field append_msgs_per_s <"$data/before.json")"
echo "before_p99_us=$(field p99_us <"$data/before.json")"

victim=store-1
victim_pid=$(awk -v name="$victim" '$2 == name { pid = $1 } END { print pid }' "$data/pids")
echo "data_on_node_bytes=$(du -sb "$data/$victim" | cut -f1)"
kill -KILL "$victim_pid"
killed=$(date +%s.%N)
echo "perf_rereplication: $victim killed; copying its ledgers" >&2

# The producer in 10-second windows, until the cluster is healed (or 30 minutes).
: >"$data/during.txt"
(
  for _ in $(seq 1 180); do
    [ -e "$data/healed" ] && break
    "$cairn" perf produce perf-rr --size 1000 --rate "$rate" --duration 10 --proxy "$proxy" \
      --json 2>/dev/null | python3 -c 'import json,sys; r = json.load(sys.stdin); print(r["append_msgs_per_s"], r["p99_us"])' \
      >>"$data/during.txt" || true
  done
) &
producer=$!
# Healed: the node's registration gone (its session expires first), then nothing under-replicated
# or missing.
victim_address=127.0.0.1:7111
healed=""
for _ in $(seq 1 1800); do
  if "$cairn" cluster status --metadata "$zk" >"$data/status.txt" 2>&1 &&
    grep -q "not registered" "$data/seen-missing" 2>/dev/null; then
    healed=$(date +%s.%N)
    break
  fi
  grep -A1 "not registered" "$data/status.txt" | grep -q "$victim_address" &&
    echo "not registered" >"$data/seen-missing"
  sleep 1
done
touch "$data/healed"
wait "$producer" || true
[ -n "$healed" ] || { cat "$data/status.txt" >&2; echo "perf_rereplication: not healed within 30 minutes" >&2; exit 1; }

copied=$(cat "$data"/store-*.log | { grep -o 'batches, [0-9]* bytes in' || true; } | awk '{ s += $2 } END { print s + 0 }')
awk -v k="$killed" -v h="$healed" -v d="$delay_ms" -v c="$copied" 'BEGIN {
  heal = h - k; copy = heal - d / 1000
  printf "copied_bytes=%.0f\nheal_s=%.1f\ncopy_s=%.1f\ncopy_mib_per_s=%.1f\n", c, heal, copy, c / 1048576 / copy
}'
echo "during_msgs_per_s=$(cut -d' ' -f1 "$data/during.txt" | paste -sd,)"
echo "during_p99_us=$(cut -d' ' -f2 "$data/during.txt" | paste -sd,)"
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "during_median_msgs_per_s=$(cut -d' ' -f1 "$data/during.txt" | median)"
echo "during_median_p99_us=$(cut -d' ' -f2 "$data/during.txt" | median)"
