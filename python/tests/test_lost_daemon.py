"""A daemon that goes away under a running model (issue 17, defect 9): killed mid-run it is
PopTorch's RecoverableError with a recovery action, and the model comes back with
attachToDevice() once a daemon serves again; stopped (SIGSTOP: the kernel still accepts and
holds the connection) it is noticed by the library's liveness check instead of at the end
of the request timeout; an address nobody listens on fails at once, naming the address.

Each test runs its own daemon: these tests kill or stop it."""
import os
import signal
import socket
import tempfile
import threading

import pytest
import torch

import poptorch
from conftest import Daemon


@pytest.fixture
def private_daemon(monkeypatch):
    tmp = tempfile.mkdtemp(prefix="ipuof-pytest-lost-")
    d = Daemon(tmp)
    monkeypatch.setenv("IPUOF_SERVER", d.addr)
    try:
        yield d
    finally:
        if d.proc.poll() is None:
            d.proc.send_signal(signal.SIGCONT)
        d.stop()


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())


def test_killed_mid_run_is_recoverable_partition_reset(private_daemon, monkeypatch):
    """The run is in flight when the daemon dies: the daemon is stopped first (so the
    request is surely sent and unanswered), then killed."""
    monkeypatch.setenv("IPUOF_CONNECT_TIMEOUT_MS", "60000")  # the kill, not the probe
    x = torch.rand(2, 4)
    pm = poptorch.inferenceModel(_model())
    assert pm(x).shape == (2, 3)
    d = private_daemon
    d.proc.send_signal(signal.SIGSTOP)
    killer = threading.Timer(0.3, d.proc.kill)
    killer.start()
    try:
        with pytest.raises(poptorch.RecoverableError) as info:
            pm(x)
    finally:
        killer.join()
        d.proc.wait()
    e = info.value
    assert e.recovery_action == "PARTITION_RESET"
    assert str(e).endswith("\nRecovery action required: PARTITION_RESET")
    assert d.addr in str(e) and ("IPUOF_E_CLOSED" in str(e) or "IPUOF_E_IO" in str(e))
    assert not pm.isAttachedToDevice()

    # A daemon on the same address again: the model compiles again and gives the same
    # result as before.
    d2 = Daemon(tempfile.mkdtemp(prefix="ipuof-pytest-lost-"), listen=d.addr)
    try:
        pm.attachToDevice()
        torch.testing.assert_close(pm(x), _model()(x))
    finally:
        pm.destroy()
        d2.stop()


def test_killed_training_model_is_recoverable(private_daemon):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x):
            out = self.m(x)
            return out, out.sum()

    pm = poptorch.trainingModel(WithLoss(), optimizer=opt)
    pm(torch.rand(2, 4))
    private_daemon.proc.kill()
    private_daemon.proc.wait()
    with pytest.raises(poptorch.RecoverableError) as info:
        pm(torch.rand(2, 4))
    assert info.value.recovery_action == "PARTITION_RESET"


def test_stopped_daemon_is_noticed_by_the_liveness_check(private_daemon, monkeypatch):
    """A stopped daemon never answers; with a request timeout of a minute (today's
    behaviour: a plain Error after that minute, 600 s by default), the liveness check paced
    by the connect timeout reports it as lost."""
    monkeypatch.setenv("IPUOF_CONNECT_TIMEOUT_MS", "500")
    monkeypatch.setenv("IPUOF_REQUEST_TIMEOUT_MS", "60000")
    x = torch.rand(2, 4)
    pm = poptorch.inferenceModel(_model())
    pm(x)
    private_daemon.proc.send_signal(signal.SIGSTOP)
    with pytest.raises(poptorch.RecoverableError) as info:
        pm(x)
    msg = str(info.value)
    assert "stopped answering during the run request" in msg, msg
    assert "health probe" in msg and private_daemon.addr in msg
    assert info.value.recovery_action == "PARTITION_RESET"
    # A new model while it is still stopped: the hello goes unanswered within the connect
    # timeout, a plain Error (nothing was lost) naming the address.
    with pytest.raises(poptorch.Error) as info2:
        poptorch.inferenceModel(_model())(x)
    assert not isinstance(info2.value, poptorch.RecoverableError)
    assert private_daemon.addr in str(info2.value) and "hello" in str(info2.value)


def test_busy_daemon_is_not_mistaken_for_a_lost_one(daemon, monkeypatch):
    """A run longer than the liveness period: the probes are answered while the worker
    computes, so the run completes (the session daemon; nothing is stopped). The period is
    50 ms (a probe must be answered within it: 20 ms failed on a machine with a load of
    13-18) and the run about 8 GFLOP, several periods on any host."""
    monkeypatch.setenv("IPUOF_CONNECT_TIMEOUT_MS", "50")

    class Slow(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(256, 256)

        def forward(self, x):
            for _ in range(60):
                x = torch.tanh(self.l(x))
            return x

    torch.manual_seed(0)
    m = Slow()
    x = torch.rand(1024, 256)
    pm = poptorch.inferenceModel(m)
    out = pm(x)
    torch.testing.assert_close(out, m(x), rtol=1e-4, atol=1e-5)
    pm.destroy()


def test_refused_connection_fails_at_once_naming_the_address(monkeypatch):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    monkeypatch.setenv("IPUOF_SERVER", f"127.0.0.1:{port}")
    with pytest.raises(poptorch.Error) as info:
        poptorch.inferenceModel(_model())(torch.rand(2, 4))
    assert not isinstance(info.value, poptorch.RecoverableError)
    msg = str(info.value)
    assert f"127.0.0.1:{port}" in msg and "refused" in msg and "IPUOF_E_IO" in msg
    assert msg.count(f"127.0.0.1:{port}") == 1, msg


def test_bad_timeout_variable_is_refused(monkeypatch, daemon):
    monkeypatch.setenv("IPUOF_CONNECT_TIMEOUT_MS", "5s")
    with pytest.raises(poptorch.Error, match="IPUOF_CONNECT_TIMEOUT_MS='5s' is not a number"):
        poptorch.inferenceModel(_model())(torch.rand(2, 4))
