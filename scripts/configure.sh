#!/usr/bin/env bash
# Configures the optimized build that scripts/run.sh and scripts/test.sh share (build/ by
# default). Both configure it through this script, with the same generator, build type and
# options: CMake recompiles everything when a flag changes, so any difference between the two
# would make the second command rebuild the whole tree instead of reusing the first's work.
# Warnings are errors here as in CI (the supported toolchain, Debian 12's GCC, builds the tree
# without any).
#
#   scripts/configure.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
# Optimized, with line tables only (-g1: what backtraces and profilers' source lines need);
# full debug information costs a fifth more compile time.
cmake -S "$root" -B "${1:-$root/build}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCAIRN_WERROR=ON
