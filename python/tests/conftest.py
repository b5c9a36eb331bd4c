"""Fixtures: a real ipuofd on an ephemeral loopback port (one per test session), the
package imported from this checkout, and Fashion-MNIST prepared for torchvision from
Debian's dataset-fashion-mnist files.

IPUOF_BUILD names the build tree (default build); IPUOF_TEST_SERVER, when set, points the
tests at an already-running daemon instead (for debugging one under gdb).
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("IPUOF_BUILD", os.path.join(ROOT, "build")))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("IPUOF_CLIENT_LIB", os.path.join(BUILD, "lib", "libipuof-client.so"))
FASHION = "/usr/share/datasets/fashion-mnist"

# Under a sanitizer build (tests/integ/test_python.sh preloads the runtimes into the
# interpreter) the DataLoader's worker processes start from a fork server: gcc 12's ASan
# allocator is not fork-safe, so a worker forked while another thread of the test process
# was inside malloc could wait for ever on the allocator's lock (seen: a worker stuck in
# asan_realloc). Plain runs keep torch's default, fork.
if os.environ.get("IPUOF_TEST_START_METHOD"):
    import torch.multiprocessing

    torch.multiprocessing.set_start_method(os.environ["IPUOF_TEST_START_METHOD"], force=True)


class Daemon:
    """A running ipuofd: addr "127.0.0.1:PORT", admin socket path, log path."""

    def __init__(self, tmp, listen="127.0.0.1:0"):
        self.dir = tmp
        port_file = os.path.join(tmp, "port")
        self.admin = os.path.join(tmp, "admin.sock")
        self.log = os.path.join(tmp, "log")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [os.path.join(BUILD, "bin", "ipuofd"), "--listen", listen,
                 "--port-file", port_file, "--foreground", "--admin-socket", self.admin],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        port = None
        while time.time() < deadline and self.proc.poll() is None:
            try:
                with open(port_file) as f:
                    port = int(f.read().strip() or 0) or None
            except (OSError, ValueError):
                port = None
            if port:
                break
            time.sleep(0.02)
        if not port or self.proc.poll() is not None:
            self.stop()
            with open(self.log) as f:
                raise RuntimeError("ipuofd did not start: " + f.read()[-2000:])
        self.addr = f"127.0.0.1:{port}"

    def ipuctl(self, *args):
        return subprocess.run([os.path.join(BUILD, "bin", "ipuctl"), "--admin-socket",
                               self.admin, *args], capture_output=True, text=True)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def daemon():
    external = os.environ.get("IPUOF_TEST_SERVER")
    if external:
        os.environ["IPUOF_SERVER"] = external
        yield None
        return
    tmp = tempfile.mkdtemp(prefix="ipuof-pytest-")
    d = Daemon(tmp)
    os.environ["IPUOF_SERVER"] = d.addr
    try:
        yield d
    finally:
        d.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def fashion_root():
    """A root directory for torchvision.datasets.FashionMNIST(root, download=False):
    FashionMNIST/raw/ holding links to Debian's .gz files and their decompressed copies."""
    if not os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
        pytest.fail(f"no Fashion-MNIST in {FASHION}: make deps installs Debian's "
                    "dataset-fashion-mnist")
    tmp = tempfile.mkdtemp(prefix="ipuof-fashion-")
    raw = os.path.join(tmp, "FashionMNIST", "raw")
    os.makedirs(raw)
    import gzip
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        src = os.path.join(FASHION, name + ".gz")
        os.symlink(src, os.path.join(raw, name + ".gz"))
        with gzip.open(src, "rb") as fi, open(os.path.join(raw, name), "wb") as fo:
            shutil.copyfileobj(fi, fo)
    yield tmp
    shutil.rmtree(tmp, ignore_errors=True)
