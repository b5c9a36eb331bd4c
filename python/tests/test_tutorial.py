"""The pipelining tutorial (002) as a PopTorch program, python/examples/mnist_tutorial.py,
run unchanged against the daemon on Fashion-MNIST read by torchvision.datasets from
Debian's files (no download): a short epoch trains to well above chance and the
inference model made from the host model afterwards measures it on the test set."""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "mnist_tutorial.py")


def run_tutorial(root, *extra):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."))
    return subprocess.run(
        [sys.executable, EXAMPLE, "--data-root", root, "--epochs", "1", "--limit-train",
         "4000", "--limit-test", "1000", "--gradient-accumulation", "1", *extra],
        capture_output=True, text=True, env=env, timeout=600)


def test_tutorial_trains_and_tests(daemon, fashion_root):
    r = run_tutorial(fashion_root)
    print(r.stdout, r.stderr[-2000:])
    assert r.returncode == 0
    assert re.search(r"^Epoch 1/1: 10 calls, 4000 samples in ", r.stdout, re.M)
    m = re.search(r"^Accuracy on test set: (\d+\.\d\d)%$", r.stdout, re.M)
    assert m and float(m.group(1)) > 50.0


def test_tutorial_pipelined_says_what_is_missing(daemon, fashion_root):
    """--strategy pipelined puts B1..B4 on IPUs 0..3: until the client library has the
    placement options the program stops with poptorch.Error saying so (never a fake run)."""
    r = run_tutorial(fashion_root, "--strategy", "pipelined")
    if r.returncode == 0:
        assert "Accuracy on test set" in r.stdout
        return
    assert "placing blocks on 4 IPUs is not supported" in r.stderr
