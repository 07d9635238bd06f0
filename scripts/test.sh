#!/usr/bin/env bash
# Builds cairn and runs the whole test suite. Installs missing Debian packages first.
#
#   scripts/test.sh              optimized build in build/, every test, then the reliability
#                                suite at its required size (scripts/reliability.sh: >= 10,000
#                                crash states, >= 200 SIGKILL cycles; a few minutes) and a short
#                                run of the cluster under faults (scripts/cluster_fault.sh,
#                                60 s of faults, seed 1; with --netns as root, else on loopback)
#   scripts/test.sh --sanitize   AddressSanitizer + UndefinedBehaviorSanitizer build in
#                                build-asan/, every test but the install tests
#   scripts/test.sh --tsan       ThreadSanitizer build in build-tsan/, every test but the install
#                                tests, linked against a Cap'n Proto built with ThreadSanitizer
#                                (scripts/capnp_tsan.sh, into build-tsan/deps/)
#   scripts/test.sh --long       as the first, with the long reliability run (2 to 3 hours)
#   scripts/test.sh --thread-safety
#                                compiles the product (library, network shell, daemons, cairn;
#                                no tests, examples or benchmarks, which hold no lock
#                                annotations) with clang into build-clang/, with clang's
#                                -Wthread-safety lock-annotation analysis and every warning an
#                                error; runs no test
#
# Extra arguments after -- go to ctest (e.g. -- -R fault); the reliability suite then does not run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=release
reliability=(scripts/reliability.sh)
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) mode=asan ;;
    --tsan) mode=tsan ;;
    --long) reliability+=(--long) ;;
    --thread-safety) mode=thread-safety ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; ctest_args=("$@"); reliability=(); break ;;
    *) echo "test.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$mode" = thread-safety ]; then
  "$root/scripts/setup.sh" --clang
else
  "$root/scripts/setup.sh"
fi

jobs=$(nproc)
common=(-G Ninja -DCAIRN_WERROR=ON)
# Sanitizer builds keep line tables (what their reports print) but no full debug information,
# which costs compile and link time and is of no use to a report.
sanitizer_debug=(-DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1)
case "$mode" in
  release)
    build="$root/build"
    # The configuration scripts/run.sh uses too, so that neither rebuilds what the other built.
    "$root/scripts/configure.sh" "$build" ;;
  asan)
    build="$root/build-asan"
    cmake -S "$root" -B "$build" "${common[@]}" -DCMAKE_BUILD_TYPE=Debug "${sanitizer_debug[@]}" \
      -DCAIRN_SANITIZE=address,undefined -DCAIRN_BUILD_BENCH=OFF
    ctest_args=(-LE install "${ctest_args[@]}") ;;
  tsan)
    build="$root/build-tsan"
    capnp="$build/deps/capnproto-tsan"
    "$root/scripts/capnp_tsan.sh" "$capnp"
    cmake -S "$root" -B "$build" "${common[@]}" -DCMAKE_BUILD_TYPE=Debug "${sanitizer_debug[@]}" \
      -DCAIRN_SANITIZE=thread -DCAIRN_BUILD_BENCH=OFF -DCAIRN_BUILD_NET=ON \
      -DCMAKE_PREFIX_PATH="$capnp" -DCapnProto_DIR="$capnp/lib/cmake/CapnProto"
    # The replication simulation runs in one thread: nothing for ThreadSanitizer to check.
    ctest_args=(-LE "install|sim" "${ctest_args[@]}") ;;
  thread-safety)
    # Only compiled: the analysis is the check. No optimization and no debug information, which
    # nothing here would use, keep this CI step short.
    build="$root/build-clang"
    CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${common[@]}" -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_C_FLAGS_DEBUG=-O0 -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCAIRN_THREAD_SAFETY=ON \
      -DCAIRN_BUILD_BENCH=OFF -DCAIRN_BUILD_TESTS=OFF -DCAIRN_BUILD_EXAMPLES=OFF ;;
esac

cmake --build "$build" -j "$jobs"
if [ "$mode" = thread-safety ]; then
  echo "test.sh: the tree compiles with clang's -Wthread-safety and -Werror ($build)"
  exit 0
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-suppressions=$root/test/tsan_suppressions.txt}
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$jobs" "${ctest_args[@]}"
if [ "$mode" = release ] && [ ${#reliability[@]} -gt 0 ]; then
  "$root/${reliability[0]}" "${reliability[@]:1}" "$build"
  # Each process in a network namespace of its own, so that the nemesis cuts links too, where
  # this machine lets us make namespaces (root); on loopback otherwise, and said so.
  probe=cairn-probe-$$
  if [ "$(id -u)" -eq 0 ] && ip netns add "$probe" 2>/dev/null; then
    ip netns del "$probe"
    "$root/scripts/cluster_fault.sh" --netns --seconds 60 --seed 1
  else
    echo "test.sh: cannot make network namespaces here (needs root): the cluster fault run" \
      "goes on loopback, without partitions"
    "$root/scripts/cluster_fault.sh" --seconds 60 --seed 1
  fi
fi
