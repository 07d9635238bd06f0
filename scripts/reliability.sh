#!/usr/bin/env bash
# Runs the reliability suite at its required size on an optimized build, and prints its figures:
# how many crash states (a simulated crash, then a reopen and a full check against the model of
# what was acknowledged) and real SIGKILL cycles ran, and the failed-fsync measurement. Fails if
# a test fails, if a step's test spec matches no test, or if a step or the total is short of its
# required figure. scripts/test.sh runs it after the unit tests; docs/reliability.md describes
# each part.
#
#   scripts/reliability.sh [--long] [BUILD_DIR]   (default build/, which must hold test/cairn_tests)
#
#   default   >= 10,000 crash states and >= 400 kills: a few minutes on two cores
#   --long    >= 1,000,000 crash states and >= 20,000 kills: 2 to 3 hours on two cores
#
# Each randomized step starts from a fresh seed, printed in its log (replay: CAIRN_TEST_SEED=...).
# Logs go to BUILD_DIR/reliability/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
long=false
build="$root/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --long) long=true ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "reliability.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
tests="$build/test/cairn_tests"
if [ ! -x "$tests" ]; then
  echo "reliability.sh: $tests not found; build first (scripts/test.sh builds it)" >&2
  exit 2
fi
logs="$build/reliability"
mkdir -p "$logs"

# Sizes: seeds per randomized crash test, kill cycles. Crash states per seed: ledger 8 (4 crashes,
# with and without a journal), stream 8, metadata about 7 (6 at least: a crash during recovery
# is not counted), failed fsync 2 (with and without a journal). Kills per cycle: 2 (with and
# without a journal; every cycle's child is still appending when it is killed).
if $long; then
  ledger_seeds=50000 stream_seeds=40000 metadata_seeds=45000 fsync_seeds=5000 kills=10000
  min_states=1000000
else
  ledger_seeds=1000 stream_seeds=300 metadata_seeds=400 fsync_seeds=200 kills=200
  min_states=10000
fi
min_kills=$((2 * kills))

# name|environment|test case|figure|the step's own minimum of that figure
# Each step must reach its own minimum, so that a step that ran nothing (or much less than its
# size) fails even when the others make up the total. The exhaustive enumerations have a fixed
# size (2,069 and 486 crash states today); their minimums are that, rounded down.
steps=(
  "ledger-crash|CAIRN_CRASH_SEEDS=$ledger_seeds|ledger crash: acknowledged data survives crashes (random seed)|crash_states|$((8 * ledger_seeds))"
  "ledger-exhaustive||[ledger][exhaustive]|crash_states|2000"
  "stream-exhaustive||[stream][exhaustive]|crash_states|450"
  "ledger-fsync|CAIRN_FSYNC_SEEDS=$fsync_seeds|[fsync]|crash_states|$((2 * fsync_seeds))"
  "stream-crash|CAIRN_CRASH_SEEDS=$stream_seeds|Streams survive crashes at random points|crash_states|$((8 * stream_seeds))"
  "metadata-crash|CAIRN_CRASH_SEEDS=$metadata_seeds|metadata crash: acknowledged mutations survive crashes (random seeds)|crash_states|$((6 * metadata_seeds))"
)
kill_step="kill|CAIRN_KILL_CYCLES=$kills|ledger kill: acknowledged appends survive SIGKILL|kills|$min_kills"

# `-w NoTests`: a spec that matches no test case fails (Catch2 2 exits 0 then, with nothing run).
run_step() {  # name env test-spec
  local name=$1 env=$2 spec=$3 start status
  start=$(date +%s)
  status=0
  # shellcheck disable=SC2086
  env $env "$tests" -w NoTests "$spec" >"$logs/$name.log" 2>&1 || status=$?
  echo "$name $status $(( $(date +%s) - start ))" >"$logs/$name.status"
}

start=$(date +%s)
rm -f "$logs"/*.log "$logs"/*.status
# The kill cycles mostly wait for the child; they run beside the CPU-bound crash steps.
IFS='|' read -r name env spec _ _ <<<"$kill_step"
run_step "$name" "$env" "$spec" &
kill_pid=$!
for step in "${steps[@]}"; do
  IFS='|' read -r name env spec _ _ <<<"$step"
  echo "reliability: $name ..."
  run_step "$name" "$env" "$spec"
done
echo "reliability: waiting for the kill cycles ..."
wait "$kill_pid"
elapsed=$(( $(date +%s) - start ))

# The sum of "<figure>=N" over the "figures:" lines of the given logs.
sum() {
  local figure=$1
  shift
  cat "$@" | awk -v figure="$figure" '/^figures:/ {
    for (i = 2; i <= NF; ++i) { split($i, kv, "="); if (kv[1] == figure) total += kv[2] } }
    END { print total + 0 }'
}

failed=0
printf '%-20s %8s %14s %8s\n' step seconds crash_states kills
for f in "$logs"/*.status; do
  read -r name status seconds <"$f"
  log="$logs/$name.log"
  printf '%-20s %8s %14s %8s\n' "$name" "$seconds" "$(sum crash_states "$log")" \
    "$(sum kills "$log")"
  if [ "$status" -ne 0 ]; then
    echo "reliability: $name FAILED (exit $status); its log: $log" >&2
    grep -E '^seed ' "$log" | head -3 >&2 || true
    failed=1
  fi
done
# Each step's own minimum.
for step in "$kill_step" "${steps[@]}"; do
  IFS='|' read -r name _ _ figure minimum <<<"$step"
  got=$(sum "$figure" "$logs/$name.log")
  if [ "$got" -lt "$minimum" ]; then
    echo "reliability: $name ran only $got $figure, $minimum required" >&2
    failed=1
  fi
done
states=$(sum crash_states "$logs"/*.log)
killed=$(sum kills "$logs"/*.log)
fsync_errors=$(sum injected_fsync_errors "$logs"/*.log)
covered=$(sum acked_appends_covered_by_failed_fsync "$logs"/*.log)
violations=$(sum violations "$logs"/*.log)
grep -h '^exhaustive ' "$logs/ledger-exhaustive.log" "$logs/stream-exhaustive.log" || true
grep -h '^violation: ' "$logs/stream-exhaustive.log" | head -3 || true
grep -h '^failed fsync ' "$logs/ledger-fsync.log" || true
echo "reliability: crash_states=$states kills=$killed injected_fsync_errors=$fsync_errors" \
  "acked_appends_covered_by_failed_fsync=$covered violations=$violations seconds=$elapsed"
if [ "$states" -lt "$min_states" ]; then
  echo "reliability: only $states crash states, $min_states required" >&2
  failed=1
fi
if [ "$killed" -lt "$min_kills" ]; then
  echo "reliability: only $killed kills, $min_kills required" >&2
  failed=1
fi
if [ "$covered" -ne 0 ]; then
  echo "reliability: acknowledged appends depended on a failed fsync" >&2
  failed=1
fi
if [ "$violations" -ne 0 ]; then
  echo "reliability: $violations crash states violated an invariant (see the 'violation:' lines)" >&2
  failed=1
fi
exit "$failed"
