#!/usr/bin/env bash
# Installs the Debian packages cairn needs to build and test. Idempotent: packages that are
# already installed are left alone. As root it runs apt-get itself; otherwise it prints the
# exact command to run and fails.
#
#   scripts/setup.sh            build + test dependencies
#   scripts/setup.sh --fuzz     also clang and its runtime (libFuzzer, sanitizers)
#   scripts/setup.sh --clang    also clang (Debian 12's clang 14), for the thread-safety build
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libabsl-dev liburing-dev libxxhash-dev
  capnproto libcapnp-dev
  catch2 libbenchmark-dev
  libzookeeper-mt-dev  # the ZooKeeper metadata store's client (cairn::zookeeper)
  zookeeper            # the server its tests start (with a Java runtime)
  iproute2             # `ip`: the cluster fault test's network namespaces and partitions
  openssl              # scripts/make_test_certs.sh, for the TLS tests
  libjwt-dev           # signed tokens (net/auth/token.h)
)
for arg in "$@"; do
  case "$arg" in
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    --clang) packages+=(clang) ;;
    -h|--help)
      sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
      exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: missing packages: ${missing[*]}" >&2
  echo "setup.sh: run as root:  apt-get update && $cmd" >&2
  exit 1
fi

echo "setup.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
