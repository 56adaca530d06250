#!/bin/sh
# readme_example_test.sh [--kill] PEER...: runs an example of README.md (PEER: its command, e.g.
# the compiled C block, or python3 and the Python block) as peers SHARD 0 and 1 against the real
# pccl-master on 127.0.0.1 (port 0: the master picks a free one and prints it). Passes when both
# exit 0 and print the same last line, "step 100 loss ...".
# --kill: a third peer, SHARD 2, is SIGKILLed as soon as the master has admitted all three; the two
# others must still both finish as above (the loop's failure handling: a failed collective,
# pcclUpdateTopology, the step again). The three are admitted in one round, so the kill lands at
# the start of the run and no two of them can finish without the third: SHARD 2 starts first and
# is admitted alone, is SIGSTOPped while 0 and 1 join (pending), then SIGCONTinued to vote both
# in. (Started together, 1 and 2 once ran all 100 steps before 0 had joined; 0 then waited alone
# for company until the limit.)
# Bounds: every process runs under `timeout`, in its own process group (timeout's), and the trap
# kills every group on any way out. `env --default-signal` starts each with default signal
# dispositions, whatever this shell or Bazel ignores (a background job of sh ignores SIGINT).
# --restart: the master is SIGKILLed mid-run (after the 20th sync) and started again 1 s later on
# the same port; the two peers must still both finish as above (docs/master-restart.md).
set -u
kill_one=0 restart=0
[ "${1:-}" = "--kill" ] && { kill_one=1; shift; }
[ "${1:-}" = "--restart" ] && { restart=1; shift; }
ws=$TEST_SRCDIR/$TEST_WORKSPACE
cd "$ws"
out=${TEST_TMPDIR:-$(mktemp -d)}
export PCCL_LIBRARY="$ws/libpccl.so" PYTHONPATH="$ws/python" PYTHONDONTWRITEBYTECODE=1
limit=40 # seconds for each peer; the test's Bazel timeout (small: 60 s) is above it
groups=""
cleanup() {
    for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

timeout -s KILL $((limit + 10)) env --default-signal ccoip/master/pccl-master --listen 127.0.0.1:0 \
    --log-level info > "$out/master.log" 2>&1 &
master=$!
groups="$groups $!"
port=""
for _ in $(seq 200); do
    port=$(sed -n 's/^pccl-master: listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$out/master.log")
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "FAILED: pccl-master did not start"; cat "$out/master.log"; exit 1
fi

start=$(date +%s)
start_peer() { # SHARD: in the background, its pid (and process group) in pidSHARD
    timeout -s KILL $limit env --default-signal "$@" "127.0.0.1:$port" $shard \
        > "$out/peer$shard.out" 2> "$out/peer$shard.err" &
    eval "pid$shard=$!"
    groups="$groups $!"
}
await_log() { # COUNT PATTERN: until the master log has COUNT lines matching PATTERN, or the limit
    for _ in $(seq $((limit * 100))); do
        [ "$(grep -c "$2" "$out/master.log")" -ge "$1" ] && return 0
        sleep 0.01
    done
    echo "FAILED: the master did not log $1 x \"$2\" in ${limit} s"; cat "$out/master.log"; exit 1
}
shards="0 1"
if [ $kill_one -eq 1 ]; then
    shards="0 1 2"
    shard=2
    start_peer "$@"
    await_log 1 "done: 1 accepted peers"
    kill -s STOP -- "-$pid2"
fi
for shard in 0 1; do start_peer "$@"; done
if [ $kill_one -eq 1 ]; then
    await_log 3 "pending admission"
    kill -s CONT -- "-$pid2"
    await_log 1 "done: 3 accepted peers"
    kill -s KILL -- "-$pid2"
    echo "SIGKILLed peer 2 once the master had admitted all three"
fi
if [ $restart -eq 1 ]; then
    await_log 1 "shared state of group 0: revision 20,"
    kill -s KILL -- "-$master"
    sleep 1
    echo "SIGKILLed the master after the 20th sync; starting it again on port $port"
    timeout -s KILL $((limit + 10)) env --default-signal ccoip/master/pccl-master --listen "127.0.0.1:$port" \
        --log-level info >> "$out/master.log" 2>&1 &
    groups="$groups $!"
fi
wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
echo "peers 0 and 1 exited $rc0 and $rc1 after $(( $(date +%s) - start )) s (137: killed at the ${limit} s limit)"
for shard in $shards; do
    echo "--- peer $shard stdout:"; cat "$out/peer$shard.out"
    echo "--- peer $shard stderr (last lines):"; tail -n 20 "$out/peer$shard.err"
done
ok=1
[ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] || ok=0
last0=$(tail -n 1 "$out/peer0.out") last1=$(tail -n 1 "$out/peer1.out")
case $last0 in "step 100 loss "*) ;; *) ok=0 ;; esac
[ "$last0" = "$last1" ] || ok=0
if [ $ok -ne 1 ]; then
    echo "FAILED: peers 0 and 1 must exit 0 and print the same \"step 100 loss ...\" line"
    echo "--- master log:"; cat "$out/master.log"
    exit 1
fi
[ $kill_one -eq 1 ] && echo "the survivors logged $(cat "$out/peer0.err" "$out/peer1.err" | wc -l) lines about failures"
echo "PASSED: peers 0 and 1: $last0"
