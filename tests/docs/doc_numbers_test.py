#!/usr/bin/python3 -B
"""doc_numbers_test.py [ROOT]: the numbers the docs state about limits (caps, timeouts, defaults,
the protocol version) equal the code's constants.

Each check below names a place in a doc (a regular expression whose one group is the number, as
written: 16, 65,536, 0x1ff) and what it must equal in the code: a macro of a source file (its
#define evaluated, other macros of the file or of the library's headers expanded), an expression
of macros, or a regular expression over the source whose group is the number (for defaults that
are not macros). `scale` converts the doc's unit into the code's (10 minutes -> ms: 60000).
Every match of a doc's expression must agree, and each must match at least once: a reworded
sentence fails here and is updated with its check. Keep to the numbers a user relies on.
Run by hand: /usr/bin/python3 tests/docs/doc_numbers_test.py."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "layout"))
import srctree  # noqa: E402

S, MIN, KIB, MIB = 1000, 60000, 1024, 1 << 20

# Source files named in the checks.
PACKETS, WIRE = "ccoip/wire/ccoip_packets.h", "ccoip/wire/ccoip_wire.h"
LISTENER, CONN = "ccoip/net/ccoip_listener.h", "ccoip/net/ccoip_conn.h"
SHMPIPE_H, SHMPIPE_C = "ccoip/net/ccoip_shmpipe.h", "ccoip/net/ccoip_shmpipe.c"
MAUTH_H, MSTATE_C = "ccoip/master/ccoip_master_auth.h", "ccoip/master/ccoip_master_state.c"
HTTP, BW, MAIN = "ccoip/master/ccoip_master_http.c", "ccoip/master/ccoip_master_bw.c", "ccoip/master/master_main.c"
TOPO = "ccoip/master/ccoip_master_topo.h"
P2P, P2P_H, SHARED = "ccoip/peer/ccoip_peer_p2p.c", "ccoip/peer/ccoip_p2p.h", "ccoip/peer/ccoip_peer_shared.c"
BENCH, LINK, WATCHDOG = "ccoip/peer/ccoip_peer_bench.c", "ccoip/peer/ccoip_peer_link.c", "ccoip/peer/ccoip_watchdog.c"
PEER_INT, STRIPE, DATALINK = "ccoip/peer/ccoip_peer_int.h", "ccoip/peer/ccoip_stripe.h", "ccoip/peer/ccoip_datalink.c"
GATE_C, GATE_H, MULTI = "ccoip/peer/ccoip_gate.c", "ccoip/peer/ccoip_gate.h", "ccoip/api/pccl_allreduce_multi.c"
REDUCE, HASH_MANY, HASH_MANY_H = "reduce/reduce.h", "hash/hash_many.c", "hash/hash_many.h"
TRACE, CCOIP_H = "profiler/pprof_trace.c", "include/ccoip.h"
FETCH = "ccoip/peer/ccoip_ss_fetch.c"

SEC, CC, TOP = "docs/security.md", "ccoip/README.md", "README.md"
AR, FAIL, SS, ENV = "docs/allreduce.md", "docs/failures.md", "docs/shared-state.md", "docs/environment.md"
MR, TOPOD, STATUS = "docs/master-restart.md", "docs/topology.md", "docs/status-endpoint.md"
COMPAT = "docs/pccl-compat.md"
MEM, PROF, STREAMS, GSM = "docs/memory.md", "docs/profiler.md", "docs/cuda-streams.md", "docs/group-state-machine.md"
PLAT = "docs/platforms.md"
CUDA_MD, DEVICE_C = "docs/cuda.md", "ccoip/peer/ccoip_device.c"


def env_default(var):
    """A source regex for the default of ccoip_env_num("VAR", default)."""
    return r're:"' + var + r'", (\d+)\)'


# (doc, regex with one group, scale, source file, macro / expression / "re:" regex)
CHECKS = [
    # The protocol version.
    (SEC, r"Protocol version (\d+) \(", 1, PACKETS, "CCOIP_PROTOCOL_VERSION"),
    (SEC, r"HELLO +\{magic, version (\d+),", 1, PACKETS, "CCOIP_PROTOCOL_VERSION"),
    (SEC, r"speaks protocol version (\d+), we speak", 1, PACKETS, "CCOIP_PROTOCOL_VERSION"),
    (SEC, r"this master speaks (\d+)`", 1, PACKETS, "CCOIP_PROTOCOL_VERSION"),
    (CC, r"protocol version \(now (\d+);", 1, PACKETS, "CCOIP_PROTOCOL_VERSION"),
    # Caps against floods: peer listeners, the master, the status page.
    (SEC, r"at most (\d+) at once \(`CCOIP_LISTENER_INFLIGHT`\)", 1, LISTENER, "CCOIP_LISTENER_INFLIGHT"),
    (SEC, r"and (\d+) per source address \(`CCOIP_LISTENER_PER_ADDR`", 1, LISTENER, "CCOIP_LISTENER_PER_ADDR"),
    (SEC, r"an attacker with (\d+) source addresses", 1, LISTENER, "CCOIP_LISTENER_INFLIGHT / CCOIP_LISTENER_PER_ADDR"),
    (SEC, r"source addresses \((\d+) slots each\)", 1, LISTENER, "CCOIP_LISTENER_PER_ADDR"),
    (SEC, r"can keep all (\d+)\s+handshake slots", 1, LISTENER, "CCOIP_LISTENER_INFLIGHT"),
    (AR, r"the p2p listener takes (\d+) handshakes at once per address", 1, LISTENER, "CCOIP_LISTENER_PER_ADDR"),
    (AR, r"up to (\d+) short-lived\s+threads", 1, P2P, "CONNECTS_AT_ONCE"),
    (SEC, r"Each handshake has its (\d+) s deadline", S, P2P, "HANDSHAKE_MS"),
    (SEC, r"Each handshake has its (\d+) s deadline", S, SHARED, "HANDSHAKE_MS"),
    (SEC, r"Each handshake has its (\d+) s deadline", S, BENCH, "HANDSHAKE_MS"),
    (SEC, r"at most (\d+) connections and", 1, MAUTH_H, "CCOIP_MAX_CONNECTIONS"),
    (CC, r"Connections are capped: (\d+) in all", 1, MAUTH_H, "CCOIP_MAX_CONNECTIONS"),
    (SEC, r"and (\d+) not yet joined per source address", 1, MAUTH_H, "CCOIP_MAX_UNJOINED_PER_ADDR"),
    (CC, r"in all, (\d+) not yet joined per source address", 1, MAUTH_H, "CCOIP_MAX_UNJOINED_PER_ADDR"),
    (SEC, r"within the handshake timeout \((\d+) s\)", S, MSTATE_C, r"re:handshake_timeout_ms = (\d+);"),
    (CC, r"within the handshake timeout \((\d+) s\)", S, MSTATE_C, r"re:handshake_timeout_ms = (\d+);"),
    (CC, r"heartbeat timeout\s+\((\d+) s\)", S, MSTATE_C, r"re:heartbeat_timeout_ms = (\d+);"),
    (GSM, r"heartbeats for (\d+) s", S, MSTATE_C, r"re:heartbeat_timeout_ms = (\d+);"),
    (CC, r"a topology round must finish within (\d+) s", S, MSTATE_C, r"re:round_timeout_ms = (\d+);"),
    (FAIL, r"or it took over (\d+) s", S, MSTATE_C, r"re:round_timeout_ms = (\d+);"),
    (SEC, r"a frame may be at most (\d+) bytes", 1, PACKETS, "CCOIP_MAX_HANDSHAKE_PAYLOAD"),
    (CC, r"before the handshake it is (\d+) bytes", 1, PACKETS, "CCOIP_MAX_HANDSHAKE_PAYLOAD"),
    (CC, r"The cap is (\d+) MiB \(`CCOIP_MAX_PAYLOAD`\)", MIB, WIRE, "CCOIP_MAX_PAYLOAD"),
    (SEC, r"the status page \| (\d+) connections", 1, HTTP, "MAX_CONNS"),
    (SEC, r"connections, (\d+) KiB and \d+ s per request", KIB, HTTP, "REQUEST_MAX"),
    (SEC, r"KiB and (\d+) s per request", S, HTTP, "DEADLINE_MS"),
    (STATUS, r"within (\d+) KiB and \d+ s", KIB, HTTP, "REQUEST_MAX"),
    (STATUS, r"KiB and (\d+) s, and", S, HTTP, "DEADLINE_MS"),
    (STATUS, r"at\s+most (\d+) connections are served", 1, HTTP, "MAX_CONNS"),
    (CC, r"bounded requests, (\d+) connections", 1, HTTP, "MAX_CONNS"),
    # Ports.
    (STATUS, r"PORT to (\d+)\)", 1, MAIN, r"re:ccoip_parse_address\(v, (\d+), &a->status_addr\)"),
    (TOP, r"it listens on 0\.0\.0\.0:(\d+)\)", 1, MAIN, r're:ccoip_parse_address\("0\.0\.0\.0", (\d+), &a->addr\)'),
    (CC, r"Default `--listen 0\.0\.0\.0:(\d+)`", 1, MAIN, r're:ccoip_parse_address\("0\.0\.0\.0", (\d+), &a->addr\)'),
    (COMPAT, r"`CCOIP_PROTOCOL_PORT_MASTER` \((\d+)\)", 1, CCOIP_H, "CCOIP_PROTOCOL_PORT_MASTER"),
    (CC, r"bump-allocates the p2p listener from (\d+) upward", 1, P2P, "FIRST_PORT"),
    (TOPOD, r"port bump-allocated from (\d+)", 1, BENCH, "FIRST_PORT"),
    (ENV, r"`PCCL_P2P_FIRST_PORT` \| (\d+) \|", 1, P2P, "FIRST_PORT"),
    # Timeouts and their defaults.
    (FAIL, r"\*\*Default: (\d+) minutes\.\*\*", MIN, WATCHDOG, "DEFAULT_TIMEOUT_MS"),
    (CC, r"stood still for the timeout \(default (\d+) min\)", MIN, WATCHDOG, "DEFAULT_TIMEOUT_MS"),
    (SS, r"collective timeout \(default (\d+) minutes\)", MIN, WATCHDOG, "DEFAULT_TIMEOUT_MS"),
    (GSM, r"`PCCL_COLLECTIVE_TIMEOUT_MS`, default (\d+) minutes\)", MIN, WATCHDOG, "DEFAULT_TIMEOUT_MS"),
    (COMPAT, r"`PCCL_COLLECTIVE_TIMEOUT_MS` \(default (\d+) min\)", MIN, WATCHDOG, "DEFAULT_TIMEOUT_MS"),
    (ENV, r"`PCCL_COLLECTIVE_TIMEOUT_MS` \| (\d+) ", 1, WATCHDOG, "DEFAULT_TIMEOUT_MS"),
    (FAIL, r"`PCCL_CONNECT_TIMEOUT_MS` \(default (\d+)\)", 1, LINK, env_default("PCCL_CONNECT_TIMEOUT_MS")),
    (CC, r"`PCCL_CONNECT_TIMEOUT_MS`,\s+default (\d+)", 1, LINK, env_default("PCCL_CONNECT_TIMEOUT_MS")),
    (ENV, r"`PCCL_CONNECT_TIMEOUT_MS` \| (\d+) \|", 1, LINK, env_default("PCCL_CONNECT_TIMEOUT_MS")),
    (ENV, r"`PCCL_P2P_TIMEOUT_MS` \| (\d+) \|", 1, P2P, env_default("PCCL_P2P_TIMEOUT_MS")),
    (ENV, r"`PCCL_P2P_CONNECTS` \| (\d+) \|", 1, P2P, "CONNECTS_AT_ONCE"),
    (FAIL, r"`PCCL_MASTER_RECONNECT_S`, default (\d+) s", S, LINK, "RECONNECT_DEFAULT_S * 1000"),
    (MR, r"`PCCL_MASTER_RECONNECT_S` seconds \(default (\d+);", S, LINK, "RECONNECT_DEFAULT_S * 1000"),
    (ENV, r"`PCCL_MASTER_RECONNECT_S` \| (\d+) \|", S, LINK, "RECONNECT_DEFAULT_S * 1000"),
    (MR, r"with backoff \((\d+) ms doubling", 1, LINK, "BACKOFF_FIRST_MS"),
    (MR, r"ms doubling to (\d+) s\)", S, LINK, "BACKOFF_MAX_MS"),
    (MR, r"`--rejoin-window-s S` \(default (\d+);", S, MSTATE_C, r"re:rejoin_window_ms = (\d+);"),
    (CC, r"`--rejoin-window-s` \(default (\d+)\)", S, MSTATE_C, r"re:rejoin_window_ms = (\d+);"),
    (MR, r"`rejoin_grace_ms` \((\d+) s\)", S, MSTATE_C, r"re:rejoin_grace_ms = (\d+);"),
    (SS, r"`PCCL_SS_TIMEOUT_MS`, default (\d+) s\)", S, SHARED, env_default("PCCL_SS_TIMEOUT_MS")),
    (PLAT, r"`PCCL_SS_TIMEOUT_MS` \((\d+) s\)", S, SHARED, env_default("PCCL_SS_TIMEOUT_MS")),
    (ENV, r"`PCCL_SS_TIMEOUT_MS` \| (\d+) \|", 1, SHARED, env_default("PCCL_SS_TIMEOUT_MS")),
    (ENV, r"`PCCL_SS_CONNECT_TIMEOUT_MS` \| (\d+) \|", 1, FETCH, env_default("PCCL_SS_CONNECT_TIMEOUT_MS")),
    (ENV, r"`PCCL_SS_RANGE_BYTES` \| (\d+) ", 1, FETCH, "DEFAULT_RANGE"),
    (ENV, r"`PCCL_SS_RANGE_BYTES` \| \d+ \((\d+) MiB\)", MIB, FETCH, "DEFAULT_RANGE"),
    (ENV, r"`PCCL_SS_RANGE_BYTES` \| \d+ \(\d+ MiB\) \| bytes, >= (\d+) ", 1, FETCH, "MIN_RANGE"),
    (ENV, r"`PCCL_SS_MAX_SOURCES` \| (\d+) \|", 1, PACKETS, "CCOIP_SS_MAX_SOURCES"),
    (SS, r"`PCCL_SS_RANGE_BYTES` \(default (\d+) MiB", MIB, FETCH, "DEFAULT_RANGE"),
    (SS, r"a quarter of a distributor's share,\s+at least (\d+) KiB", KIB, FETCH, "MIN_RANGE"),
    (SS, r"up to a range's bytes, (\d+) tensors", 1, FETCH, "UNIT_PIECES"),
    (SS, r"A request carries at most (\d+) ranges", 1, PACKETS, "CCOIP_SS_MAX_RANGES"),
    (SS, r"a RESULT names at\s+most (\d+) distributors and (?:\d+) per tensor", 1, PACKETS, "CCOIP_SS_MAX_DISTRIBUTORS"),
    (SS, r"a RESULT names at\s+most \d+ distributors and (\d+) per tensor", 1, PACKETS, "CCOIP_SS_MAX_SOURCES"),
    (SS, r"`PCCL_SS_MAX_SOURCES` \(default (\d+),", 1, PACKETS, "CCOIP_SS_MAX_SOURCES"),
    (TOPOD, r"`PCCL_BENCH_MS` \(read by the master, default (\d+) ms", 1, BW, "DEFAULT_BENCH_MS"),
    (TOPOD, r"default \d+ ms, at most (\d+) s\)", S, PACKETS, "CCOIP_MAX_BENCH_MS"),
    (ENV, r"`PCCL_BENCH_MS` \| (\d+) \| ms, 1 to \d+", 1, BW, "DEFAULT_BENCH_MS"),
    (ENV, r"`PCCL_BENCH_MS` \| \d+ \| ms, 1 to (\d+)", 1, PACKETS, "CCOIP_MAX_BENCH_MS"),
    (CC, r"u32 duration_ms \(1\.\.(\d+)\)", 1, PACKETS, "CCOIP_MAX_BENCH_MS"),
    (TOPOD, r"\(measurement time \+ (\d+) s\)", S, BW, "STEP_SLACK_MS"),
    (TOPOD, r"Exact up to (\d+) peers", 1, TOPO, "CCOIP_TOPO_EXACT_MAX"),
    (CC, r"exact to (\d+) peers", 1, TOPO, "CCOIP_TOPO_EXACT_MAX"),
    # Shared state.
    (SS, r"Names are 1\.\.(\d+) bytes", 1, PACKETS, "CCOIP_MAX_SS_NAME"),
    (SS, r"at most ([\d,]+) tensors", 1, PACKETS, "CCOIP_MAX_SS_TENSORS"),
    (CC, r"tensor names 1\.\.(\d+) bytes", 1, PACKETS, "CCOIP_MAX_SS_NAME"),
    (CC, r"u32 count \(≤ (\d+)\), count × \{name, u64 hash", 1, PACKETS, "CCOIP_MAX_SS_TENSORS"),
    (SS, r"threads made for the\s+call, at most (\d+);", 1, HASH_MANY, "MAX_THREADS"),
    (SS, r"two or more are (\d+) MiB or larger", MIB, HASH_MANY_H, "HASH_MANY_PARALLEL_BYTES"),
    (SS, r"through an (\d+) MiB host staging buffer", MIB, SHARED, "CHUNK"),
    (SS, r"Transfers over (\d+) MiB log a progress line", MIB, SHARED, "PROGRESS_BYTES"),
    # All-reduce: ops in flight, the pool, the ring, striping, buckets.
    (AR, r"a fixed table of (\d+) slots", 1, PEER_INT, "CCOIP_MAX_OPS"),
    (AR, r"or a (\d+)th op gets", 1, PEER_INT, "CCOIP_MAX_OPS + 1"),
    (FAIL, r"or a (\d+)th all-reduce", 1, PEER_INT, "CCOIP_MAX_OPS + 1"),
    (AR, r"\(>= 1, capped\s+at (\d+)\)", 1, PEER_INT, "CCOIP_MAX_OPS"),
    (TOP, r"up to (\d+) in flight over a connection pool", 1, PEER_INT, "CCOIP_MAX_OPS"),
    (AR, r"\(0 means (\d+),\s+at most", 1, STRIPE, "CCOIP_DEFAULT_POOL"),
    (TOP, r"\(default pool (\d+)\)", 1, STRIPE, "CCOIP_DEFAULT_POOL"),
    (AR, r"0 means \d+,\s+at most (\d+), more is capped", 1, P2P_H, "CCOIP_P2P_MAX_STREAMS"),
    (TOP, r"\(up to (\d+) streams\)", 1, P2P_H, "CCOIP_P2P_MAX_STREAMS"),
    (COMPAT, r"up to (\d+) streams \(PCCL's", 1, P2P_H, "CCOIP_P2P_MAX_STREAMS"),
    (CC, r"the dialler's pool size, 1\.\.(\d+)\)", 1, P2P_H, "CCOIP_P2P_MAX_STREAMS"),
    (AR, r"(\d+) KiB to \d+ MiB sub-chunks", KIB, REDUCE, "REDUCE_RING_DEFAULT_SUBCHUNK"),
    (AR, r"\d+ KiB to (\d+) MiB sub-chunks", MIB, REDUCE, "REDUCE_RING_MAX_AUTO_SUBCHUNK"),
    (FAIL, r"(\d+) KiB to \d+ MiB", KIB, REDUCE, "REDUCE_RING_DEFAULT_SUBCHUNK"),
    (FAIL, r"\d+ KiB to (\d+) MiB", MIB, REDUCE, "REDUCE_RING_MAX_AUTO_SUBCHUNK"),
    (AR, r"(\d+) in flight per direction", 1, REDUCE, "REDUCE_RING_DEFAULT_WINDOW"),
    (AR, r"streams x (\d+) KiB`", KIB, STRIPE, "CCOIP_STRIPE_MIN_PER_STREAM"),
    (AR, r"each lane at least (\d+) MiB of every chunk \(`CCOIP_STRIPE_MIN_PER_LANE`\)", MIB, STRIPE,
     "CCOIP_STRIPE_MIN_PER_LANE"),
    (AR, r"`CCOIP_STRIPE_SHARED_LANES` \((\d+)\)", 1, STRIPE, "CCOIP_STRIPE_SHARED_LANES"),
    (TOP, r"ops beside others (\d+) each", 1, STRIPE, "CCOIP_STRIPE_SHARED_LANES"),
    (TOP, r"at least (\d+) MiB of its chunk each", MIB, STRIPE, "CCOIP_STRIPE_MIN_PER_LANE"),
    (ENV, r"`PCCL_STRIPE_LANE_MIN_KIB` \| (\d+) \|", KIB, STRIPE, "CCOIP_STRIPE_MIN_PER_LANE"),
    (ENV, r"`PCCL_STRIPE_MAX_LANES` \| (\d+) ", 1, STRIPE, "CCOIP_STRIPE_MAX_LANES"),
    (ENV, r"`PCCL_STRIPE_SHARED_LANES` \| (\d+) \|", 1, STRIPE, "CCOIP_STRIPE_SHARED_LANES"),
    (ENV, r"`PCCL_STRIPE_WINDOW` \| \d+ x the op's streams \((\d+) to \d+\)", 1, REDUCE, "REDUCE_RING_DEFAULT_WINDOW"),
    (ENV, r"`PCCL_STRIPE_WINDOW` \| \d+ x the op's streams \(\d+ to (\d+)\)", 1, REDUCE, "REDUCE_RING_MAX_WINDOW"),
    (AR, r"Small host tensors \(up to\s+(\d+) MiB", MIB, MULTI, "SMALL_BYTES"),
    (AR, r"bucket holds up to (\d+) MiB", MIB, MULTI, "BUCKET_BYTES"),
    # Shared-memory links.
    (AR, r"a ring of (\d+) MiB \(`PCCL_SHM_RING_KIB`", MIB, DATALINK, "SHM_RING_DEFAULT"),
    (AR, r"\(`PCCL_SHM_RING_KIB`, (\d+) KiB to \d+ MiB", KIB, SHMPIPE_H, "CCOIP_SHMPIPE_RING_MIN"),
    (AR, r"\(`PCCL_SHM_RING_KIB`, \d+ KiB to (\d+) MiB", MIB, SHMPIPE_H, "CCOIP_SHMPIPE_RING_MAX"),
    (ENV, r"`PCCL_SHM_RING_KIB` \| (\d+) \|", KIB, DATALINK, "SHM_RING_DEFAULT"),
    (ENV, r"`PCCL_SHM_RING_KIB` \| \d+ \| KiB, (\d+) to", KIB, SHMPIPE_H, "CCOIP_SHMPIPE_RING_MIN"),
    (ENV, r"`PCCL_SHM_RING_KIB` \| \d+ \| KiB, \d+ to (\d+) ", KIB, SHMPIPE_H, "CCOIP_SHMPIPE_RING_MAX"),
    (AR, r"\(`PCCL_SHM_SPIN` polls, default (\d+)\)", 1, SHMPIPE_C, "SPIN_DEFAULT"),
    (ENV, r"`PCCL_SHM_SPIN` \| (\d+) \|", 1, SHMPIPE_C, "SPIN_DEFAULT"),
    # Memory, profiler, CUDA streams.
    (MEM, r"`CCOIP_FIXED_FRAME_MAX` \((\d+) bytes", 1, PACKETS, "CCOIP_FIXED_FRAME_MAX"),
    (MEM, r"`CCOIP_CONN_STACK_PAYLOAD` \((\d+) bytes\)", 1, CONN, "CCOIP_CONN_STACK_PAYLOAD"),
    (MEM, r"`CCOIP_LINK_KEEP_BYTES` \((\d+) MiB\)", MIB, PEER_INT, "CCOIP_LINK_KEEP_BYTES"),
    (MEM, r"outnumber them \(at most (\d+)\)", 1, PEER_INT, "CCOIP_MAX_OPS"),
    (PROF, r"events \(default (\d+), ~4 MiB", 1, TRACE, r're:"PCCL_TRACE_BUFFER_EVENTS", (\d+)\)'),
    (ENV, r"`PCCL_TRACE_BUFFER_EVENTS` \| (\d+) \|", 1, TRACE, r're:"PCCL_TRACE_BUFFER_EVENTS", (\d+)\)'),
    (STREAMS, r"There are at most (\d+) of each", 1, GATE_C, "DEFAULT_PARTS"),
    (STREAMS, r"`PCCL_STREAM_COPIES=N`, 1 to\s+(\d+)", 1, GATE_H, "CCOIP_GATE_PARTS"),
    (ENV, r"`PCCL_STREAM_COPIES` \| (\d+) \|", 1, GATE_C, "DEFAULT_PARTS"),
    (ENV, r"`PCCL_STREAM_COPIES` \| \d+ \| `whole` \(= 1\) or 1 to (\d+);", 1, GATE_H, "CCOIP_GATE_PARTS"),
    (ENV, r"`PCCL_STREAM_MIN_KIB` \| (\d+) \|", KIB, GATE_C, "MIN_PART"),
    # Device buffers' copy sizes (docs/cuda.md, environment.md).
    (CUDA_MD, r"the rest as the ring asks for input, (\d+) MiB ahead", MIB, DEVICE_C, "LOOKAHEAD_BYTES"),
    (CUDA_MD, r"grow from (\d+) KiB, doubling", KIB, DEVICE_C, "FIRST_PIECE"),
    (CUDA_MD, r"grow from \d+ KiB, doubling, to (\d+) MiB", MIB, DEVICE_C, "PIECE_BYTES"),
    (ENV, r"`PCCL_DEVICE_FIRST_KIB` \| (\d+) \|", KIB, DEVICE_C, "FIRST_PIECE"),
    (ENV, r"`PCCL_DEVICE_PIECE_KIB` \| (\d+) \|", KIB, DEVICE_C, "PIECE_BYTES"),
    (ENV, r"`PCCL_DEVICE_AHEAD_KIB` \| (\d+) \|", KIB, DEVICE_C, "LOOKAHEAD_BYTES"),
]


def defines(text):
    out = {}
    pattern = r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n]*)"
    for m in re.finditer(pattern, srctree.strip_c_comments(text), re.M):
        out.setdefault(m.group(1), m.group(2).strip())
    return out


def evaluate(expr, local, common, depth=0):
    """A C integer expression of literals and macros, as Python evaluates it."""
    if depth > 20:
        raise ValueError(f"macros nest too deep in {expr}")
    e = re.sub(r"\((?:size_t|u?int(?:8|16|32|64)_t|unsigned(?: long)*|long(?: long)?|int)\)", "", expr)
    e = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", e)

    def name(m):
        n = m.group(0)
        if n in local or n in common:
            return "(" + str(evaluate(local.get(n, common.get(n)), local, common, depth + 1)) + ")"
        raise ValueError(f"unknown macro {n}")

    e = re.sub(r"\b[A-Za-z_]\w*\b", name, e)
    if not re.fullmatch(r"[\d\sxXa-fA-F()+\-*/<>|&]*", e):
        raise ValueError(f"not an integer expression: {expr}")
    return eval(e.replace("/", "//"), {"__builtins__": {}})


def code_value(top, src, what, common):
    text = srctree.read(top, src)
    if what.startswith("re:"):
        found = {int(v, 0) for v in re.findall(what[3:], srctree.strip_c_comments(text))}
        if len(found) != 1:
            raise ValueError(f"{src}: /{what[3:]}/ gives {sorted(found) or 'nothing'}")
        return found.pop()
    return evaluate(what, defines(text), common)


def main():
    top = srctree.root()
    common = {}
    for rel in srctree.library_files(top):
        if rel.endswith((".h", ".cuh")):
            for k, v in defines(srctree.read(top, rel)).items():
                common.setdefault(k, v)
    docs, problems = {}, []
    for doc, pattern, scale, src, what in CHECKS:
        if doc not in docs:
            docs[doc] = srctree.read(top, doc)
        try:
            want = code_value(top, src, what, common)
        except (ValueError, SyntaxError, OSError) as e:
            problems.append(f"{src}: {what}: {e}")
            continue
        said = [int(v.replace(",", ""), 0) for v in re.findall(pattern, docs[doc])]
        if not said:
            problems.append(f"{doc}: /{pattern}/ matches nothing (reworded? update the check with the sentence)")
        for v in sorted(set(said)):
            if v * scale != want:
                problems.append(f"{doc}: /{pattern}/ says {v}, but {src} {what} is {want}"
                                + (f" (= {want / scale:g} in the doc's unit)" if scale != 1 else ""))
    for p in problems:
        print("FAIL", p)
    print(f"{len(CHECKS)} checks, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
