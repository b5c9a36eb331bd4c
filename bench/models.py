"""Model benchmark (`make bench-models`): torchvision networks through ipuofd against
PyTorch CPU at its best thread setting, in one run.

For each model (torchvision 0.14, weights=None, seed 0, exported with torch.onnx.export at
opset 13, batch 8): inference through a daemon of its own on loopback with
`ipuof-run --device-iterations 4` (32 samples per call; its own "ran N samples in T ms",
which excludes the upload and the cached compile), against PyTorch eval() under
inference_mode at batch 8 on 1 and on 2 threads with OPENBLAS_NUM_THREADS=1 (never more
threads than CPUs); the faster PyTorch setting counts and is named. Rounds interleave the
contestants; medians and min-max over BENCH_ROUNDS rounds, each round's load from other
processes reported. Each model's achieved GFLOP/s (multiply-adds x 2 of its Conv and
Linear layers, counted by forward hooks) is printed beside the machine's sgemm peak
(OpenBLAS, all CPUs, 2048^3).

Training (BENCH_TRAIN_MODELS, default resnet18,mobilenet_v2): one SGD step (lr 0.01) per
micro-batch of 8, cross-entropy loss, 4 steps per call: ipuofd through
`ipuof-run --loss loss --device-iterations 4` on the exported model+loss, PyTorch with
torch.optim.SGD on the same network. torch.onnx.export folds BatchNorm into the
convolutions of a model in eval mode, so both sides train the folded network
(torch.fx.experimental.optimization.fuse): the same graph, the same work.

Kernel efficiency, robust to a loaded machine: CPU seconds (all threads) of one batch-8
step (inference, or a training step: forward, backward, SGD update), least of 3,
in-process (bench/ipuof-cpu.c with IPUOF_SIM_THREADS=1 and with the whole pool) beside
PyTorch's process time for the same step on 1 thread.

The daemon's own cost: each round also runs the same plan in-process (bench/ipuof-cpu.c,
the pool, 4 steps timed after one untimed step: the daemon keeps the compiled executable and
its touched memory between calls) and prints the daemon's samples/s over it (issue goal:
within 5 %, >= 0.95x).

float16 (bench/half_models.py, issue 27): ResNet-50 and a small transformer at micro-batch 4,
training (half partials, stochastic rounding) and inference, ipuofd float16 against ipuofd
float32 and PyTorch float32 at its best of 1 and 2 threads; BENCH_HALF_MODELS selects them.

The tutorial network has its own benchmarks (bench/run.sh, bench/train.sh).
BENCH_PROFILE=1 also prints where ipuofd's host time goes by op type (in-process, the pool,
IPUOF_SIM_PROFILE=1: sim_exe_node_times).
Environment: BENCH_MODELS (comma list, default resnet18,resnet50,mobilenet_v2,
mobilenet_v3_small,efficientnet_b0,convnext_tiny,vit_b_16), BENCH_TRAIN_MODELS,
BENCH_ROUNDS (default 5).
Timings are reported, never judged: exit 0 unless the benchmark cannot run.
"""

import argparse
import copy
import ctypes
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before torch / numpy load OpenBLAS
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from torch.fx.experimental.optimization import fuse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import half_models  # noqa: E402

DEFAULT_MODELS = ("resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,"
                  "convnext_tiny,vit_b_16")
DEFAULT_TRAIN = "resnet18,mobilenet_v2"
BATCH, DI = 8, 4


def isa_line(build):
    """ipuofd's "simulator kernels: LEVEL (why)": the instruction set its kernels run with
    here (IPUOF_SIM_ISA caps it)."""
    out = subprocess.run([os.path.join(build, "bin", "ipuofd"), "--version"],
                         capture_output=True, text=True).stdout.splitlines()
    return out[1] if len(out) > 1 else "simulator kernels: ? (ipuofd --version failed)"


def sgemm_peak():
    """GFLOP/s of OpenBLAS sgemm 2048^3 on every CPU (best of 3)."""
    lib = ctypes.CDLL("libopenblas.so.0")
    ncpu = len(os.sched_getaffinity(0))
    lib.openblas_set_num_threads(ncpu)
    n = 2048
    a = np.random.rand(n, n).astype(np.float32)
    b = np.random.rand(n, n).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    fp = ctypes.POINTER(ctypes.c_float)
    args = [101, 111, 111, n, n, n, ctypes.c_float(1.0), a.ctypes.data_as(fp), n,
            b.ctypes.data_as(fp), n, ctypes.c_float(0.0), c.ctypes.data_as(fp), n]
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        lib.cblas_sgemm(*args)
        best = max(best, 2.0 * n ** 3 / (time.perf_counter() - t0) / 1e9)
    lib.openblas_set_num_threads(1)
    return best, ncpu


def count_flops(model, x):
    """2 x multiply-adds of every Conv2d and Linear for one sample."""
    total = [0]

    def conv_hook(m, inp, out):
        k = m.kernel_size[0] * m.kernel_size[1] * (m.in_channels // m.groups)
        total[0] += 2 * out.numel() * k

    def lin_hook(m, inp, out):
        total[0] += 2 * out.numel() * m.in_features

    hs = []
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            hs.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, torch.nn.Linear):
            hs.append(m.register_forward_hook(lin_hook))
    with torch.inference_mode():
        model(x)
    for h in hs:
        h.remove()
    return total[0] / x.shape[0]


def cpu_jiffies():
    with open("/proc/stat") as f:
        v = [int(t) for t in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]  # busy = all - idle - iowait


def own_jiffies(pids):
    s = 0
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            s += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        except OSError:
            pass
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    names = os.environ.get("BENCH_MODELS", DEFAULT_MODELS).split(",")
    train_names = os.environ.get("BENCH_TRAIN_MODELS", DEFAULT_TRAIN).split(",")
    rounds = int(os.environ.get("BENCH_ROUNDS", "5"))
    run_bin = os.path.join(args.build, "bin", "ipuof-run")
    ncpu = len(os.sched_getaffinity(0))
    t2 = min(2, ncpu)
    peak, _ = sgemm_peak()
    print("model benchmark: batch %d, ipuofd with --device-iterations %d through its own "
          "daemon; pytorch %s (1 and %d threads, OPENBLAS_NUM_THREADS=1)" %
          (BATCH, DI, torch.__version__, t2))
    print("machine: %d CPUs; OpenBLAS sgemm peak (2048^3, %d threads) %.1f GFLOP/s; %s" %
          (ncpu, ncpu, peak, isa_line(args.build)))
    with tempfile.TemporaryDirectory(prefix="ipuof-models-") as wd:
        port_file = os.path.join(wd, "port")
        log = open(os.path.join(wd, "ipuofd.log"), "w")
        daemon = subprocess.Popen([os.path.join(args.build, "bin", "ipuofd"), "--listen",
                                   "127.0.0.1:0", "--port-file", port_file, "--ipus", "1",
                                   "--admin-socket", os.path.join(wd, "admin.sock"),
                                   "--foreground"], stdout=log, stderr=log)
        try:
            for _ in range(200):
                if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
                    break
                if daemon.poll() is not None:
                    sys.exit("bench-models: ipuofd exited with status %d" % daemon.returncode)
                time.sleep(0.05)
            else:
                sys.exit("bench-models: ipuofd did not write its port in 10 s")
            with open(port_file) as f:
                server = "127.0.0.1:" + f.read().strip()
            cpu_tool = build_cpu_tool(args.build)
            results = [bench_model(n, wd, run_bin, server, rounds, t2, daemon.pid, False,
                                   cpu_tool) for n in names if n]
            results += [bench_model(n, wd, run_bin, server, rounds, t2, daemon.pid, True,
                                    cpu_tool) for n in train_names if n]
            half_models.run_all(wd, lambda path, extra: ipu_rate(run_bin, server, path, extra),
                                rounds, t2, isa_line(args.build))
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(10)
            except subprocess.TimeoutExpired:
                daemon.kill()
    print()
    print("summary (samples/s, medians over %d rounds; machine sgemm peak %.1f GFLOP/s):" %
          (rounds, peak))
    print("| model | mode | PyTorch 1 thread | PyTorch %d threads | ipuofd | ipuofd / PyTorch's "
          "best | ipuofd GFLOP/s |" % t2)
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print("| %s | %s | %.1f | %.1f | %.1f | %.2f (best: %s) | %.1f |" %
              (r["name"], r["mode"], r["t1"], r["t2"], r["ipu"], r["ratio"], r["best"],
               r["gflops"]))
    print()
    print("Through the daemon vs the same plan in-process (%d steps a call, medians):" % DI)
    print("| model | mode | daemon | in-process | daemon / in-process |")
    print("|---|---|---|---|---|")
    for r in results:
        if r["vs_inproc"] is not None:
            print("| %s | %s | %.1f | %.1f | %.2f |" % (r["name"], r["mode"], r["ipu"],
                                                      r["ipu"] / r["vs_inproc"], r["vs_inproc"]))
    print()
    print("CPU seconds per batch-8 step (least of 3; less disturbed by other load):")
    print("| model | mode | ipuofd, 1 thread | ipuofd, pool (all threads) | PyTorch, 1 thread | "
          "PyTorch / ipuofd (1 thread) |")
    print("|---|---|---|---|---|---|")
    for r in results:
        if r["cpu"]:
            c = r["cpu"]
            print("| %s | %s | %.3f | %.3f | %.3f | %.2f |" % (r["name"], r["mode"], c[0], c[1],
                                                              c[2], c[2] / c[0]))


def ipu_rate(run_bin, server, path, extra):
    """Samples/s of one `ipuof-run --model path EXTRA...` call through the daemon at server
    (its own "ran N samples in T ms"); exits when it fails."""
    p = subprocess.run([run_bin, "--model", path] + extra,
                       env=dict(os.environ, IPUOF_SERVER=server), capture_output=True,
                       text=True, timeout=1800)
    m = re.search(r"ran (\d+) samples in ([\d.]+) ms", p.stdout + p.stderr)
    if p.returncode != 0 or m is None:
        sys.exit("bench-models: %s: ipuof-run failed (%d): %s" %
                 (path, p.returncode, (p.stdout + p.stderr).strip()))
    return int(m.group(1)) / (float(m.group(2)) / 1000.0)


class WithLoss(torch.nn.Module):
    """The network followed by its cross-entropy loss: what a training model exports."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, labels):
        return torch.nn.functional.cross_entropy(self.net(x), labels)


def build_cpu_tool(build):
    """Compiles bench/ipuof-cpu.c against the built simulator library; returns its path."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(build, "bench", "ipuof-cpu")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cmd = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
           "-D_GNU_SOURCE", "-Iclient/include", "-Isim", "-o", out,
           *["-I" + os.path.join("sim", d) for d in sorted(os.listdir(os.path.join(os.path.dirname(here), "sim")))
             if os.path.isdir(os.path.join(os.path.dirname(here), "sim", d))],
           os.path.join(here, "ipuof-cpu.c"), os.path.join(build, "lib", "libipuofsim.a"),
           "-lprotobuf-c", "-lz", "-lopenblas", "-ldnnl", "-lgomp", "-lm", "-pthread"]
    subprocess.run(cmd, check=True, cwd=os.path.dirname(here))
    return out


def run_cpu_tool(tool, path, rounds, train, env=None):
    """bench/ipuof-cpu's output for ROUNDS runs of the model at path (a training step when
    train), with env added to the environment; exits when it fails."""
    p = subprocess.run([tool, path, str(BATCH), str(rounds)] + (["loss"] if train else []),
                       env=dict(os.environ, **(env or {})), capture_output=True, text=True,
                       timeout=900)
    if p.returncode != 0 or "cpu_s=" not in p.stdout:
        sys.exit("bench-models: ipuof-cpu failed: %s" % (p.stdout + p.stderr).strip())
    return p.stdout


def cpu_seconds(tool, path, model, x, threads_env, train=None):
    """(ipuofd in-process CPU s with 1 thread, with the pool, PyTorch 1-thread CPU s) of one
    batch-8 step: inference, or with train = (labels, optimizer) a training step (forward,
    backward, SGD update; ipuof-cpu's labels are zeros, which costs the same)."""
    res = []
    for env in threads_env:
        out = run_cpu_tool(tool, path, 3, train, env)
        res.append(float(re.search(r"cpu_s=([\d.]+)", out).group(1)))
    torch.set_num_threads(1)
    best = 1e30
    for _ in range(3):
        t = time.process_time()
        if train:
            labels, opt = train
            model.train()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), labels).backward()
            opt.step()
        else:
            with torch.inference_mode():
                model(x)
        best = min(best, time.process_time() - t)
    return res + [best]


def check_output(model, x, want, path, name):
    """ipuofd's output (the ONNX tensor at path) against PyTorch's float32 one (want): within
    rtol 1e-4 / atol 1e-5 (the ONNX backend tests' tolerance), or else no further from
    PyTorch's float64 result than twice PyTorch's own float32 result is (a deep network's
    rounding, as tests/integ/torch_models.py accepts it). Exits when neither holds; returns
    a sentence with the figures."""
    got = numpy_helper.to_array(onnx.load_tensor(path)).astype(np.float64)
    diff = float(np.abs(got - want).max())
    if np.allclose(got, want, rtol=1e-4, atol=1e-5):
        return "max abs diff %.3g" % diff
    with torch.inference_mode():
        want64 = copy.deepcopy(model).double()(x.double()).numpy()
    own = float(np.abs(want - want64).max())
    ours = float(np.abs(got - want64).max())
    if ours > 2 * own:
        sys.exit("bench-models: %s: output differs from PyTorch's by up to %.3g; against "
                 "float64, ipuofd %.3g, PyTorch float32 %.3g" % (name, diff, ours, own))
    return ("max abs diff %.3g (outside rtol 1e-4 / atol 1e-5; against float64: ipuofd "
            "%.3g, PyTorch float32 %.3g)" % (diff, ours, own))


def bench_model(name, wd, run_bin, server, rounds, t2, dpid, train, cpu_tool=None):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(BATCH, 3, 224, 224)
    labels = torch.randint(0, 1000, (BATCH,))
    mode = "training" if train else "inference"
    tag = name + ("_train" if train else "")
    path = os.path.join(wd, tag + ".onnx")
    inp = os.path.join(wd, name + "_in.pb")
    lab = os.path.join(wd, name + "_labels.pb")
    onnx.save_tensor(numpy_helper.from_array(x.numpy(), "input"), inp)
    flops = count_flops(model, x)
    t0 = time.perf_counter()
    if train:
        model = fuse(model)   # what the exporter does to BatchNorm in eval mode
        torch.onnx.export(WithLoss(model), (x, labels), path, opset_version=13,
                          input_names=["input", "labels"], output_names=["loss"])
        onnx.save_tensor(numpy_helper.from_array(labels.numpy(), "labels"), lab)
        flops *= 3            # forward, input gradients, weight gradients
    else:
        torch.onnx.export(model, x, path, opset_version=13, input_names=["input"],
                          output_names=["output"])
    export_s = time.perf_counter() - t0
    if not train:
        with torch.inference_mode():
            y = model(x)
    env = dict(os.environ, IPUOF_SERVER=server)

    def ipu_run(extra):
        p = subprocess.run([run_bin, "--model", path, "--input", inp] + extra, env=env,
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            sys.exit("bench-models: %s: ipuof-run failed (%d): %s" %
                     (name, p.returncode, (p.stdout + p.stderr).strip()))
        return p.stdout + p.stderr

    run_args = ["--input", "labels=" + lab, "--loss", "loss"] if train else []
    out_dir = os.path.join(wd, tag + "_out")
    out = ipu_run(run_args if train else ["--output-dir", out_dir])
    compile_ms = re.search(r"compiled in ([\d.]+) ms", out)
    print("\n%s %s: %.2f GFLOP per sample; torch.onnx.export %.2f s; ipuofd compile %s ms%s" %
          (name, mode, flops / 1e9, export_s, compile_ms.group(1) if compile_ms else "?",
           "" if train else "; output vs pytorch: " + check_output(
               model, x, y.numpy(), os.path.join(out_dir, "output.pb"), name)))

    busy = []   # CPUs the daemon kept busy per call: its CPU time over the run's wall time

    def ipuofd():
        j0 = own_jiffies([dpid])
        out = ipu_run(run_args + ["--device-iterations", str(DI)])
        j1 = own_jiffies([dpid])
        m = re.search(r"ran (\d+) samples in ([\d.]+) ms", out)
        busy.append((j1 - j0) / os.sysconf("SC_CLK_TCK") / (float(m.group(2)) / 1000.0))
        return int(m.group(1)) / (float(m.group(2)) / 1000.0)

    opt = torch.optim.SGD(model.parameters(), lr=0.01) if train else None

    def torch_at(threads):
        def run():
            torch.set_num_threads(threads)
            if train:
                model.train()
                t = time.perf_counter()
                for _ in range(DI):
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(model(x), labels).backward()
                    opt.step()
                return BATCH * DI / (time.perf_counter() - t)
            with torch.inference_mode():
                t = time.perf_counter()
                for _ in range(DI):
                    model(x)
                return BATCH * DI / (time.perf_counter() - t)
        return run

    def inproc():
        out = run_cpu_tool(cpu_tool, path, DI + 1, train)
        return BATCH * DI / float(re.search(r"wall_rest_s=([\d.]+)", out).group(1))

    sides = {"ipu": ipuofd, "t1": torch_at(1), "t2": torch_at(t2)}
    if cpu_tool is not None:
        sides["inproc"] = inproc
    for f in sides.values():   # warm-up
        f()
    rates = {k: [] for k in sides}
    loads = []
    for _ in range(rounds):
        b0, o0, w0 = cpu_jiffies(), own_jiffies([os.getpid(), dpid]), time.monotonic()
        for k, f in sides.items():
            rates[k].append(f())
            time.sleep(0.2)
        others = max(0, (cpu_jiffies() - b0) - (own_jiffies([os.getpid(), dpid]) - o0))
        loads.append(others / os.sysconf("SC_CLK_TCK") / (time.monotonic() - w0))
    med = {k: statistics.median(v) for k, v in rates.items()}
    for k, label in (("ipu", "ipuofd"), ("t1", "pytorch 1 thread"),
                     ("t2", "pytorch %d threads" % t2), ("inproc", "same plan in-process")):
        if k not in med:
            continue
        print("  %-20s %7.1f samples/s  (min %.1f, max %.1f)" %
              (label, med[k], min(rates[k]), max(rates[k])))
    print("  other processes kept %s CPUs busy per round" % " ".join("%.2f" % v for v in loads))
    print("  ipuofd kept %.2f CPUs busy during its calls (median; its CPU time, the upload "
          "included, over the run's wall time)" % statistics.median(busy))
    best = "1 thread" if med["t1"] >= med["t2"] else "%d threads" % t2
    ratio = med["ipu"] / max(med["t1"], med["t2"])
    gflops = flops * med["ipu"] / 1e9
    print("%s %s: ipuofd %.1f samples/s, pytorch best (%s) %.1f samples/s, ratio %.2fx "
          "(target >= 1.0x)%s; ipuofd %.1f GFLOP/s" %
          (name, mode, med["ipu"], best, max(med["t1"], med["t2"]), ratio,
           "" if ratio >= 1.0 else "  MISSED", gflops))
    vs_inproc = med["ipu"] / med["inproc"] if "inproc" in med else None
    if vs_inproc is not None:
        print("%s %s: through the daemon %.1f samples/s, the same plan in-process %.1f "
              "(%d steps a call, the pool): %.2fx (target >= 0.95x)%s" %
              (name, mode, med["ipu"], med["inproc"], DI, vs_inproc,
               "" if vs_inproc >= 0.95 else "  MISSED"))
    cpu = None
    if cpu_tool is not None:
        cpu = cpu_seconds(cpu_tool, path, model, x, [{"IPUOF_SIM_THREADS": "1"}, {}],
                          (labels, opt) if train else None)
        if os.environ.get("BENCH_PROFILE") == "1":
            out = run_cpu_tool(cpu_tool, path, 3, train, {"IPUOF_SIM_PROFILE": "1"})
            print("  " + "\n  ".join(out.strip().splitlines()[1:13]))
        print("  CPU seconds per batch-8 %s step (least of 3): ipuofd %.3f on 1 thread, %.3f "
              "on the pool; pytorch %.3f on 1 thread (pytorch / ipuofd on 1 thread: %.2fx)" %
              (mode, cpu[0], cpu[1], cpu[2], cpu[2] / cpu[0]))
    return dict(name=name, mode=mode, cpu=cpu, vs_inproc=vs_inproc, t1=med["t1"], t2=med["t2"], ipu=med["ipu"], ratio=ratio,
                best=best, gflops=gflops)


if __name__ == "__main__":
    main()
