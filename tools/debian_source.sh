#!/bin/sh
# debian_source.sh CACHE PACKAGE NAME: Debian's source package PACKAGE (the version the Linux
# build uses), fetched once through apt with a private deb-src list (later runs are offline),
# unpacked fresh into CACHE/NAME-build with Debian's patches applied; prints the source tree's
# path. For the mingw builds of tools/win_libuv.sh and tools/win_libsodium.sh: Debian ships no
# mingw libuv or libsodium. The source never enters the tree.
set -eu
cache=$1 package=$2 name=$3
src="$cache/$name-src"
if ! ls "$src/${package}"_*.orig.tar.* >/dev/null 2>&1; then
    # A private apt state (lists, cache, sources) under the cache: the system's lists stay untouched.
    apt="$cache/apt"
    mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$src"
    suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
    echo "deb-src http://deb.debian.org/debian $suite main" > "$apt/sources.list"
    set -- -o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt" -o APT::Sandbox::User=root
    echo "debian_source: fetching Debian's $package source package (once)" >&2
    ls "$apt/lists"/*Sources* >/dev/null 2>&1 || apt-get -qq "$@" update >&2
    (cd "$src" && apt-get -qq "$@" source --download-only "$package" >&2) ||
        { apt-get -qq "$@" update >&2 && (cd "$src" && apt-get -qq "$@" source --download-only "$package" >&2); }
fi

work="$cache/$name-build"
rm -rf "$work"
mkdir -p "$work"
tar -xf "$(ls "$src/${package}"_*.orig.tar.* | head -n1)" -C "$work"
tree=$(ls -d "$work/$name"*/ | head -n1)
tree=${tree%/}
tar -xf "$(ls "$src/${package}"_*.debian.tar.* | head -n1)" -C "$tree"
if [ -f "$tree/debian/patches/series" ]; then
    grep -v '^#' "$tree/debian/patches/series" | while read -r p; do
        [ -n "$p" ] && patch -s -d "$tree" -p1 < "$tree/debian/patches/$p" >&2
    done
fi
echo "$tree"
