"""shm_idle_bench.py: wake-ups of idle peers whose links are open.

SHM_IDLE_PEERS peers (default 4) on 127.0.0.1 run one all-reduce (which opens the ring's links
and, by default, moves them to shared memory), then sit idle SHM_IDLE_S seconds (default 10)
between ops; the figure is the voluntary context switches per second of a peer process over that
idle time (every thread's, from /proc/PID/task/*/status), the mean over the peers. The baseline is
the same peers with PCCL_SHM=0 (idle TCP links), in interleaved rounds (SHM_IDLE_ROUNDS, default
3); each row is the median over the rounds. An all-reduce after the idle time checks that the
links still work. CSV rows on stdout, the rounds on stderr."""
import os
import select
import signal
import subprocess
import sys
import time

rf = sys.argv[1]
master_bin = os.path.join(rf, "ccoip/master/pccl-master")
peer_bin = os.path.join(rf, "bench/allreduce/ar_bench_peer")
npeers = int(os.environ.get("SHM_IDLE_PEERS", "4"))
idle_s = float(os.environ.get("SHM_IDLE_S", "10"))
rounds = int(os.environ.get("SHM_IDLE_ROUNDS", "3"))


def switches(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total


class Lines:
    """Lines from a child's stdout, with a timeout (select on the raw pipe)."""

    def __init__(self, f):
        self.fd, self.buf = f.fileno(), b""

    def read(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                return ""
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def ask_all(peers, cmd, word):
    for p in peers:
        p.stdin.write(cmd + "\n")
        p.stdin.flush()
    out = []
    for p in peers:
        line = (p.lines.read() or "").split()
        if not line or line[0] != word or line[1] != "0":
            raise RuntimeError(f"{cmd}: {' '.join(line) or 'no answer'}")
        out.append(line)
    return out


def one_round(shm, tag):
    env = dict(os.environ, PCCL_LOG_LEVEL="error")
    if not shm:
        env["PCCL_SHM"] = "0"
    master = subprocess.Popen([master_bin, "--listen", "127.0.0.1:0", "--log-level", "error"],
                              stdout=subprocess.PIPE, text=True)
    peers = []
    try:
        port = int(master.stdout.readline().strip().rsplit(":", 1)[1])
        # One at a time: a newcomer's connect returns once the peers already in vote to admit it.
        for _ in range(npeers):
            p = subprocess.Popen([peer_bin, f"127.0.0.1:{port}"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, env=env, text=True)
            p.lines = Lines(p.stdout)
            peers.append(p)
            p.stdin.write("connect\n")
            p.stdin.flush()
            line = p.lines.read(0 if len(peers) > 1 else 30)
            for _ in range(100):  # until a round of the peers already in admits it
                if line is not None:
                    break
                ask_all(peers[:-1], "update", "update")
                line = p.lines.read(0.2)
            line = (line or "").split()
            if line != ["connect", "0"]:
                raise RuntimeError(f"connect: {' '.join(line) or 'no answer'}")
        ask_all(peers, "update", "update")
        ask_all(peers, f"bench {tag} 262144 1 1 0", "bench")  # 1 MiB: every link carries data
        time.sleep(0.5)  # the op's last wake-ups settle
        before = [switches(p.pid) for p in peers]
        time.sleep(idle_s)
        after = [switches(p.pid) for p in peers]
        ask_all(peers, f"bench {tag + 2} 262144 0 1 0", "bench")
        for p in peers:
            p.stdin.write("quit\n")
            p.stdin.flush()
        for p in peers:
            p.wait(timeout=30)
        return sum(a - b for a, b in zip(after, before)) / len(peers) / idle_s
    finally:
        for p in peers:
            if p.poll() is None:
                p.kill()
            p.wait()
        master.terminate()
        master.wait()


def median(v):
    v = sorted(v)
    return v[(len(v) - 1) // 2]


signal.alarm(int(rounds * 2 * (idle_s + 60)))  # a stuck peer ends the run, not the machine's day
shm, tcp = [], []
for r in range(rounds):
    shm.append(one_round(True, 1 + 10 * r))
    tcp.append(one_round(False, 1 + 10 * r))
    print(f"shm_idle_bench: round {r}: shm {shm[-1]:.2f}/s, tcp {tcp[-1]:.2f}/s per peer", file=sys.stderr)
s, t = median(shm), median(tcp)
ratio = f"{s / t:.2f}" if t > 0 else "inf"
print(f"shm/idle_wakeups_per_s_peer_n{npeers},{s:.2f},1/s,{t:.2f},{ratio}")
