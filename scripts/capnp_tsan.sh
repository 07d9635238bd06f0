#!/usr/bin/env bash
# Builds Cap'n Proto's libraries with ThreadSanitizer into PREFIX, for the ThreadSanitizer test
# build (scripts/test.sh --tsan). Idempotent: a finished PREFIX is left alone.
#
#   scripts/capnp_tsan.sh PREFIX
#
# Why: ThreadSanitizer only sees the synchronisation of code it instrumented. Debian's libkj
# hands values between threads (kj::Executor, cross-thread fulfillers) with its own futex-based
# mutex, so tests linked against it report races that are not there, and the network shell could
# not be checked at all. The sources are Debian's own (the .orig tarball of the installed
# libcapnp-dev, from the archive apt uses, checked against its SHA-256), built with the same
# compiler and options, so the headers the rest of the build includes are the ones compiled here.
set -euo pipefail

if [ $# -ne 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -eq 1 ] && exit 0 || exit 2
fi
prefix=$(realpath -m "$1")

# The version Debian 12 ships, and the checksum of its upstream tarball in the archive.
version=0.9.2
sha256=4031e9c9158fce1979baf3c5234315c1be74b273c0be9f6c4aaf4d0dfda52542

installed=$(dpkg-query -W -f='${Version}' libcapnp-dev 2>/dev/null || true)
if [ "${installed%%-*}" != "$version" ]; then
  echo "capnp_tsan.sh: libcapnp-dev ${installed:-(not installed)} is installed; this script" \
       "builds $version (update its version and checksum to match)" >&2
  exit 1
fi
# Raised when the patch below or the build's options change, so that a PREFIX built before is
# built again (2: with OpenSSL, for kj's TLS).
patch_level=2
stamp="$prefix/.cairn-tsan-$version-p$patch_level"
if [ -e "$stamp" ]; then
  exit 0
fi

# The archive apt uses: the first Debian URI of the configured sources, else the default one.
mirror=$(grep -hoE '^(URIs:|deb)[[:space:]]+https?://[^[:space:]]+/debian/?([[:space:]]|$)' \
           /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
         awk '{print $2}' | sed 's:/*$::' | head -n 1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
tarball="capnproto_$version.orig.tar.gz"
work="$prefix.work"
rm -rf "$work"
mkdir -p "$work"
echo "capnp_tsan.sh: fetching $mirror/pool/main/c/capnproto/$tarball" >&2
# apt-helper goes through apt's own transport and proxy settings, and checks the hash.
/usr/lib/apt/apt-helper download-file "$mirror/pool/main/c/capnproto/$tarball" \
  "$work/$tarball" "SHA256:$sha256" >&2
tar -xzf "$work/$tarball" -C "$work"

# One fix to KJ's memory ordering, as later Cap'n Proto releases have it. A cross-thread promise
# dropped before its fulfiller ran is cancelled with a compare-and-swap that only acquires; the
# fulfiller thread then sees the cancellation and deletes the promise, and ThreadSanitizer
# rightly reports that delete as racing with what the dropping thread did to the promise just
# before (a formal race: on x86-64 the exchange is a locked instruction and a full barrier). The
# swap is made acquire-release. Without it, any test whose daemon drops a blocking call's
# promise (a proxy shutting down while its store-node check runs) fails now and then.
async="$work/capnproto-c++-$version/src/kj/async.c++"
perl -0pi -e 's/(&oldState, CANCELED, false,\s*)__ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE/${1}__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE/' \
  "$async"
if ! grep -q '__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE' "$async"; then
  echo "capnp_tsan.sh: the cancellation of cross-thread promises in $async is not where" \
       "this script expects it; the patch did not apply" >&2
  exit 1
fi

echo "capnp_tsan.sh: building Cap'n Proto $version with ThreadSanitizer into $prefix" >&2
cmake -S "$work/capnproto-c++-$version" -B "$work/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS=-fsanitize=thread -DCMAKE_CXX_FLAGS=-fsanitize=thread \
  -DBUILD_TESTING=OFF -DEXTERNAL_CAPNP=ON -DWITH_OPENSSL=ON -DWITH_ZLIB=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" >"$work/build.log" 2>&1 &&
  cmake --build "$work/build" -j "$(nproc)" >>"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log" >&2
  echo "capnp_tsan.sh: the build failed (log: $work/build.log)" >&2
  exit 1
}
rm -rf "$prefix"
cmake --install "$work/build" >"$work/install.log" 2>&1 || {
  tail -n 20 "$work/install.log" >&2
  exit 1
}
rm -rf "$work"
touch "$stamp"
