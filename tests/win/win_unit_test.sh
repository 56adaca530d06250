#!/bin/sh
# win_unit_test.sh NAME: runs the unit test NAME as `make windows` cross-built it
# (build/win/tests/unit/NAME.exe, from tests/*/NAME.c) under wine: the library's code paths that
# need no Linux-only feature, compiled by mingw-w64 and run on Windows' CRT and threads.
# Skipped, with a line saying so, only where wine or mingw-w64 is missing.
set -u
name=$1
if ! command -v wine >/dev/null 2>&1 || ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1; then
    echo "SKIPPED: wine/mingw missing"
    exit 0
fi
here=$(readlink -f "$0")
root=${here%/tests/win/win_unit_test.sh}
exe="$root/build/win/tests/unit/$name.exe"
[ -f "$exe" ] || { echo "FAIL: $exe missing: run 'make windows' first (make test does)"; exit 1; }
src=$(find "$root/tests" -name "$name.c" | head -n 1)
stale=$(find "$root/ccoip" "$root/reduce" "$root/log" "$root/hash" "$root/threadpark" "$root/include" $src \
    -name '*.[ch]' -newer "$root/build/win/.built" 2>/dev/null | head -n 3)
[ -z "$stale" ] || { echo "FAIL: $exe is older than $stale: run 'make windows'"; exit 1; }

. "$root/tests/win/wine_env.sh"
start=$(date +%s)
wine "$exe" &
pid=$!
trap 'kill -s KILL $pid 2>/dev/null; wine_env_cleanup' EXIT
trap 'exit 1' INT TERM HUP
# Bounded at 120 s (the tests take 1-4 s). A run past it is shown before it is killed: its
# threads' states and kernel waits, its fds, wine's processes and threads, and wine's backtrace
# of each of its threads. (This showed the hangs of the shared wine server: every thread reading
# a wait pipe whose both ends the program held, in a program wine's server did not list;
# wine_env.sh.)
n=0
while kill -0 $pid 2>/dev/null && [ $n -lt 1200 ]; do sleep 0.1; n=$((n + 1)); done
if kill -0 $pid 2>/dev/null; then
    echo "HUNG: $name.exe still running after 120 s; its threads:"
    ps -L -o tid,stat,wchan:32,comm -p $pid
    for t in /proc/$pid/task/*; do echo "${t##*/}: $(cat $t/syscall 2>/dev/null)"; cat $t/stack 2>/dev/null | head -5; done
    ls -l /proc/$pid/fd 2>/dev/null | tail -n +2
    threads=$(timeout 30 winedbg --command "info thread" 2>/dev/null)
    printf 'wine processes and threads:\n%s\n' "$threads"
    wpid=$(printf '%s\n' "$threads" | awk -v n="$name.exe" '/^[0-9a-f]/ && index($0, n) {print $1; exit}')
    tids=$(printf '%s\n' "$threads" | awk -v n="$name.exe" '/^[0-9a-f]/ {p = index($0, n) > 0; next} p {print $1}')
    [ -n "$wpid" ] && { for t in $tids; do echo "bt 0x$t"; done; echo detach; echo quit; } |
        timeout 60 winedbg "0x$wpid" 2>&1 | head -n 300
    kill -s KILL $pid
fi
wait $pid
rc=$?
echo "$name.exe under wine: exit status $rc after $(($(date +%s) - start)) s"
exit $rc
