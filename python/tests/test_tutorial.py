"""The pipelining tutorial (002) as a PopTorch program, python/examples/mnist_tutorial.py,
run unchanged against the daemon on Fashion-MNIST read by torchvision.datasets from
Debian's files (no download): a short epoch trains to well above chance and the
inference model made from the host model afterwards measures it on the test set."""
import os
import re
import subprocess
import sys


HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "mnist_tutorial.py")


def run_tutorial(root, *extra):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."))
    return subprocess.run(
        [sys.executable, EXAMPLE, "--data-root", root, "--epochs", "1", "--limit-test",
         "1000", *extra],
        capture_output=True, text=True, env=env, timeout=600)


def test_tutorial_trains_and_tests(daemon, fashion_root):
    r = run_tutorial(fashion_root, "--limit-train", "4000", "--gradient-accumulation", "1")
    print(r.stdout, r.stderr[-2000:])
    assert r.returncode == 0
    assert re.search(r"^Epoch 1/1: 10 calls, 4000 samples in ", r.stdout, re.M)
    m = re.search(r"^Accuracy on test set: (\d+\.\d\d)%$", r.stdout, re.M)
    assert m and float(m.group(1)) > 50.0


def test_tutorial_pipelined_offloaded(daemon, fashion_root):
    """--strategy pipelined --offload-optimiser puts B1..B4 on IPUs 0..3 with AdamW's state
    off chip (gradient accumulation 8 >= 2 x 4 - 1, PopTorch's minimum for 4 stages): it trains
    as well; a client library
    without the placement options stops with poptorch.Error saying so (never a fake run)."""
    import ipuof._lib
    r = run_tutorial(fashion_root, "--strategy", "pipelined", "--offload-optimiser",
                     "--limit-train", "9600", "--gradient-accumulation", "8")
    print(r.stdout, r.stderr[-2000:])
    if not ipuof._lib.PLACEMENT:
        assert r.returncode == 1
        assert "placing blocks on 4 IPUs, off-chip tensor locations (optimizer) is not " \
            "supported" in r.stderr
        return
    assert r.returncode == 0
    assert re.search(r"^Epoch 1/1: 3 calls, 9600 samples in ", r.stdout, re.M)
    m = re.search(r"^Accuracy on test set: (\d+\.\d\d)%$", r.stdout, re.M)
    assert m and float(m.group(1)) > 50.0


def test_tutorial_sharded_many_workers(daemon, fashion_root):
    """--strategy sharded (B1..B4 on IPUs 0..3, one stage at a time) with 8 Async
    workers: trains and tests as well."""
    r = run_tutorial(fashion_root, "--strategy", "sharded", "--limit-train", "4000",
                     "--gradient-accumulation", "1", "--workers", "8")
    print(r.stdout, r.stderr[-2000:])
    assert r.returncode == 0
    assert re.search(r"^Epoch 1/1: 10 calls, 4000 samples in ", r.stdout, re.M)
    m = re.search(r"^Accuracy on test set: (\d+\.\d\d)%$", r.stdout, re.M)
    assert m and float(m.group(1)) > 50.0


def test_tutorial_batched_loader_trains_as_per_sample(daemon, fashion_root, monkeypatch):
    """The tutorial unchanged, once with poptorch.DataLoader's batched path (the default for
    its FashionMNIST with ToTensor and Normalize) and once per sample in its 2 Async
    workers (IPUOF_BATCHED_LOADER=0): the same batches reach the daemon, so the epoch's
    loss and accuracy and the test accuracy print the same digits."""
    args = ("--limit-train", "8000", "--gradient-accumulation", "2")
    monkeypatch.setenv("IPUOF_BATCHED_LOADER", "1")
    fast = run_tutorial(fashion_root, *args)
    monkeypatch.setenv("IPUOF_BATCHED_LOADER", "0")
    slow = run_tutorial(fashion_root, *args)
    print(fast.stdout, fast.stderr[-2000:], slow.stdout, slow.stderr[-2000:])
    assert fast.returncode == 0 and slow.returncode == 0
    pattern = r"^Epoch 1/1: 10 calls, 8000 samples in [0-9.]+ s, (loss=\S+, acc=\S+)$"
    got = re.search(pattern, fast.stdout, re.M)
    want = re.search(pattern, slow.stdout, re.M)
    assert got and want and got.group(1) == want.group(1)
    test = r"^Accuracy on test set: \d+\.\d\d%$"
    assert re.search(test, fast.stdout, re.M).group(0) == \
        re.search(test, slow.stdout, re.M).group(0)
