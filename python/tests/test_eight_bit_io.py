"""Eight-bit input (graphcore/examples' `eight_bit_io`): uint8 images go to the IPU as one
byte per element and the model casts and normalises them on the device."""
import copy

import torch
import torch.nn as nn

import poptorch


class Norm8(nn.Module):
    """uint8 NCHW images -> cast to the weights' dtype, (x/255 - mean)/std, then a small
    CNN (float16 after .half(), as graphcore/examples' eight_bit_io with precision 16.16)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        x = x.to(self.conv.weight.dtype) / 255.0
        x = (x - self.mean) / self.std
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def _images(n=2):
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 256, (n, 3, 8, 8), dtype=torch.uint8, generator=g)


def test_uint8_input_inference_matches_torch(daemon):
    torch.manual_seed(0)
    m = Norm8()
    x = _images()
    want = m(x)
    pm = poptorch.inferenceModel(copy.deepcopy(m))
    out = pm(x)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    pm.destroy()


def _metrics_daemon(tmp_path):
    """A second ipuofd, with /metrics on an ephemeral loopback port: (Daemon, metrics url)."""
    import re
    import time
    from conftest import Daemon

    conf = tmp_path / "conf"
    conf.write_text("[server]\nmetrics_listen = 127.0.0.1:0\n")
    d = Daemon.__new__(Daemon)
    import os
    import subprocess
    from conftest import BUILD
    d.dir, d.admin, d.log = str(tmp_path), str(tmp_path / "admin.sock"), str(tmp_path / "log")
    port_file = tmp_path / "port"
    with open(d.log, "wb") as log:
        d.proc = subprocess.Popen(
            [os.path.join(BUILD, "bin", "ipuofd"), "--listen", "127.0.0.1:0", "--port-file",
             str(port_file), "--foreground", "--admin-socket", d.admin, "--config", str(conf)],
            stdout=log, stderr=subprocess.STDOUT)
    url = None
    deadline = time.time() + 10
    while time.time() < deadline and d.proc.poll() is None and url is None:
        time.sleep(0.05)
        m = re.search(r"serving /metrics on (http://\S+/metrics)", open(d.log).read())
        if m and port_file.exists() and port_file.read_text().strip():
            url = m.group(1)
    if url is None:
        d.stop()
        raise RuntimeError("ipuofd with metrics did not start: " + open(d.log).read()[-2000:])
    d.addr = "127.0.0.1:" + port_file.read_text().strip()
    return d, url


def _received(url):
    import urllib.request
    page = urllib.request.urlopen(url, timeout=10).read().decode()
    for line in page.splitlines():
        if line.startswith("ipuofd_received_bytes_total "):
            return int(float(line.split()[1]))
    raise AssertionError("no ipuofd_received_bytes_total in /metrics")


def test_uint8_input_crosses_the_wire_as_one_byte_per_element(tmp_path, monkeypatch, daemon):
    """The daemon receives a run's uint8 input as 1 byte per element (float32 would be 4)."""
    d, url = _metrics_daemon(tmp_path)
    monkeypatch.setenv("IPUOF_SERVER", d.addr)
    try:
        class M(nn.Module):
            def forward(self, x):
                return ((x.float() / 255.0 - 0.5) / 0.25).mean(dim=(1, 2, 3))

        x = torch.randint(0, 256, (16, 3, 64, 64), dtype=torch.uint8)
        pm = poptorch.inferenceModel(M())
        pm(x)  # compiles and runs
        before = _received(url)
        out = pm(x)
        sent = _received(url) - before
        torch.testing.assert_close(out, M()(x), rtol=1e-5, atol=1e-5)
        # One byte per element, plus the request's header (well under 1%): a float32
        # input would have been 4x x.numel().
        assert x.numel() <= sent < x.numel() * 1.05, (sent, x.numel())
        pm.destroy()
    finally:
        d.stop()


def test_uint8_input_half_inference_matches_torch(daemon):
    """Cast to float16 on the device, as graphcore/examples' eight_bit_io with precision
    16.16: each op's result rounded to float16, within float16's steps of torch's float16
    run of the same program."""
    torch.manual_seed(0)
    m = Norm8().half()
    x = _images(4)
    ref = copy.deepcopy(m).float()
    want = ref(x)
    pm = poptorch.inferenceModel(copy.deepcopy(m))
    out = pm(x)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.float(), want, rtol=2 ** -8, atol=2e-2)
    pm.destroy()


def test_uint8_input_training_matches_torch(daemon):
    """Training with a uint8 input: the Cast from uint8 has no gradient (the input needs
    none); the weights after three SGD steps equal torch's (float32)."""
    torch.manual_seed(0)

    class T(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = Norm8()

        def forward(self, x, y):
            out = self.net(x)
            return out, nn.functional.cross_entropy(out, y)

    ref = T()
    m = copy.deepcopy(ref)
    x, y = _images(4), torch.tensor([0, 1, 2, 3])
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.05))
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for _ in range(3):
        pm(x, y)
        opt.zero_grad()
        ref(x, y)[1].backward()
        opt.step()
    pm.copyWeightsToHost()
    for (n, a), (_, b) in zip(m.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    pm.destroy()


def test_uint8_input_half_training_within_float16_tolerance(daemon):
    """precision 16.16 with eight-bit input: weights after three steps within float16's
    tolerance of torch's float32 run of the same program."""
    torch.manual_seed(0)

    class T(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = Norm8()

        def forward(self, x, y):
            out = self.net(x)
            return out, nn.functional.cross_entropy(out.float(), y)

    ref = T()
    m = copy.deepcopy(ref).half()
    x, y = _images(4), torch.tensor([0, 1, 2, 3])
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.05))
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for _ in range(3):
        pm(x, y)
        opt.zero_grad()
        ref(x, y)[1].backward()
        opt.step()
    pm.copyWeightsToHost()
    for (n, a), (_, b) in zip(m.named_parameters(), ref.named_parameters()):
        assert a.dtype == torch.float16
        torch.testing.assert_close(a.float(), b, rtol=2 ** -7, atol=2e-3, msg=n)
    pm.destroy()

