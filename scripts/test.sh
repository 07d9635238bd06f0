#!/usr/bin/env bash
# Builds cairn and runs the whole test suite. Installs missing Debian packages first.
#
#   scripts/test.sh              optimized build in build/, every test
#   scripts/test.sh --sanitize   AddressSanitizer + UndefinedBehaviorSanitizer build in
#                                build-asan/, every test but the install tests
#   scripts/test.sh --tsan       ThreadSanitizer build in build-tsan/, the concurrency tests
#
# Extra arguments after -- go to ctest (e.g. -- -R fault).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=release
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) mode=asan ;;
    --tsan) mode=tsan ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "test.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

"$root/scripts/setup.sh"

jobs=$(nproc)
common=(-G Ninja -DCAIRN_WERROR=ON)
case "$mode" in
  release)
    build="$root/build"
    cmake -S "$root" -B "$build" "${common[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo ;;
  asan)
    build="$root/build-asan"
    cmake -S "$root" -B "$build" "${common[@]}" -DCMAKE_BUILD_TYPE=Debug \
      -DCAIRN_SANITIZE=address,undefined -DCAIRN_BUILD_BENCH=OFF
    ctest_args=(-LE install "${ctest_args[@]}") ;;
  tsan)
    build="$root/build-tsan"
    cmake -S "$root" -B "$build" "${common[@]}" -DCMAKE_BUILD_TYPE=Debug \
      -DCAIRN_SANITIZE=thread -DCAIRN_BUILD_BENCH=OFF -DCAIRN_BUILD_NET=OFF
    ctest_args=(-L concurrency "${ctest_args[@]}") ;;
esac

cmake --build "$build" -j "$jobs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$jobs" "${ctest_args[@]}"
