#!/bin/sh
# extract.sh LANG README OUT: writes to OUT the fenced code block that follows the line
# "<!-- example:LANG -->" in README. Fails unless there is exactly one such marker and a fence
# opens on the very next line.
set -eu
lang=$1 readme=$2 out=$3
awk -v marker="<!-- example:$lang -->" '
    state == 0 && $0 == marker { state = 1; markers++; next }
    state == 0 { next }
    state == 1 { if ($0 !~ /^```/) { bad = 1; exit } state = 2; next }
    state == 2 && /^```[ \t]*$/ { state = 0; blocks++; next }
    state == 2 { print }
    END { if (bad || markers != 1 || blocks != 1) exit 1 }
' "$readme" > "$out" || {
    echo "extract.sh: no single \"<!-- example:$lang -->\" followed by a fenced block in $readme" >&2
    exit 1
}
