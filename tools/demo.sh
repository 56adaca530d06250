#!/bin/sh
# demo.sh: the project's main job on one box. A master and 3 peers train a logistic regression
# with all-reduced gradients (examples/c/train_logreg.c); mid-run one peer is SIGKILLed and a new
# one joins; at the end every surviving peer prints the hash of its parameters: all equal.
set -u
cd "$(dirname "$0")/.."
bin=${DEMO_PEER:-build/bin/train_logreg}
master=${DEMO_MASTER:-build/bin/pccl-master}
[ -x "$bin" ] && [ -x "$master" ] || { echo "demo: build first (make)"; exit 1; }
steps=${DEMO_STEPS:-120}
delay=${DEMO_STEP_DELAY_MS:-40}
out=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$out"
}
trap cleanup EXIT INT TERM

"$master" --listen 127.0.0.1:0 > "$out/master.log" 2>&1 &
pids="$pids $!"
port=""
for _ in $(seq 50); do
    port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$out/master.log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "demo: the master did not start"; cat "$out/master.log"; exit 1; }
echo "demo: pccl-master listening on 127.0.0.1:$port"

start_peer() {
    "$bin" "127.0.0.1:$port" "$1" "$steps" "$delay" 2>"$out/peer$1.err" | sed -u "s/^/  /" | tee "$out/peer$1.log" &
}
for id in 0 1 2; do
    start_peer $id
done
pids="$pids $(pgrep -f "$bin 127.0.0.1:$port" | tr '\n' ' ')"
# Let them train for a while, then kill peer 1 the hard way.
while ! grep -q "step  40 " "$out/peer0.log" 2>/dev/null; do sleep 0.1; done
victim=$(pgrep -f "$bin 127.0.0.1:$port 1 " | head -n 1)
echo "demo: SIGKILL peer 1 (pid $victim) at step 40"
kill -9 "$victim"
while ! grep -q "step  60 " "$out/peer0.log" 2>/dev/null; do sleep 0.1; done
echo "demo: peer 3 joins at step 60"
start_peer 3
pids="$pids $(pgrep -f "$bin 127.0.0.1:$port 3 " | tr '\n' ' ')"
wait_done() {
    for _ in $(seq 600); do
        grep -q "parameter hash" "$out/peer$1.log" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
ok=1
for id in 0 2 3; do wait_done $id || { echo "demo: peer $id did not finish"; ok=0; }; done
hashes=$(grep -h "parameter hash" "$out"/peer0.log "$out"/peer2.log "$out"/peer3.log | awk '{print $NF}' | sort -u)
first=$(grep -m1 "step   1 " "$out/peer0.log" | awk '{print $NF}')
last=$(grep "step $steps " "$out/peer0.log" | awk '{print $NF}')
echo "demo: loss went from $first (step 1) to $last (step $steps)"
if [ $ok -eq 1 ] && [ "$(echo "$hashes" | wc -l)" -eq 1 ]; then
    echo "demo: OK: peers 0, 2 and 3 end with identical parameters (hash $hashes)"
    exit 0
fi
echo "demo: FAILED: parameter hashes differ or a peer did not finish:"; echo "$hashes"
exit 1
