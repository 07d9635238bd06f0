#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a bounded time,
# starting from the checked-in seed corpus. New interesting inputs go to build-fuzz/corpus/,
# not to the checked-in corpus; crashes are written to build-fuzz/artifacts/.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 60 s, every target)
#
# Each target's line 'fuzzed T: real R user U sys S' gives the wall-clock and CPU time it ran.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
case "$seconds" in -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
"$root/scripts/setup.sh" --fuzz
build="$root/build-fuzz"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCAIRN_FUZZ=ON -DCAIRN_BUILD_NET=OFF -DCAIRN_BUILD_BENCH=OFF -DCAIRN_BUILD_EXAMPLES=OFF \
  -DCAIRN_SANITIZE=address,undefined >/dev/null
targets=(batch_decoder ack_set_decoder metadata_decoder index_decoder segment_scanner
  topic_record_decoder)
if [ $# -gt 1 ]; then targets=("${@:2}"); fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/%/_fuzz}"
mkdir -p "$build/artifacts"
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  echo "fuzzing $t for ${seconds}s"
  TIMEFORMAT="fuzzed $t: real %R user %U sys %S"
  time "$build/test/${t}_fuzz" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/" "$build/corpus/$t" "$root/test/fuzz/corpus/$t"
done
