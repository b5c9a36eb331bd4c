"""Injected faults (issue 22, docs/faults.md) as a PopTorch program meets them: a fault
armed through IPUOF_FAULTS or `ipuctl fault inject` raises poptorch.RecoverableError with
recovery_action set (or UnrecoverableError), with PopTorch's "Recovery action required"
text; the IPU shows the error until the right reset; after it the program runs again.
Each test starts its own ipuofd (the session's daemon is shared by the other tests)."""
import json
import shutil
import tempfile

import pytest
import torch

import poptorch
from conftest import Daemon
from models import ExampleModelWithLoss


def small():
    torch.manual_seed(0)
    return ExampleModelWithLoss([3, 2], 2)


def batch(n=4):
    torch.manual_seed(1)
    return torch.rand(n, 3, 2), torch.randint(0, 2, (n,))


FAULTS = {  # IPUOF_FAULTS of each test's daemon
    "test_ipu_reset_from_ipuof_faults": [{"ipu": 0, "kind": "recoverable:IPU_RESET",
                                          "at": "run", "after_runs": 1}],
}


@pytest.fixture
def own_daemon(monkeypatch, request):
    """A daemon of its own, with the test's IPUOF_FAULTS, if any."""
    if request.node.name in FAULTS:
        monkeypatch.setenv("IPUOF_FAULTS", json.dumps(FAULTS[request.node.name]))
    tmp = tempfile.mkdtemp(prefix="ipuof-faults-")
    d = Daemon(tmp)
    monkeypatch.delenv("IPUOF_FAULTS", raising=False)
    monkeypatch.setenv("IPUOF_SERVER", d.addr)
    try:
        yield d
    finally:
        d.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def ipu0(d):
    r = d.ipuctl("status", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["ipus"][0]


def train(lr=0.1):
    model = small()
    return poptorch.trainingModel(model, poptorch.Options(),
                                  torch.optim.SGD(model.parameters(), lr=lr))


def test_ipu_reset_from_ipuof_faults(own_daemon):
    pm = train()
    pm(*batch())                      # run 0 passes
    with pytest.raises(poptorch.RecoverableError) as info:
        pm(*batch())                  # run 1 meets the fault
    e = info.value
    assert e.recovery_action == "IPU_RESET"
    assert str(e).endswith("Recovery action required: IPU_RESET")
    assert "injected fault 1" in str(e) and "IPUOF_E_DEVICE_FAULT" in str(e)
    state = ipu0(own_daemon)
    assert state["state"] == "error" and state["recovery"] == "IPU_RESET"
    assert not state["unrecoverable"]
    pm.destroy()
    r = own_daemon.ipuctl("reset", "--ipu", "0")
    assert r.returncode == 0, r.stderr
    assert ipu0(own_daemon)["error"] is None
    pm2 = train()                     # recovered: runs again on IPU 0
    out, loss = pm2(*batch())
    assert out.shape == (4, 2)
    pm2.destroy()
    faults = json.loads(own_daemon.ipuctl("fault", "list", "--json").stdout)
    assert faults[0]["fired"] == 1 and faults[0]["state"] == "fired"


def test_partition_reset_and_unrecoverable_from_ipuctl(own_daemon):
    r = own_daemon.ipuctl("fault", "inject", "--ipu", "0", "--kind",
                          "recoverable:PARTITION_RESET", "--at", "run")
    assert r.returncode == 0, r.stderr
    pm = train()
    with pytest.raises(poptorch.RecoverableError) as info:
        pm(*batch())
    assert info.value.recovery_action == "PARTITION_RESET"
    pm.destroy()
    assert ipu0(own_daemon)["recovery"] == "PARTITION_RESET"
    # An IPU reset is not enough; the partition's, by the name it had, is.
    r = own_daemon.ipuctl("reset", "--ipu", "0")
    assert r.returncode != 0 and "PARTITION_RESET" in r.stderr
    part = ipu0(own_daemon)["error"].split("partition '")[1].split("'")[0]
    r = own_daemon.ipuctl("reset", "--partition", part)
    assert r.returncode == 0, r.stderr

    r = own_daemon.ipuctl("fault", "inject", "--ipu", "0", "--kind", "unrecoverable",
                          "--at", "compile")
    assert r.returncode == 0, r.stderr
    pm = train()
    with pytest.raises(poptorch.UnrecoverableError) as uinfo:
        pm(*batch())
    assert not isinstance(uinfo.value, poptorch.RecoverableError)
    pm.destroy()
    assert ipu0(own_daemon)["unrecoverable"] is True
    r = own_daemon.ipuctl("reset", "--all")
    assert r.returncode == 0, r.stderr
    pm = train()
    pm(*batch())
    pm.destroy()
