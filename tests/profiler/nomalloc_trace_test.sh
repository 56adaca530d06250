#!/bin/sh
# nomalloc_trace_test.sh: //tests/nomalloc's end-to-end allocation count (every scenario must
# make 0 allocation calls per peer in steady state) with the trace plugin on in every peer: its
# ring and handles are taken at init, so tracing adds no allocation either. The traces must then
# exist and parse. Usage: nomalloc_trace_test.sh NM_TEST MASTER NM_PEER LIBNOMALLOC
set -u
export PCCL_TRACE_FILE="$TEST_TMPDIR/nm-%p.json"
"$1" 2 "$2" "$3" "$4" || exit 1
n=0
for f in "$TEST_TMPDIR"/nm-*.json; do
    [ -f "$f" ] || continue
    /usr/bin/python3 -m json.tool "$f" > /dev/null || { echo "FAILED: $f does not parse"; exit 1; }
    grep -q '"name":"all-reduce"' "$f" || { echo "FAILED: $f holds no all-reduce"; exit 1; }
    n=$((n + 1))
done
[ "$n" -ge 2 ] || { echo "FAILED: $n trace files (want one per peer)"; exit 1; }
echo "ok: 0 allocation calls with the trace plugin on; $n traces parse"
