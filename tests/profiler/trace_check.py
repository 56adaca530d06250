"""trace_check.py FILE N: the trace plugin's JSON of a peer that ran N sync all-reduces holds
what docs/profiler.md promises: N pcclAllReduce and N all-reduce slices (nested: the collective
inside its call, on the same thread), sends and receives on data-link threads with exact byte
counts, ring phases as async slices, a flow per transfer, thread names, and no dropped event."""
import collections
import json
import sys

path, n = sys.argv[1], int(sys.argv[2])
with open(path) as f:
    doc = json.load(f)
ev = doc["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
by = collections.defaultdict(list)
for e in x:
    by[e["name"]].append(e)
errors = []


def need(cond, what):
    if not cond:
        errors.append(what)


need(len(by["pcclAllReduce"]) >= n, "pcclAllReduce slices: %d" % len(by["pcclAllReduce"]))
need(len(by["all-reduce"]) == len(by["pcclAllReduce"]), "all-reduce slices: %d" % len(by["all-reduce"]))
api = {e["args"]["id"]: e for e in by["pcclAllReduce"]}
for c in by["all-reduce"]:
    p = api.get(c["args"]["parent"])
    need(p is not None, "collective %s has no API parent" % c["args"]["id"])
    if p is None:
        continue
    need(p["tid"] == c["tid"], "collective off its call's thread")
    need(p["ts"] <= c["ts"] + 0.001 and c["ts"] + c["dur"] <= p["ts"] + p["dur"] + 0.002, "collective outside its call")
    need(c["args"]["result"] == 0 and c["args"]["world"] == 2, "collective result/world: %s" % c["args"])
api_tids = {e["tid"] for e in by["pcclAllReduce"]}
xfer = by["send"] + by["recv"]
need(len(xfer) >= 4 * n, "transfers: %d" % len(xfer))
need(all(e["tid"] not in api_tids for e in xfer), "a transfer on the API thread")
# Exact bytes: per collective, the sum of its sends equals its tx_bytes, of its receives rx_bytes.
phases_b = [e for e in ev if e["ph"] == "b" and e.get("cat") == "phase"]
phases_e = [e for e in ev if e["ph"] == "e" and e.get("cat") == "phase"]
need(len(phases_b) == len(phases_e) and len(phases_b) >= 4 * n, "phase b/e: %d/%d" % (len(phases_b), len(phases_e)))
names = collections.Counter(e["name"] for e in phases_b)
for name in ("wait for INIT", "reduce-scatter", "all-gather", "wait for DONE"):
    need(names[name] >= n, "phase %s: %d" % (name, names[name]))
phase_ids = {e["args"]["id"]: e for e in phases_b}
coll_ids = {e["args"]["id"]: e for e in by["all-reduce"]}
sums = collections.defaultdict(lambda: [0, 0])
for e in xfer:
    ph = phase_ids.get(e["args"]["parent"])
    need(ph is not None, "transfer without its phase")
    if ph is None:
        continue
    coll = coll_ids.get(ph["args"]["parent"])
    need(coll is not None, "phase without its collective")
    if coll is None:
        continue
    need(coll["args"]["tag"] == e["args"]["tag"], "transfer tag")
    sums[coll["args"]["id"]][0 if e["name"] == "send" else 1] += e["args"]["bytes"]
for cid, c in coll_ids.items():
    need(sums[cid] == [c["args"]["tx_bytes"], c["args"]["rx_bytes"]],
         "collective %d: transfers %s, tx/rx %d/%d" % (cid, sums[cid], c["args"]["tx_bytes"], c["args"]["rx_bytes"]))
flows_s = [e for e in ev if e["ph"] == "s"]
flows_f = [e for e in ev if e["ph"] == "f"]
need(len(flows_s) == len(xfer) and len(flows_f) == len(xfer), "flows: %d/%d for %d transfers" % (len(flows_s), len(flows_f), len(xfer)))
need(all(s["tid"] in api_tids for s in flows_s), "a flow that does not start on the collective's thread")
tn = [e for e in ev if e["ph"] == "M" and e["name"] == "thread_name"]
need(any("data link tx" in e["args"]["name"] for e in tn) and any("data link rx" in e["args"]["name"] for e in tn),
     "thread names: %s" % [e["args"]["name"] for e in tn])
meta = [e for e in ev if e["ph"] == "M" and e["name"] == "pccl_trace"]
need(len(meta) == 1 and meta[0]["args"]["dropped"] == 0 and meta[0]["args"]["untracked"] == 0, "trace metadata: %s" % meta)
if errors:
    print("trace_check %s: %d problems, first: %s" % (path, len(errors), errors[:5]))
    sys.exit(1)
print("trace_check %s: %d events, %d all-reduces, %d transfers: ok" % (path, len(ev), len(by["all-reduce"]), len(xfer)))
