#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a bounded time,
# starting from the checked-in seed corpus. New interesting inputs go to build-fuzz/corpus/,
# not to the checked-in corpus; crashes are written to build-fuzz/artifacts/.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 60 s, every target)
#
# Targets: the decoders' (batch_decoder ack_set_decoder metadata_decoder index_decoder
# segment_scanner topic_record_decoder), built without the network shell in build-fuzz/, and
# rpc_services (arbitrary bytes on a connection to the proxy and the store node, in process),
# built with it in build-fuzz-net/ (a longer build). Each target's line
# 'fuzzed T: real R user U sys S' gives the wall-clock and CPU time it ran.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
case "$seconds" in -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
"$root/scripts/setup.sh" --fuzz
targets=(batch_decoder ack_set_decoder metadata_decoder index_decoder segment_scanner
  topic_record_decoder rpc_services)
if [ $# -gt 1 ]; then targets=("${@:2}"); fi
# The build directory of a target: the network edge's needs the network shell.
build_of() { if [ "$1" = rpc_services ]; then echo "$root/build-fuzz-net"; else echo "$root/build-fuzz"; fi; }
for t in "${targets[@]}"; do
  build=$(build_of "$t")
  net=OFF
  if [ "$t" = rpc_services ]; then net=ON; fi
  if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCAIRN_FUZZ=ON -DCAIRN_BUILD_NET=$net -DCAIRN_BUILD_BENCH=OFF -DCAIRN_BUILD_EXAMPLES=OFF \
      -DCAIRN_SANITIZE=address,undefined >/dev/null
  fi
  cmake --build "$build" -j "$(nproc)" --target "${t}_fuzz"
done
for t in "${targets[@]}"; do
  build=$(build_of "$t")
  mkdir -p "$build/artifacts" "$build/corpus/$t"
  echo "fuzzing $t for ${seconds}s"
  TIMEFORMAT="fuzzed $t: real %R user %U sys %S"
  time "$build/test/${t}_fuzz" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/" "$build/corpus/$t" "$root/test/fuzz/corpus/$t"
done
