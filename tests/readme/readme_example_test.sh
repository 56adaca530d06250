#!/bin/sh
# readme_example_test.sh [--kill] PEER...: runs an example of README.md (PEER: its command, e.g.
# the compiled C block, or python3 and the Python block) as peers SHARD 0 and 1 against the real
# pccl-master on 127.0.0.1 (port 0: the master picks a free one and prints it). Passes when both
# exit 0 and print the same last line, "step 100 loss ...".
# --kill: a third peer, SHARD 2, joins and is SIGKILLed as soon as the master has admitted it; the
# two others must still both finish as above (the loop's failure handling: a failed collective,
# pcclUpdateTopology, the step again). The kill usually lands mid-run; the log says whether the
# survivors saw a failure.
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
shards="0 1"
[ $kill_one -eq 1 ] && shards="0 1 2"
for shard in $shards; do
    timeout -s KILL $limit env --default-signal "$@" "127.0.0.1:$port" $shard \
        > "$out/peer$shard.out" 2> "$out/peer$shard.err" &
    eval "pid$shard=$!"
    groups="$groups $!"
done
if [ $kill_one -eq 1 ]; then
    for _ in $(seq $((limit * 100))); do
        grep -q "done: 3 accepted peers" "$out/master.log" && break
        sleep 0.01
    done
    kill -s KILL -- "-$pid2"
    echo "SIGKILLed peer 2 (master: $(grep -c "done: 3 accepted peers" "$out/master.log") rounds with 3 peers)"
fi
if [ $restart -eq 1 ]; then
    for _ in $(seq $((limit * 100))); do
        grep -q "shared state of group 0: revision 20," "$out/master.log" && break
        sleep 0.01
    done
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
