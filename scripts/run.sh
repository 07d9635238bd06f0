#!/usr/bin/env bash
# Builds cairn and runs the main job. Installs missing Debian packages first.
#
# Until the network shell exists, the main job is the embedded quickstart: it appends batches
# of entries through the library, syncs them, reads them back verifying every checksum, and
# prints what it did.
#
#   scripts/run.sh [DIRECTORY]   data goes to DIRECTORY (default: build/quickstart-data)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
"$root/scripts/setup.sh"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" -j "$(nproc)" --target quickstart
exec "$root/build/examples/quickstart" "${1:-$root/build/quickstart-data}"
