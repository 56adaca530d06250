#!/bin/sh
# merge_archives.sh OUT.a IN.a|IN.lo ...: one static archive holding every object of the inputs.
# Bazel makes one archive per cc_library; users want a single libpccl.a.
set -eu
out=$1; shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
for a in "$@"; do
    i=$((i + 1))
    mkdir "$tmp/$i"
    (cd "$tmp/$i" && ar x "$OLDPWD/$a")
    # Prefix with the archive's index so that equal object names from two archives both survive.
    for o in "$tmp/$i"/*.o; do
        [ -e "$o" ] && mv "$o" "$tmp/$i/$(basename "$o" .o).$i.o"
    done
done
rm -f "$out"
ar rcs "$out" "$tmp"/*/*.o
