#!/usr/bin/env python3
"""wan_trace.py: per-op and per-stream timing of a wan_bench pool run from the peers' Chrome
traces (PCCL_TRACE_FILE, docs/profiler.md). Usage: wan_trace.py LABEL TRACE.json...
(the 4 peers of one pool run). Prints, over every op of every peer (medians, ms):
  ring     reduce-scatter start to all-gather end (the op's time on its streams)
  gap      previous op's all-gather end to this op's reduce-scatter start (between rings)
  first    ring start to the end of the first received frame (fill over one hop)
  spread   per op, the last received frame's end on the latest stream minus that on the
           earliest stream: how long one stream holds the op's tail after the others finished
  hol      per op, the sum over frames of (the time the frame could be processed in order -
           its own end): frames that waited for an earlier frame of another stream. Since the
           ring runs one lane per stream (session 8, reduce/README.md "Lanes") it no longer
           waits so: hol is then what one global order would have cost, not a cost paid
  rate     bytes received per ring second, per peer (MB/s)
and a second line on how the ring time of an op splits (medians over ops, ms from the ring's
start): ring p90 and max; the streams' last frames, per op the earliest, the median and the
latest stream (lane) end; tail = the latest lane's end - the median lane's (how long the slowest
lanes hold the op after the typical lane finished), solo = the latest - the second latest (what
one lane alone holds it); after = ring end - the latest frame (the last reduce and the send).
Only the standard library; the traces are read line by line (one event a line)."""
import json
import statistics
import sys
from collections import defaultdict


def events(path):
    with open(path) as f:
        for line in f:
            line = line.strip().rstrip(',')
            if line.startswith('{'):
                try:
                    yield json.loads(line)
                except ValueError:
                    pass


def peer_ops(path):
    phases = defaultdict(dict)  # coll id -> {name: [b, e]}
    recvs = defaultdict(list)   # phase event id -> [(start, end, stream, bytes)]
    coll_of = {}                # phase event id -> coll id
    for e in events(path):
        if e.get('cat') == 'phase':
            d = phases[e['id']].setdefault(e['name'], [None, None])
            d[0 if e['ph'] == 'b' else 1] = e['ts']
            if e['ph'] == 'b':
                coll_of[e['args']['id']] = e['id']
        elif e.get('ph') == 'X' and e.get('name') == 'recv':
            a = e['args']
            recvs[a['parent']].append((e['ts'], e['ts'] + e['dur'], a['stream'], a['bytes']))
    by_coll = defaultdict(list)
    for pid, rv in recvs.items():
        by_coll[coll_of.get(pid)].extend(rv)
    ops = []
    for cid, ph in phases.items():
        rs, ag = ph.get('reduce-scatter'), ph.get('all-gather')
        if not rs or not ag or rs[0] is None or ag[1] is None:
            continue
        ops.append((rs[0], ag[1], by_coll.get(cid, [])))
    ops.sort()
    return ops


def op_figures(start, end, rv):
    streams = sorted({s for _, _, s, _ in rv})
    last = {s: max(e for _, e, t, _ in rv if t == s) for s in streams}
    per = {s: sorted(e for _, e, t, _ in rv if t == s) for s in streams}
    # Posting order: the k-th frame of stream s is frame k * width + (s - first stream).
    w, s0 = len(streams), streams[0] if streams else 0
    order = []
    for s in streams:
        for k, e in enumerate(per[s]):
            order.append((k * w + s - s0, e))
    order.sort()
    hol, m = 0.0, 0.0
    for _, e in order:
        m = max(m, e)
        hol += m - e
    first = min((e for _, e, _, _ in rv), default=start) - start
    spread = max(last.values()) - min(last.values()) if last else 0.0
    ends = sorted(e - start for e in last.values()) or [0.0]
    lanes = (ends[0], statistics.median(ends), ends[-1], ends[-1] - statistics.median(ends),
             ends[-1] - ends[-2] if len(ends) > 1 else 0.0, end - start - ends[-1])
    return end - start, first, spread, hol, sum(b for _, _, _, b in rv), lanes


def main():
    label, paths = sys.argv[1], sys.argv[2:]
    ring, gap, first, spread, hol, rate, lanes = [], [], [], [], [], [], []
    for p in paths:
        ops = peer_ops(p)
        prev = None
        for start, end, rv in ops:
            r, f, sp, h, b, ln = op_figures(start, end, rv)
            lanes.append([x / 1e3 for x in ln])
            ring.append(r / 1e3)
            first.append(f / 1e3)
            spread.append(sp / 1e3)
            hol.append(h / 1e3)
            rate.append(b / r if r > 0 else 0.0)
            if prev is not None:
                gap.append((start - prev) / 1e3)
            prev = end
    med = lambda v: statistics.median(v) if v else float('nan')
    tot = lambda v: sum(v) / max(1, len(paths))
    print(f'{label}: ops/peer {len(ring) // max(1, len(paths))} ring {med(ring):.1f} ms (sum/peer {tot(ring):.0f}) '
          f'gap {med(gap):.1f} (sum/peer {tot(gap):.0f}) first {med(first):.1f} spread {med(spread):.1f} '
          f'(max {max(spread, default=0):.1f}) hol {med(hol):.1f} ms/op rate {med(rate):.2f} MB/s')
    q = lambda v, f: sorted(v)[min(len(v) - 1, int(f * len(v)))] if v else float('nan')
    col = lambda i: [x[i] for x in lanes]
    print(f'{label}: ring p90 {q(ring, 0.9):.1f} max {max(ring, default=0):.1f} ms; lane ends earliest '
          f'{med(col(0)):.1f} median {med(col(1)):.1f} latest {med(col(2)):.1f} tail {med(col(3)):.1f} '
          f'(p90 {q(col(3), 0.9):.1f}) solo {med(col(4)):.1f} after {med(col(5)):.1f} ms/op')


if __name__ == '__main__':
    main()
