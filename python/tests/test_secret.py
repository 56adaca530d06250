"""The run secret (extension): Communicator(secret=...), MasterNode(secret=...), PCCL_SECRET_FILE."""
import os

import pytest

import pccl
from pccl import Result
from conftest import free_port

SECRET = "python test secret, long enough"


def refused(comm):
    with pytest.raises(pccl.PCCLError) as ei:
        comm.connect(n_attempts=1)
    assert ei.value.result is Result.MASTER_CONNECTION_FAILED, str(ei.value)


def test_members_join_strangers_are_refused(tmp_path, monkeypatch):
    port = free_port()
    with pccl.MasterNode(f"127.0.0.1:{port}", secret=SECRET) as m:
        m.run()
        with pccl.Communicator(f"127.0.0.1:{port}", secret=SECRET.encode()) as c:
            c.connect()
            assert c.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) == 1
        with pccl.Communicator(f"127.0.0.1:{port}", secret="a wrong secret of some length") as c:
            refused(c)
        with pccl.Communicator(f"127.0.0.1:{port}") as c:
            refused(c)
        # PCCL_SECRET_FILE, as PCCL's own package would use it: read at connect()
        f = tmp_path / "run.secret"
        f.write_text(SECRET + "\n")
        f.chmod(0o600)
        monkeypatch.setenv("PCCL_SECRET_FILE", str(f))
        with pccl.Communicator(f"127.0.0.1:{port}") as c:
            c.connect()
        f.chmod(0o644)  # readable by others: refused before anything is sent
        with pccl.Communicator(f"127.0.0.1:{port}") as c:
            with pytest.raises(pccl.PCCLError) as ei:
                c.connect(n_attempts=1)
            assert ei.value.result is Result.INVALID_ARGUMENT


def test_secret_arguments():
    with pytest.raises(pccl.PCCLArgumentError):
        pccl.Communicator("127.0.0.1:48148", secret="short")
    with pytest.raises(pccl.PCCLArgumentError):
        pccl.MasterNode(f"127.0.0.1:{free_port()}", secret=12345)


def test_encryption_must_match():
    port = free_port()
    with pccl.MasterNode(f"127.0.0.1:{port}", secret=SECRET, encrypt=True) as m:
        m.run()
        with pccl.Communicator(f"127.0.0.1:{port}", secret=SECRET, encrypt=True) as c:
            c.connect()
        with pccl.Communicator(f"127.0.0.1:{port}", secret=SECRET, encrypt=False) as c:
            refused(c)
    with pytest.raises(pccl.PCCLError) as ei:  # encryption needs the secret
        pccl.MasterNode(f"127.0.0.1:{free_port()}", encrypt=True)
    assert ei.value.result is Result.INVALID_USAGE
