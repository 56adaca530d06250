"""The profiler with the Python package: pccl.Communicator works unchanged with a plugin set
(docs/profiler.md). Three peer processes (peer_script.py, "steps") run all-reduces with
PCCL_TRACE_FILE set; each writes a Chrome trace that parses and holds their collectives. With
PCCL_PROFILER_PLUGIN=stats the same run prints the statistics table at exit."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MasterProcess, kill_group, needs, peer_env

PEER = str(Path(__file__).resolve().parent / "peer_script.py")


def run_peers(address, env, steps=5):
    procs = [subprocess.Popen([sys.executable, PEER, address, str(r), "3", "steps", str(steps)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                              start_new_session=True) for r in (1, 2, 3)]
    try:
        outs = [p.communicate(timeout=90) for p in procs]
    finally:
        for p in procs:
            kill_group(p)
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        steps_done = [json.loads(line) for line in out.splitlines() if '"step"' in line]
        assert len(steps_done) == steps and all(ev["value"] == 3 for ev in steps_done), out
    return procs, outs


@pytest.mark.timeout(150)
def test_trace_file_from_python(tmp_path):
    needs("pcclAllReduce")
    m = MasterProcess()
    try:
        procs, _ = run_peers(m.address, peer_env(PCCL_LOG_LEVEL="error", PCCL_TRACE_FILE=str(tmp_path / "t-%p.json")))
    finally:
        m.close()
    for p in procs:
        doc = json.loads((tmp_path / f"t-{p.pid}.json").read_text())
        names = [e["name"] for e in doc["traceEvents"] if e["ph"] == "X"]
        assert names.count("pcclAllReduce") >= 5 and names.count("all-reduce") >= 5, names
        assert names.count("send") > 0 and names.count("recv") > 0


@pytest.mark.timeout(150)
def test_stats_plugin_from_python():
    needs("pcclAllReduce")
    m = MasterProcess()
    try:
        _, outs = run_peers(m.address, peer_env(PCCL_LOG_LEVEL="error", PCCL_PROFILER_PLUGIN="stats"))
    finally:
        m.close()
    for _, err in outs:
        assert "pccl stats (communicator" in err and "all-reduce" in err, err[-2000:]
