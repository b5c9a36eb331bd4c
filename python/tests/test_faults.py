"""Injected faults (issue 22, docs/faults.md) as a PopTorch program meets them: a fault
armed through IPUOF_FAULTS or `ipuctl fault inject` raises poptorch.RecoverableError with
recovery_action set (or UnrecoverableError), with PopTorch's "Recovery action required"
text; the IPU shows the error until the right reset; after it the program runs again.
Each test starts its own ipuofd (the session's daemon is shared by the other tests)."""
import copy
import json
import os
import shutil
import signal
import tempfile
import time

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


# ---- every kind at every trigger a program meets (issue 22), one daemon for the table ----

# kind, the exception class, its recovery_action (None: not a RecoverableError), a text the
# message holds, whether the IPU is left in error (and the ipuctl reset that clears it).
KINDS = [
    ("recoverable:IPU_RESET", poptorch.RecoverableError, "IPU_RESET",
     "[Recovery action: IPU_RESET] error on IPU 0", ("--ipu", "0")),
    ("recoverable:LINK_RESET", poptorch.RecoverableError, "LINK_RESET",
     "[Recovery action: LINK_RESET]", ("--partition", None)),
    ("recoverable:FULL_RESET", poptorch.RecoverableError, "FULL_RESET",
     "[Recovery action: FULL_RESET]", ("--all",)),
    ("unrecoverable", poptorch.UnrecoverableError, None, "unrecoverable_runtime_error",
     ("--all",)),
    ("soc-error", poptorch.RecoverableError, "IPU_RESET",
     "[Recovery action: IPU_RESET] CIUERRVR.IPUSOFTERR error on IPU 0", ("--ipu", "0")),
    ("host-sync-timeout", poptorch.RecoverableError, "IPU_RESET",
     "IPUDevice: still waiting for host sync after: 0 seconds", ("--ipu", "0")),
    ("tile-oom", poptorch.Error, None,
     "poplar_graph_memory_allocation_error: Out of memory on tile 0", None),
    ("stream-oom", poptorch.Error, None,
     "poplar_stream_memory_allocation_error: Out of memory. Single stream", None),
    # the connection is cut: lost, as a daemon gone (test_lost_daemon.py), PARTITION_RESET
    ("fabric-disconnect", poptorch.RecoverableError, "PARTITION_RESET", "IPUOF_E_", None),
    # no answer: the package's request timeout (IPUOF_REQUEST_TIMEOUT_MS) ends the wait
    ("hang", poptorch.Error, None, "did not answer", ("--ipu", "0")),
]
TRIGGERS = ["compile", "load", "weights", "run"]


@pytest.fixture(scope="module")
def table_daemon():
    tmp = tempfile.mkdtemp(prefix="ipuof-faults-table-")
    d = Daemon(tmp)
    old = os.environ.get("IPUOF_SERVER")
    os.environ["IPUOF_SERVER"] = d.addr
    try:
        yield d
    finally:
        if old is None:
            os.environ.pop("IPUOF_SERVER", None)
        else:
            os.environ["IPUOF_SERVER"] = old
        d.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("at", TRIGGERS)
@pytest.mark.parametrize("kind,cls,action,text,reset", KINDS, ids=[k[0] for k in KINDS])
def test_kind_at_trigger(table_daemon, monkeypatch, kind, cls, action, text, reset, at):
    d = table_daemon
    if kind == "hang":
        monkeypatch.setenv("IPUOF_REQUEST_TIMEOUT_MS", "3000")
    inject = ("fault", "inject", "--ipu", "0", "--kind", kind, "--at", at)
    pm = train()
    if at == "weights":               # a weights write after the model is on the IPU
        pm(*batch())
    r = d.ipuctl(*inject)
    assert r.returncode == 0, r.stderr
    with pytest.raises(cls) as info:
        if at == "weights":
            pm.load_state_dict(pm.state_dict())
        else:
            pm(*batch())              # compile, load, run
    e = info.value
    assert text in str(e), str(e)
    if cls is poptorch.Error:         # plain: neither recoverable nor unrecoverable
        assert not isinstance(e, (poptorch.RecoverableError, poptorch.UnrecoverableError))
    if action is not None:
        assert e.recovery_action == action
        assert str(e).endswith(f"Recovery action required: {action}")
    if kind not in ("fabric-disconnect", "hang"):
        assert f"{kind} at {at})" in str(e), str(e)
    pm.destroy()
    state = ipu0(d)
    assert (state["state"] == "error") == (reset is not None), state
    if reset is not None:             # the reset the error needs, as a program's recovery
        if reset[0] == "--partition":
            reset = ("--partition", state["error"].split("partition '")[1].split("'")[0])
        for _ in range(200):          # a client that gave up on a hang has let go of it
            r = d.ipuctl("reset", *reset)
            if r.returncode == 0 or "in use" not in r.stderr:
                break
            time.sleep(0.02)
        assert r.returncode == 0, r.stderr
        assert ipu0(d)["error"] is None
    assert d.ipuctl("fault", "clear").returncode == 0
    pm = train()                      # the IPU serves again
    pm(*batch())
    pm.destroy()


def test_daemon_kill_then_restarted(own_daemon):
    """daemon-kill: the daemon dies as if killed; the program gets RecoverableError
    PARTITION_RESET (its partition is gone with the daemon) and, once a daemon serves on
    the address again (systemd's Restart=), attaches again and trains on."""
    d = own_daemon
    r = d.ipuctl("fault", "inject", "--ipu", "0", "--kind", "daemon-kill", "--at", "run",
                 "--after-runs", "1")
    assert r.returncode == 0, r.stderr
    pm = train()
    pm(*batch())
    with pytest.raises(poptorch.RecoverableError) as info:
        pm(*batch())
    assert info.value.recovery_action == "PARTITION_RESET"
    assert d.proc.wait(10) == -signal.SIGKILL
    d2 = Daemon(tempfile.mkdtemp(prefix="ipuof-faults-"), listen=d.addr)
    try:
        pm.attachToDevice()
        out, loss = pm(*batch())
        assert out.shape == (4, 2)
    finally:
        pm.destroy()
        d2.stop()


# ---- PopTorch's documented recovery loop ---------------------------------------------------

def steps_data(n):
    torch.manual_seed(2)
    return [(torch.rand(4, 3, 2), torch.randint(0, 2, (4,))) for _ in range(n)]


def recover(daemon, e):
    """What a program does for e.recovery_action: the reset it asks for (a program on a Pod
    would run `vipu reset partition` or `gc-reset`; here the emulator's ipuctl)."""
    action = e.recovery_action
    if action == "IPU_RESET":
        ipu = e.message.split("error on IPU ")[1].split(" ")[0]
        args = ("--ipu", ipu)
    elif action in ("PARTITION_RESET", "LINK_RESET"):
        args = ("--partition", e.message.split("partition '")[1].split("'")[0])
    else:
        args = ("--all",)
    r = daemon.ipuctl("reset", *args)
    assert r.returncode == 0, r.stderr


def train_loop(daemon, n_steps):
    """Trains n_steps with PopTorch's documented handling of errors: on RecoverableError,
    destroy the model, take the recovery action, re-create (re-attach) the model, reload
    the last weights the host saved and continue with the step that failed; an
    UnrecoverableError stops the program. Returns the final weights and the actions met."""
    torch.manual_seed(0)
    model = ExampleModelWithLoss([3, 2], 2)
    data = steps_data(n_steps)
    saved = copy.deepcopy(model.state_dict())
    actions = []
    pm = None
    step = 0
    while step < n_steps:
        try:
            if pm is None:
                model.load_state_dict(saved)  # reload weights (a checkpoint on a real system)
                pm = poptorch.trainingModel(model, poptorch.Options(),
                                            torch.optim.SGD(model.parameters(), lr=0.1))
            pm(*data[step])
            pm.copyWeightsToHost()
            saved = copy.deepcopy(model.state_dict())
            step += 1
        except poptorch.RecoverableError as e:
            actions.append(e.recovery_action)
            assert len(actions) < 10, actions
            pm.destroy()
            pm = None
            recover(daemon, e)
        except poptorch.UnrecoverableError:
            raise
    pm.destroy()
    return saved, actions


def test_recovery_loop_reaches_clean_weights(own_daemon):
    """PopTorch's recovery (destroy, reset, re-attach, reload weights, continue) through an
    injected IPU_RESET and PARTITION_RESET: the faults hit runs before their update is
    applied, so the final weights equal a run without faults, exactly."""
    d = own_daemon
    clean, none = train_loop(d, 8)
    assert none == []
    for kind, after in (("recoverable:IPU_RESET", 2), ("recoverable:PARTITION_RESET", 5)):
        r = d.ipuctl("fault", "inject", "--ipu", "0", "--kind", kind, "--at", "run",
                     "--after-runs", str(after))
        assert r.returncode == 0, r.stderr
    faulted, actions = train_loop(d, 8)
    assert actions == ["IPU_RESET", "PARTITION_RESET"]
    for name in clean:
        assert torch.equal(clean[name], faulted[name]), name
    # the weights did change: the comparison is not of two untouched models
    torch.manual_seed(0)
    init = ExampleModelWithLoss([3, 2], 2).state_dict()
    assert any(not torch.equal(init[k], clean[k]) for k in clean)
    faults = json.loads(d.ipuctl("fault", "list", "--json").stdout)
    assert [f["fired"] for f in faults] == [1, 1]
