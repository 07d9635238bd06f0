#!/usr/bin/env bash
# Installs cairn into a scratch prefix and builds examples/ against the installed copy, as a
# separate project would (find_package(cairn), target cairn::cairn), then runs the quickstart.
# `client` builds the network shell too, and runs the installed client example (cairn::net_client)
# against the installed cairnd standalone. With BUILD_DIR (a finished build of the tree with the
# network shell, static), that build is installed instead of a new one being made.
#
#   install_test.sh SOURCE_DIR WORK_DIR static|shared|client [BUILD_DIR]
set -euo pipefail
src=$1 work=$2 kind=$3 built=${4:-}
net=OFF
case "$kind" in
  static) shared=OFF ;;
  shared) shared=ON ;;
  client) shared=OFF net=ON ;;
  *) echo "install_test.sh: kind must be static, shared or client, not '$kind'" >&2; exit 2 ;;
esac
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

rm -rf "$work"
mkdir -p "$work"
if [ -n "$built" ]; then
  cmake --install "$built" --prefix "$work/prefix" >"$work/install.log"
else
  cmake -S "$src" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=$shared -DCAIRN_BUILD_TESTS=OFF -DCAIRN_BUILD_BENCH=OFF \
    -DCAIRN_BUILD_EXAMPLES=OFF -DCAIRN_BUILD_NET=$net >"$work/configure.log"
  cmake --build "$work/build" >"$work/build.log"
  cmake --install "$work/build" --prefix "$work/prefix" >"$work/install.log"
fi

test -f "$work/prefix/include/cairn/io.h"
libname=libcairn.a
[ "$kind" = shared ] && libname=libcairn.so
if ! find "$work/prefix" -name "$libname" | grep -q .; then
  echo "install_test.sh: $libname not installed under $work/prefix" >&2; exit 1
fi
if ! find "$work/prefix" -name cairnConfig.cmake | grep -q .; then
  echo "install_test.sh: no cairnConfig.cmake under $work/prefix" >&2; exit 1
fi

# The consumer knows nothing of the source tree: only the prefix.
cmake -S "$src/examples" -B "$work/examples" "${generator[@]}" \
  -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/examples-configure.log"
cmake --build "$work/examples" >"$work/examples-build.log"
if [ "$kind" = shared ]; then
  # The example must load the installed shared library.
  # ldd's whole output first: `ldd | grep -q` fails under pipefail when grep stops reading
  # early and ldd dies of SIGPIPE.
  loaded=$(ldd "$work/examples/quickstart")
  if ! grep -q "$work/prefix/.*libcairn.so" <<<"$loaded"; then
    echo "install_test.sh: quickstart does not load the installed libcairn.so:" >&2
    echo "$loaded" >&2
    exit 1
  fi
fi
"$work/examples/quickstart" "$work/data" >"$work/quickstart.out"
grep -q "checksum ok" "$work/quickstart.out"
if [ "$kind" = client ]; then
  test -f "$work/prefix/include/cairn/net/client.h"
  test -x "$work/prefix/bin/cairnd"
  "$work/prefix/bin/cairnd" standalone --data-dir "$work/standalone" --listen 127.0.0.1:0 \
    --metrics-listen none 2>"$work/standalone.log" &
  pid=$!
  trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
  address=""
  for _ in $(seq 1 100); do
    address=$(sed -n 's/.*proxy listening on \([0-9.]*:[0-9]*\).*/\1/p' "$work/standalone.log")
    [ -n "$address" ] && break
    sleep 0.1
  done
  [ -n "$address" ] || { cat "$work/standalone.log" >&2; exit 1; }
  "$work/examples/hello_topic" "$address" >"$work/hello_topic.out"
  grep -q "received cairn" "$work/hello_topic.out"
fi
echo "install test ($kind): OK"
