#!/usr/bin/env bash
# Builds cairn and runs the main job: `cairnd standalone` (a proxy, its store and its metadata in
# one process) on DIRECTORY, with a short demo against it (a topic created, three messages
# produced and consumed, the topic's stats), then keeps it serving on 127.0.0.1:7020 until
# Ctrl-C. Installs missing Debian packages first.
#
#   scripts/run.sh [--stop] [DIRECTORY]   data goes to DIRECTORY (default: build/standalone-data);
#                                         --stop ends after the demo
#   scripts/run.sh --quickstart           the embedded quickstart instead (no network)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
"$root/scripts/setup.sh"
# The same configuration as scripts/test.sh, so that either reuses what the other built.
"$root/scripts/configure.sh" "$root/build" >/dev/null
if [ "${1:-}" = "--quickstart" ]; then
  cmake --build "$root/build" -j "$(nproc)" --target quickstart
  exec "$root/build/examples/quickstart" "${2:-$root/build/quickstart-data}"
fi
stop=()
if [ "${1:-}" = "--stop" ]; then stop=(--stop); shift; fi
cmake --build "$root/build" -j "$(nproc)" --target cairnd cairn_cli
exec "$root/scripts/demo.sh" "${stop[@]}" "$root/build/net/cairnd" "$root/build/net/cli/cairn" \
  "${1:-$root/build/standalone-data}"
