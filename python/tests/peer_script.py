"""One peer process of the end-to-end tests (not a test itself). Prints one JSON object per line.

usage: peer_script.py MASTER_ADDRESS RANK WORLD MODE [STEPS]
  MODE join:   connect, vote until WORLD peers are in, report world sizes, all-reduce once (when the
               library has pcclAllReduce), then a final pending vote as a barrier.
  MODE steps:  join, then STEPS all-reduces of ones; a failed step (a peer died) runs a topology
               round and is retried; each step reports (world, value).
"""
import json
import sys
import time

import numpy as np

import pccl
from pccl import Attribute, Result


def emit(**kw):
    print(json.dumps(kw), flush=True)


def attrs(c):
    return {a.name: c.get_attribute(a) for a in (Attribute.GLOBAL_WORLD_SIZE, Attribute.LOCAL_WORLD_SIZE,
                                                 Attribute.NUM_DISTINCT_PEER_GROUPS,
                                                 Attribute.LARGEST_PEER_GROUP_WORLD_SIZE)}


def vote_until(c, world):
    while c.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < world:
        try:
            c.update_topology()
        except pccl.PCCLError as e:
            if e.result is not Result.UPDATE_TOPOLOGY_FAILED:
                raise
        time.sleep(0.01)


def main():
    address, rank, world, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    c = pccl.Communicator(address)
    c.connect(n_attempts=3)
    emit(event="connected", rank=rank)
    vote_until(c, world)
    emit(event="joined", rank=rank, attrs=attrs(c))
    if mode == "join":
        if pccl.is_exported("pcclAllReduce"):
            send = np.full(1000, rank, np.float32)
            recv = np.empty_like(send)
            info = c.all_reduce(send, recv, op=pccl.ReduceOp.SUM, tag=1)
            emit(event="reduced", rank=rank, value=float(recv[0]), uniform=bool((recv == recv[0]).all()),
                 world=info.local_world_size, tx=info.tx_bytes, rx=info.rx_bytes)
        emit(event="pending", rank=rank, pending=c.are_peers_pending())  # a barrier: all are done
    elif mode == "steps":
        x = np.ones(4096, np.float32)
        y = np.empty_like(x)
        for step in range(steps):
            while True:
                try:
                    info = c.all_reduce(x, y, op=pccl.ReduceOp.SUM, tag=step)
                    break
                except pccl.PCCLError as e:
                    if e.result not in (Result.RANK_CONNECTION_LOST, Result.RANK_CONNECTION_FAILED):
                        raise
                    emit(event="retry", rank=rank, step=step, error=e.result.name)
                    while True:  # the survivors rebuild the ring together, then retry the step
                        try:
                            c.update_topology()
                            break
                        except pccl.PCCLError as e2:
                            if e2.result is not Result.UPDATE_TOPOLOGY_FAILED:
                                raise
            emit(event="step", rank=rank, step=step, world=info.local_world_size, value=float(y[0]),
                 uniform=bool((y == y[0]).all()))
        emit(event="pending", rank=rank, pending=c.are_peers_pending())
    c.close()
    emit(event="done", rank=rank)


if __name__ == "__main__":
    try:
        main()
    except pccl.PCCLError as e:
        emit(event="error", error=str(e), code=e.code)
        sys.exit(3)
