#!/usr/bin/python3 -B
"""chaos.py: the chaos run of issue 15, part 3. The real pccl-master and N chaos_peer processes
(chaos_peer.c: pccl.h only) train on 127.0.0.1 while faults land at random and at the worst moments:

  kill           SIGKILL a member; an empty newcomer replaces it
  kill2          two members SIGKILLed 0-30 ms apart; two newcomers replace them
  stop           SIGSTOP a member for 1..--stop-max-s seconds, then SIGCONT
  join           an extra empty joiner (up to N + 2 peers)
  kill_vote      a joiner comes; the moment the first member enters pcclUpdateTopology to admit it,
                 another member is SIGKILLed (an election)
  kill_transfer  a newcomer comes; once it and every member are in the sync, the oldest member (the
                 distributor of its first tensor) is SIGKILLed 10-80 % of the way through that
                 transfer (--ss-mbps caps the rate, so its length is known)
  master         (with --master-kills) pccl-master SIGKILLed and restarted on its port 0.1-1 s later
                 (docs/master-restart.md): the members rejoin it and go on

one fault every --fault-every steps (none in the last 6, so the run can end). After every step each
peer reports a hash over every byte of its weights with the step, revision and world size: peers
that report the same step must report the same revision and hash (bit parity), and every
all-reduce result is checked exactly inside the peer. No step for --hang-s seconds is a hang: the
thread stacks of every peer and of the master are dumped (gdb) and the run fails. At least one peer
that holds the state always survives a fault (else the run would restart from zeros, unnoticed).

Children start with SIGPIPE at its default action (subprocess restores it), as a shell would.
Prints one summary line; exit status 0 only with no hang, no divergence, no master crash, no
unexpected peer exit, and the run finished.
--style pccl: every peer retries a failed all-reduce at once, as PCCL's examples do (issue 28).
Usage: chaos.py --master PCCL_MASTER --peer CHAOS_PEER [--peers 4] [--steps 60] [--seed 1] ...
"""
import argparse
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

KINDS = ["kill", "kill2", "stop", "join", "kill_vote", "kill_transfer"]


class Peer:
    def __init__(self, run, name):
        self.name = name
        self.log = os.path.join(run.out, name + ".log")
        env = dict(os.environ, PCCL_LOG_LEVEL=os.environ.get("CHAOS_PEER_LOG_LEVEL", "warn"),
                   PCCL_SS_MAX_SEND_MBPS=str(run.args.ss_mbps))
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                [run.args.peer, "127.0.0.1:%d" % run.port, str(run.args.steps), str(run.args.state_floats),
                 str(run.args.reduce_floats)] + (["pccl"] if run.args.style == "pccl" else []), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, env=env)
        self.born = time.monotonic()
        self.admitted = False
        self.phase = None
        self.step = 0
        self.done = False
        self.exited = False
        self.killed = False  # by us: its exit is expected
        self.stopped_until = 0.0
        threading.Thread(target=self._read, args=(run.events,), daemon=True).start()

    def _read(self, events):
        for raw in self.proc.stdout:
            events.put((self, raw.decode(errors="replace").strip()))
        events.put((self, None))

    def usable(self):
        return self.admitted and not self.exited and not self.killed and not self.done

    def kill(self, sig=signal.SIGKILL):
        if sig == signal.SIGKILL:
            self.killed = True
        try:
            os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            pass


class Run:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        undeclared = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")  # under bazel test: kept on failure
        self.out = args.out or (os.path.join(undeclared, "chaos-seed%d" % args.seed) if undeclared
                                else tempfile.mkdtemp(prefix="chaos-"))
        os.makedirs(self.out, exist_ok=True)
        self.events = queue.Queue()
        self.peers = []
        self.counter = 0
        self.injected = {k: 0 for k in KINDS}
        self.fault_log = []  # (kind, max_step when injected)
        self.retries = 0
        self.hangs = 0
        self.divergences = 0
        self.bad_exits = []
        self.parity = {}  # step -> (revision, world, hash, peer)
        self.max_step = 0
        self.last_progress = time.monotonic()
        self.next_fault = args.fault_every
        self.timers = []  # (when, fn)
        self.triggers = []  # (phase word, predicate(peer), fn(peer), expires)
        self.master_died = False
        self.master_down = False  # killed by us, not yet restarted
        self.masters = 0
        if args.master_kills:
            self.injected["master"] = 0
        self.port = 0
        self.start_master()

    def start_master(self):
        """pccl-master on self.port (any port the first time), its log in master<N>.log."""
        self.master_log = os.path.join(self.out, "master%d.log" % self.masters)
        self.masters += 1
        with open(self.master_log, "w") as err:
            self.master = subprocess.Popen([self.args.master, "--listen", "127.0.0.1:%d" % self.port, "--log-level",
                                            "info"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        line = self.master.stdout.readline().decode()
        if "listening on" not in line:
            sys.exit("chaos: the master did not start: %r" % line)
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.master_down = False

    def say(self, msg):
        if self.args.verbose:
            print("chaos: [%6.1f s, step %d] %s" % (time.monotonic() - self.t0, self.max_step, msg), flush=True)

    def spawn(self):
        self.counter += 1
        p = Peer(self, "peer%02d" % self.counter)
        self.peers.append(p)
        return p

    def holders(self):
        """Members that completed a step: they hold the state at the run's revision."""
        return [p for p in self.peers if p.usable() and p.step > 0 and time.monotonic() >= p.stopped_until]

    def victims(self, n):
        """n members to kill, leaving at least two holders (one must serve the newcomers)."""
        h = self.holders()
        if len(h) - n < 2:
            return None
        return self.rng.sample(h, n)

    # --- faults -------------------------------------------------------------------------------
    def fault(self):
        kind = self.rng.choice(KINDS + (["master"] if self.args.master_kills else []))
        alive = [p for p in self.peers if not p.exited and not p.killed and not p.done]
        if kind == "join" and len(alive) >= self.args.peers + 2:
            kind = "kill"
        if kind == "kill2" and self.victims(2) is None:
            kind = "kill"
        if kind != "join" and kind != "stop" and self.victims(1) is None:
            kind = "join" if len(alive) < self.args.peers + 2 else "stop"
        if kind == "stop" and not self.holders():
            return
        if kind not in ("kill_vote", "kill_transfer"):
            self.count(kind)  # those two count when their moment comes (else as a join)
        getattr(self, "f_" + kind)()

    def f_master(self):
        self.say("kill the master")
        self.master_down = True
        self.master.kill()
        self.master.wait()
        self.timers.append((time.monotonic() + self.rng.uniform(0.1, 1.0), self.start_master))

    def count(self, kind):
        self.injected[kind] += 1
        self.fault_log.append((kind, self.max_step))

    def f_kill(self):
        v = self.victims(1)[0]
        self.say("kill %s" % v.name)
        v.kill()
        self.spawn()

    def f_kill2(self):
        a, b = self.victims(2)
        gap = self.rng.uniform(0, 0.030)
        self.say("kill %s and %s %.0f ms apart" % (a.name, b.name, gap * 1000))
        a.kill()
        time.sleep(gap)
        b.kill()
        self.spawn()
        self.spawn()

    def f_stop(self):
        v = self.rng.choice(self.holders())
        secs = self.rng.uniform(1.0, self.args.stop_max_s)
        self.say("SIGSTOP %s for %.1f s" % (v.name, secs))
        v.stopped_until = time.monotonic() + secs
        v.kill(signal.SIGSTOP)
        self.timers.append((v.stopped_until, lambda: v.kill(signal.SIGCONT)))

    def f_join(self):
        self.say("a joiner")
        self.spawn()

    def f_kill_vote(self):
        joiner = self.spawn()  # it also replaces the victim

        def fire(voter):
            v = [p for p in self.holders() if p is not voter]
            if len(self.holders()) - 1 < 2 or not v:
                self.count("join")
                return
            victim = self.rng.choice(v)
            self.say("kill %s while %s votes to admit %s" % (victim.name, voter.name, joiner.name))
            self.count("kill_vote")
            victim.kill()

        self.triggers.append(("vote", lambda p: p is not joiner and p.admitted, fire, time.monotonic() + 20))

    def f_kill_transfer(self):
        newcomer = self.spawn()  # it also replaces the victim
        w0_s = 4.0 * self.args.state_floats / (self.args.ss_mbps * 1e6)  # its first tensor, from the victim

        def everyone_syncs(p):
            members = [q for q in self.peers if q.usable()]
            return newcomer in members and all(q.phase == "sync" for q in members)

        def fire(_):
            h = self.holders()
            if len(h) < 3:
                self.count("join")
                return
            victim = min(h, key=lambda p: p.born)  # the earliest connected holder serves w0
            delay = self.rng.uniform(0.1, 0.8) * w0_s
            self.say("kill %s %.0f ms into %s's sync" % (victim.name, delay * 1000, newcomer.name))
            self.count("kill_transfer")
            self.timers.append((time.monotonic() + delay, lambda: victim.usable() and victim.kill()))

        self.triggers.append(("sync", everyone_syncs, fire, time.monotonic() + 30))

    # --- events -------------------------------------------------------------------------------
    def on_line(self, p, line):
        if line is None:
            p.exited = True
            rc = p.proc.wait()
            if not p.killed and not (p.done and rc == 0):
                self.bad_exits.append("%s exited %d (step %d); see %s" % (p.name, rc, p.step, p.log))
            return
        w = line.split()
        if not w:
            return
        if w[0] == "admitted":
            p.admitted = True
        elif w[0] == "phase" and len(w) == 3:
            p.phase = w[1]
            for t in list(self.triggers):
                if t[0] == w[1] and t[1](p):
                    self.triggers.remove(t)
                    t[2](p)
        elif w[0] == "retry":
            self.retries += 1
            self.say("%s: %s" % (p.name, line))
        elif w[0] == "step" and len(w) == 5:
            step, rev, world, h = int(w[1]), int(w[2]), int(w[3]), w[4]
            p.step = step
            seen = self.parity.get(step)
            if seen is None:
                self.parity[step] = (rev, world, h, p.name)
            elif seen[:3] != (rev, world, h):
                self.divergences += 1
                print("chaos: DIVERGENCE at step %d: %s has revision %d world %d hash %s, %s has %d %d %s" %
                      (step, p.name, rev, world, h, seen[3], seen[0], seen[1], seen[2]), flush=True)
            if step > self.max_step:
                self.max_step = step
                self.last_progress = time.monotonic()
        elif w[0] == "bad":
            self.divergences += 1
            print("chaos: WRONG ALL-REDUCE RESULT: %s: %s" % (p.name, line), flush=True)
        elif w[0] == "done":
            p.done = True
        elif w[0] == "fatal":
            print("chaos: %s: %s (see %s)" % (p.name, line, p.log), flush=True)

    def dump_stacks(self):
        gdb = shutil.which("gdb")
        procs = [(p.name, p.proc.pid) for p in self.peers if not p.exited] + [("master", self.master.pid)]
        for name, pid in procs:
            path = os.path.join(self.out, "stacks-%s.txt" % name)
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                continue
            if gdb is None:
                text = "gdb not installed\n"
            else:
                r = subprocess.run([gdb, "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
                text = r.stdout.decode(errors="replace")
            with open(path, "w") as f:
                f.write(text)
            print("chaos: ---- thread stacks of %s (pid %d), also in %s ----" % (name, pid, path))
            print("\n".join(l for l in text.splitlines() if l.startswith(("Thread", "#"))), flush=True)

    def loop(self):
        self.t0 = time.monotonic()
        for _ in range(self.args.peers):
            self.spawn()
        end_grace = None
        while True:
            try:  # every line there is, then the checks: a busy run must not starve them
                self.on_line(*self.events.get(timeout=0.01))
                while True:
                    self.on_line(*self.events.get_nowait())
            except queue.Empty:
                pass
            now = time.monotonic()
            for t in [t for t in self.timers if t[0] <= now]:
                self.timers.remove(t)
                t[1]()
            for t in [t for t in self.triggers if t[3] <= now]:
                self.triggers.remove(t)
                self.count("join")  # its moment never came: the newcomer was a plain joiner
            if not self.master_down and self.master.poll() is not None:
                self.master_died = True
                print("chaos: THE MASTER DIED: exit status %d (see %s)" % (self.master.returncode, self.master_log))
                return False
            if (self.max_step >= self.next_fault and self.max_step < self.args.steps - 6
                    and not self.timers and not self.triggers):
                self.fault()
                self.next_fault = self.max_step + self.args.fault_every
            live = [p for p in self.peers if not p.exited]
            if any(p.done for p in self.peers) and all(p.done or p.step == 0 for p in live):
                # The run reached its end; newcomers that came too late wait alone: send them home.
                if all(p.exited or not p.done for p in live):
                    end_grace = end_grace or now
                    stragglers = [p for p in live if not p.done]
                    if not stragglers or now - end_grace > 3:
                        for s in stragglers:
                            s.kill()
                        return True
            elif now - self.last_progress > self.args.hang_s:
                self.hangs += 1
                print("chaos: HANG: no step for %d s (max step %d); dumping thread stacks" %
                      (self.args.hang_s, self.max_step), flush=True)
                self.dump_stacks()
                return False

    def shutdown(self):
        for p in self.peers:
            if not p.exited:
                p.kill(signal.SIGCONT)
                p.kill()
        for p in self.peers:
            try:
                p.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        rc = None
        if not self.master_down and self.master.poll() is None:
            self.master.send_signal(signal.SIGTERM)
            try:
                rc = self.master.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.master.kill()
        return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--master", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--peers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--state-floats", type=int, default=4 << 20, help="floats per shared tensor (2 tensors)")
    ap.add_argument("--reduce-floats", type=int, default=1 << 20, help="floats per all-reduce (4 of them)")
    ap.add_argument("--fault-every", type=int, default=10)
    ap.add_argument("--stop-max-s", type=float, default=5.0)
    ap.add_argument("--hang-s", type=float, default=60.0)
    ap.add_argument("--ss-mbps", type=int, default=100, help="PCCL_SS_MAX_SEND_MBPS: transfers last long enough to hit")
    ap.add_argument("--out", default=None, help="logs, stacks (default: a new temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the logs also when the run passes")
    ap.add_argument("--csv", default=None, help="append name,value,unit rows here")
    ap.add_argument("--master-kills", action="store_true", help="the master among the faults: killed, restarted")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--style", choices=["readme", "pccl"], default="readme",
                    help="how every peer retries a failed all-reduce: pcclUpdateTopology first (README), or "
                         "at once on the relinked ring (PCCL's examples)")
    args = ap.parse_args()
    run = Run(args)
    t0 = time.monotonic()
    ok = False
    try:
        ok = run.loop()
    finally:
        master_rc = run.shutdown()
    wall = time.monotonic() - t0
    faults = sum(run.injected.values())
    survived = sum(1 for kind, at in run.fault_log if run.max_step > at + 1) if ok else 0
    done = sum(1 for p in run.peers if p.done)
    good = (ok and run.hangs == 0 and run.divergences == 0 and not run.bad_exits and master_rc == 0
            and run.max_step == args.steps and done >= 2)
    keep = not good or args.keep
    print("chaos: seed %d%s, %d peers x %d steps (state 2 x %d floats, 4 x %d-float all-reduces): "
          "faults injected %d (%s), survived %d, retries %d, hangs %d, divergences %d, master crashes %d, "
          "unexpected peer exits %d, peers finished %d, max step %d, %.1f s%s" %
          (args.seed, " (PCCL-style retries)" if args.style == "pccl" else "", args.peers, args.steps, args.state_floats, args.reduce_floats, faults,
           " ".join("%s %d" % (k, v) for k, v in run.injected.items()), survived, run.retries, run.hangs,
           run.divergences, int(run.master_died), len(run.bad_exits), done, run.max_step, wall,
           " (logs: %s)" % run.out if keep else ""), flush=True)
    for b in run.bad_exits:
        print("chaos: unexpected exit: " + b, flush=True)
    if args.csv:
        with open(args.csv, "a") as f:
            for name, value in [("faults", faults), ("survived", survived), ("retries", run.retries),
                                ("hangs", run.hangs), ("divergences", run.divergences), ("wall_s", round(wall, 1))]:
                f.write("chaos_seed%d_%s,%s\n" % (args.seed, name, value))
    if not keep:
        shutil.rmtree(run.out, ignore_errors=True)
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
