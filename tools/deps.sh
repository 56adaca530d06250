#!/bin/sh
# deps.sh [PACKAGE...]: installs the Debian packages the build and tests need, only those missing.
# Quiet and idempotent; waits for a busy dpkg lock instead of failing.
# //tests/deps:deps_test fails when the tree uses a package this list lacks (docs/dependencies.md).
set -eu
PACKAGES="bazel-bootstrap libuv1-dev libxxhash-dev libsodium-dev libssl-dev libnetfilter-queue-dev gcc g++ clang libclang-rt-14-dev pkg-config
  make mingw-w64 wine cmake patch autoconf automake libtool python3-matplotlib iproute2 iptables procps bsdextrautils gdb
  python3-numpy python3-torch python3-cffi python3-pytest python3-sklearn
  python3-pip python3-setuptools python3-wheel"
[ $# -gt 0 ] && PACKAGES="$*"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -qq -o DPkg::Lock::Timeout=600 update
# shellcheck disable=SC2086
$SUDO apt-get -qq -y -o DPkg::Lock::Timeout=600 install --no-install-recommends $missing >/dev/null
