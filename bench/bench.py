"""Inference benchmark: the reference MNIST CNN on ipuofd against PyTorch CPU.

Started by bench/run.sh (`make bench`). Defines the network in PyTorch, exports it to ONNX
with a symbolic batch dimension, starts its own ipuofd on loopback and drives
build/bench/ipuof-bench (C, libipuof-client + the in-process simulator) over a pipe, so
that the repetitions of every contestant are interleaved with PyTorch's in this process.

Cases (targets from the project's performance promises):
  batch1000      ipuofd micro_batch 1000, device_iterations 1, one call per batch
                 vs PyTorch at batch 1000                                  >= 1.0x
  mb8-di100      ipuofd micro_batch 8, device_iterations 100 (800 samples per call)
                 vs PyTorch at batch 8, one call per batch                 >= 2.0x
PyTorch runs at 1 and at 2 threads (OPENBLAS_NUM_THREADS=1, never more threads than
CPUs); each case compares with the faster of the two and names it.
  di100-inproc   the mb8-di100 calls through the daemon vs the same compiled plan
                 run in-process (sim_compile + sim_exe_run, no network)    >= 0.9x
  tls-mb8-di100  the mb8-di100 calls through a second daemon with TLS on (certificates
                 made with openssl in the run's temp dir, the client on IPUOF_TLS_CA_FILE)
                 vs the plain daemon (same options, no TLS)                >= 0.9x

Timings are reported, never judged: the script exits 0 when a target is missed and
prints MISSED for it. Environment knobs: BENCH_THREADS (threads for both sides, default:
the CPUs this process may use), BENCH_REPS (default 11), BENCH_REP_SECONDS (default 0.6).
"""

import argparse
import gzip
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # PyTorch's own BLAS: intra-op threads only
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
SETTLE_S = 0.2  # idle time between contestants: lets spinning BLAS/OpenMP threads sleep
QUIET_CPUS = 0.1  # a round is quiet when other processes used at most this many CPUs


def mnist_cnn():
    """The reference network, in the layer order of the project's reference documents."""
    return nn.Sequential(
        nn.Conv2d(1, 10, kernel_size=5),
        nn.MaxPool2d(2),
        nn.ReLU(),
        nn.Conv2d(10, 20, kernel_size=5),
        nn.MaxPool2d(2),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(320, 256),
        nn.ReLU(),
        nn.Linear(256, 10),
    )


def load_images(n_max):
    """Fashion-MNIST test images as (N, 784) float32, normalised; random when absent."""
    try:
        with gzip.open(FASHION, "rb") as f:
            raw = f.read()
        magic, n, h, w = np.frombuffer(raw[:16], dtype=">u4")
        if magic != 2051 or h != 28 or w != 28:
            raise ValueError("not an idx3 file of 28x28 images")
        x = np.frombuffer(raw[16:], dtype=np.uint8)[: n * 784].reshape(n, 784)[:n_max]
        x = (x.astype(np.float32) / 255.0 - 0.2860) / 0.3530
        return np.ascontiguousarray(x, dtype=np.float32), "Fashion-MNIST t10k (%s)" % FASHION
    except (OSError, ValueError) as e:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((n_max, 784), dtype=np.float32)
        return x, "random normal (Fashion-MNIST unavailable: %s)" % e


class Driver:
    """The ipuof-bench process: one command line in, one answer line out."""

    def __init__(self, path, env):
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1, env=env)

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        ans = self.p.stdout.readline().strip()
        if not ans.startswith("ok"):
            raise RuntimeError("ipuof-bench: '%s' answered '%s'" % (line, ans or "nothing"))
        out = {}
        rest = ans[2:].strip()
        while rest:
            tok, _, rest = rest.partition(" ")
            k, _, v = tok.partition("=")
            if k == "config":       # free text, always last
                v = (v + " " + rest).strip()
                rest = ""
            out[k] = v
        return out, ans

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait(timeout=30)


def isa_line(build):
    """ipuofd's "simulator kernels: LEVEL (why)": the instruction set its kernels run with
    here (IPUOF_SIM_ISA caps it)."""
    out = subprocess.run([os.path.join(build, "bin", "ipuofd"), "--version"],
                         capture_output=True, text=True).stdout.splitlines()
    return out[1] if len(out) > 1 else "simulator kernels: ? (ipuofd --version failed)"


def cpu_jiffies(pids):
    """(busy jiffies of the whole machine, jiffies used by pids and this process)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = sum(v) - v[3] - v[4]  # all but idle and iowait
    ours = 0
    for pid in ["self"] + [str(p) for p in pids]:
        try:
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ours += int(fields[11]) + int(fields[12])  # utime + stime, all threads
        except OSError:
            pass
    return busy, ours


def make_tls_files(wd):
    """A CA and a certificate for 127.0.0.1 signed by it, made with openssl in wd (as
    tests/integ/test_tls.sh does). Returns (daemon config text, CA file) or raises
    RuntimeError saying what failed."""
    def ossl(*a):
        r = subprocess.run(["openssl"] + list(a), cwd=wd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("openssl %s failed: %s" % (a[0], r.stderr.strip()[-300:]))
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    try:
        ossl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=ipuof-bench-ca")
        ossl("req", "-new", *ec, "-keyout", "srv.key", "-out", "srv.csr",
             "-subj", "/CN=localhost")
        with open(os.path.join(wd, "san.ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        ossl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "san.ext")
    except FileNotFoundError:
        raise RuntimeError("openssl is not installed (Debian's openssl package)")
    conf = "[server]\ntls_cert_file = %s\ntls_key_file = %s\n" % (
        os.path.join(wd, "srv.pem"), os.path.join(wd, "srv.key"))
    return conf, os.path.join(wd, "ca.pem")


def proc_cpu_s(pids):
    """CPU seconds (user + system, all threads) used so far by the processes pids."""
    total = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def start_daemon(ipuofd, workdir, env, tag="", conf=None):
    """ipuofd on an ephemeral loopback port, with the config text conf (None: no file);
    tag keeps the files of a second daemon apart. Returns (process, address)."""
    port_file = os.path.join(workdir, "port" + tag)
    log_path = os.path.join(workdir, "ipuofd%s.log" % tag)
    log = open(log_path, "w")
    argv = [ipuofd, "--listen", "127.0.0.1:0", "--port-file", port_file,
            "--ipus", "1", "--foreground", "--log-level", "warn"]
    if conf is not None:
        with open(os.path.join(workdir, "ipuofd%s.conf" % tag), "w") as f:
            f.write(conf)
        argv += ["--config", os.path.join(workdir, "ipuofd%s.conf" % tag)]
    p = subprocess.Popen(argv, stderr=log, env=env)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if p.poll() is not None:
            break
        if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
            with open(port_file) as f:
                return p, "127.0.0.1:%s" % f.read().strip()
        time.sleep(0.05)
    p.kill()
    p.wait()
    with open(log_path) as f:
        sys.exit("bench: ipuofd%s did not start:\n%s" % (tag, f.read()))


def stop_daemon(p):
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=40)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


class Contestant:
    """One side of a case. run(seconds) makes calls until `seconds` have passed and returns
    (calls, elapsed): repetitions are time-boxed, so a stall during warm-up cannot shrink
    them."""

    def __init__(self, label, per_call, run):
        self.label = label
        self.per_call = per_call  # samples per call
        self.run = run
        self.calls = []           # calls made in each repetition
        self.rates = []

    def warm_up(self, seconds):
        self.run(seconds)

    def rep(self, seconds):
        calls, t = self.run(seconds)
        self.calls.append(calls)
        self.rates.append(calls * self.per_call / t)

    def kept(self):
        return [self.rates[i] for i in KEPT]

    def median(self):
        return statistics.median(self.kept())

    def calls_per_rep(self):
        return statistics.median([self.calls[i] for i in KEPT])


KEPT = []  # indices of the rounds the statistics use (see main)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--label", default="")
    args = ap.parse_args()

    # SIGTERM unwinds like Ctrl-C, so the daemon and the driver are always stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    ipuofd = os.path.join(args.build, "bin", "ipuofd")
    driver_bin = os.path.join(args.build, "bench", "ipuof-bench")
    n_threads = int(os.environ.get("BENCH_THREADS", "0")) or len(os.sched_getaffinity(0))
    reps = int(os.environ.get("BENCH_REPS", "11"))
    rep_s = float(os.environ.get("BENCH_REP_SECONDS", "0.6"))
    t_start = time.monotonic()

    torch.manual_seed(0)
    torch.set_num_threads(n_threads)
    net = mnist_cnn().eval()
    images, source = load_images(10000)
    n_img = images.shape[0]
    xs = torch.from_numpy(images).view(n_img, 1, 28, 28)

    env = {k: v for k, v in os.environ.items() if not k.startswith("IPUOF_TLS")}
    env["OPENBLAS_NUM_THREADS"] = str(n_threads)  # the daemon's and in-process sim's BLAS

    with tempfile.TemporaryDirectory(prefix="ipuof-bench-") as wd:
        onnx_path = os.path.join(wd, "mnist_cnn.onnx")
        torch.onnx.export(net, xs[:1], onnx_path, input_names=["image"],
                          output_names=["logits"], opset_version=13,
                          dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
        data_path = os.path.join(wd, "images.f32")
        images.tofile(data_path)

        # The TLS daemon: the plain daemon's options plus a certificate (its config holds
        # only the tls_* lines), and a second driver whose client turns TLS on from
        # IPUOF_TLS_CA_FILE and checks the certificate against 127.0.0.1.
        try:
            tls_conf, tls_ca = make_tls_files(wd)
        except RuntimeError as e:
            sys.exit("bench: cannot make the TLS certificates: %s" % e)
        daemon, addr = start_daemon(ipuofd, wd, env)
        daemon_tls, addr_tls = None, None
        drv = drv_tls = None
        failed = ""
        try:
            daemon_tls, addr_tls = start_daemon(ipuofd, wd, env, "-tls", tls_conf)
            drv = Driver(driver_bin, env)
            info, _ = drv.cmd("info")
            drv.cmd("data %s %d" % (data_path, n_img))
            drv.cmd("connect %s" % addr)
            comp = {}
            comp["b1000"], _ = drv.cmd("load b1000 %s 1000 1" % onnx_path)
            comp["mb8"], _ = drv.cmd("load mb8 %s 8 100" % onnx_path)
            drv_tls = Driver(driver_bin, dict(env, IPUOF_TLS_CA_FILE=tls_ca))
            drv_tls.cmd("data %s %d" % (data_path, n_img))
            drv_tls.cmd("connect %s" % addr_tls)
            drv_tls.cmd("load mb8 %s 8 100" % onnx_path)

            print_header(args, n_threads, reps, rep_s, info, source, addr, addr_tls)

            check_outputs(net, xs, wd, drv, drv_tls)

            # ---- contestants
            state = {"off": 0}

            def torch_run(batch, threads=None):
                def run(seconds):
                    if threads is not None:
                        torch.set_num_threads(threads)
                    try:
                        return torch_calls(batch, seconds)
                    finally:
                        torch.set_num_threads(n_threads)
                return run

            def torch_calls(batch, seconds):
                calls = 0
                with torch.inference_mode():
                    t0 = time.perf_counter()
                    while True:
                        off = state["off"]
                        if off + batch > n_img:
                            off = 0
                        state["off"] = off + batch
                        net(xs[off:off + batch])
                        calls += 1
                        t = time.perf_counter() - t0
                        if t >= seconds:
                            return calls, t

            run_us = {"b1000": [], "mb8": [], "tls": []}

            def drv_run(how, name, d=None, key=None, dmn=None):
                d, dmn = d or drv, dmn or daemon
                def run(seconds):
                    cpu0 = proc_cpu_s([dmn.pid, d.p.pid])
                    r, _ = d.cmd("for %s %s %.3f" % (how, name, seconds))
                    cpu = proc_cpu_s([dmn.pid, d.p.pid]) - cpu0
                    if how == "daemon":
                        run_us[key or name].append((float(r["seconds"]), int(r["calls"]),
                                                    int(r["run_us"]) / 1e6, cpu))
                    return int(r["calls"]), float(r["seconds"])
                return run

            c_d1000 = Contestant("ipuofd mb1000 di1", 1000, drv_run("daemon", "b1000"))
            t2 = min(2, n_threads)
            c_t1000 = Contestant("pytorch batch 1000, %d thr" % t2, 1000,
                                 torch_run(1000, threads=t2))
            c_t1000_1 = Contestant("pytorch batch 1000, 1 thr", 1000, torch_run(1000, threads=1))
            c_d8 = Contestant("ipuofd mb8 di100", 800, drv_run("daemon", "mb8"))
            c_s8 = Contestant("ipuofd TLS mb8 di100", 800,
                              drv_run("daemon", "mb8", drv_tls, "tls", daemon_tls))
            c_t8 = Contestant("pytorch batch 8, %d thr" % t2, 8, torch_run(8, threads=t2))
            c_i8 = Contestant("in-process mb8 di100", 800, drv_run("inproc", "mb8"))
            # Small batches often run best on one thread: both are measured, the best counts.
            c_t8_1 = Contestant("pytorch batch 8, 1 thr", 8, torch_run(8, threads=1))
            order = [c_d1000, c_t1000, c_t1000_1, c_d8, c_s8, c_t8, c_i8, c_t8_1]
            for c in order:
                c.warm_up(min(1.0, rep_s))
                time.sleep(SETTLE_S)
            for name in run_us:
                run_us[name].clear()
            loads = run_rounds(order, [daemon.pid, drv.p.pid, daemon_tls.pid, drv_tls.p.pid],
                               reps, rep_s, (c_d8, c_s8))
            quiet = [i for i, x in enumerate(loads) if x <= QUIET_CPUS]
            KEPT[:] = quiet if len(quiet) >= 3 else range(len(loads))
            print_table(order)
            print("rounds: %d run, %d quiet (other processes kept <= %.2f CPUs busy; per round: "
                  "%s)" % (len(loads), len(quiet), QUIET_CPUS,
                           " ".join("%.2f" % x for x in loads)))
            if len(quiet) >= 3:
                print("statistics over the %d quiet rounds" % len(quiet))
            else:
                print("WARNING: fewer than 3 quiet rounds; statistics over all rounds, disturbed "
                      "by other work on this machine: run again when it is idle")
            print()
            def best(*cs):
                return max(cs, key=lambda c: c.median())
            b1000, b8 = best(c_t1000, c_t1000_1), best(c_t8, c_t8_1)
            cases = [("batch1000", c_d1000, "ipuofd", b1000,
                      "pytorch best (%s)" % b1000.label.split(", ")[-1], 1.0),
                     ("mb8-di100", c_d8, "ipuofd", b8,
                      "pytorch best (%s)" % b8.label.split(", ")[-1], 2.0),
                     ("di100-inproc", c_d8, "ipuofd", c_i8, "in-process", 0.9),
                     ("tls-mb8-di100", c_s8, "ipuofd TLS", c_d8, "ipuofd plain", 0.9)]
            print_overheads(c_d1000, c_d8, c_s8, c_i8, run_us, comp)
            print_tls_rounds(c_s8, c_d8)
            print("pytorch batch 8: %.0f samples/s on 1 thread, %.0f on %d; batch 1000: %.0f on "
                  "1 thread, %.0f on %d" % (c_t8_1.median(), c_t8.median(), t2,
                                            c_t1000_1.median(), c_t1000.median(), t2))
            print()
            print("summary%s (%s):" % (" [%s]" % args.label if args.label else "",
                                       isa_line(args.build)))
            for case, a, an, b, bn, target in cases:
                ratio = a.median() / b.median()
                print("%s: %s %.0f samples/s, %s %.0f samples/s, ratio %.2fx (target >= %.1fx)%s"
                      % (case, an, a.median(), bn, b.median(), ratio, target,
                         "" if ratio >= target else "  MISSED"))
        except RuntimeError as e:
            failed = str(e)
        finally:
            for d in (drv, drv_tls):
                if d is not None:
                    d.close()
            for p, tag in ((daemon, ""), (daemon_tls, " (TLS)")):
                rc = stop_daemon(p) if p is not None else 0
                if rc != 0:
                    print("bench: ipuofd%s exited with status %d" % (tag, rc))
        if failed:
            print("bench: FAILED: %s" % failed)
            for tag in ("", "-tls"):
                with open(os.path.join(wd, "ipuofd%s.log" % tag)) as f:
                    tail = f.readlines()[-20:]
                print("bench: the end of ipuofd%s's log:\n%s" % (tag, "".join(tail)), end="")
            sys.exit(1)
    print("(benchmark took %.0f s)" % (time.monotonic() - t_start))


def check_outputs(net, xs, wd, drv, drv_tls):
    """Prints how the logits of ipuofd (both configurations, plain and TLS) and of the
    in-process plan agree with PyTorch's on the same images."""
    # ---- correctness: outputs of ipuofd, the in-process plan and PyTorch agree
    print("correctness (logits of the first 1000 / 800 test images):")
    with torch.inference_mode():
        ref = net(xs[:1000]).numpy()
    for d, how, name, n in ((drv, "daemon", "b1000", 1000), (drv, "daemon", "mb8", 800),
                            (drv, "inproc", "mb8", 800), (drv_tls, "daemon", "mb8", 800)):
        out_path = os.path.join(wd, "out.f32")
        d.cmd("dump %s %s 0 %s" % (how, name, out_path))
        got = np.fromfile(out_path, dtype=np.float32).reshape(n, 10)
        diff = float(np.max(np.abs(got - ref[:n])))
        agree = np.mean(np.argmax(got, 1) == np.argmax(ref[:n], 1)) * 100
        verdict = "ok" if diff <= 1e-3 else "MISMATCH"
        who = "inproc" if how == "inproc" else "ipuofd" if d is drv else "TLS"
        print("  %-6s %-5s vs pytorch: max abs diff %.3g, argmax agrees on %.1f%%  %s"
              % (who, name, diff, agree, verdict))
    print()


def run_rounds(order, pids, reps, rep_s, pair):
    """Runs the rounds (every contestant in order, the two of pair taking turns going first)
    and returns the CPUs other processes kept busy during each; pids are the benchmark's
    own processes."""
    # Rounds: every contestant once, in turn. The machine may be shared: a round
    # during which other processes kept more than QUIET_CPUS busy is not used, and
    # rounds go on (up to twice the count asked for) until `reps` quiet ones are in.
    loads = []
    while len(loads) < 2 * reps and sum(x <= QUIET_CPUS for x in loads) < reps:
        busy0, ours0 = cpu_jiffies(pids)
        t0 = time.monotonic()
        # The plain and the TLS daemon take turns going first, so neither always
        # runs right after PyTorch's batch 1000 (the order cannot bias the ratio).
        i = min(order.index(c) for c in pair)
        order[i], order[i + 1] = order[i + 1], order[i]
        for c in order:
            c.rep(rep_s)
            time.sleep(SETTLE_S)
        busy1, ours1 = cpu_jiffies(pids)
        others = max(0, (busy1 - busy0) - (ours1 - ours0)) / os.sysconf("SC_CLK_TCK")
        loads.append(others / (time.monotonic() - t0))
    return loads


def print_header(args, n_threads, reps, rep_s, info, source, addr, addr_tls):
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    print("ipuofd inference benchmark%s" % (" [%s]" % args.label if args.label else ""))
    print("  network    MNIST CNN: Conv 1->10 k5, MaxPool 2, ReLU, Conv 10->20 k5, MaxPool 2, "
          "ReLU, Flatten, Linear 320->256, ReLU, Linear 256->10 (seeded random weights)")
    print("  data       %s" % source)
    print("  machine    %s, %d CPUs usable" % (cpu, len(os.sched_getaffinity(0))))
    print("  threads    ipuofd and the in-process plan: the simulator's host thread pool (%d "
          "CPUs, OpenBLAS at 1 thread); PyTorch: 1 and %d threads with OPENBLAS_NUM_THREADS=1, "
          "the faster counts" % (n_threads, min(2, n_threads)))
    print("  openblas   kernel %s, %s threads (%s); OPENBLAS_CORETYPE %s"
          % (info.get("corename", "?"), info.get("openblas_threads", "?"),
             info.get("config", "?"),
             "unset" if coretype is None else "=%s" % (coretype or "(empty)")))
    print("  pytorch    %s (%s), oneDNN %s"
          % (torch.__version__, torch.__file__.rsplit("/", 2)[0],
             "on" if torch.backends.mkldnn.is_available() else "off"))
    print("  ipuofd     %s, listening on %s (plain) and %s (TLS); %s"
          % (args.build + "/bin/ipuofd", addr, addr_tls, isa_line(args.build)))
    print("  timing     after warm-up, %d quiet rounds (at most %d rounds) of ~%.1f s per "
          "contestant, interleaved; median (min-max)" % (reps, 2 * reps, rep_s))
    print()


def print_table(order):
    print("%-22s %12s %10s %14s %22s" % ("contestant", "samples/call", "calls/rep",
                                         "median samp/s", "min - max"))
    for c in order:
        print("%-22s %12d %10.0f %14.0f %22s" % (c.label, c.per_call, c.calls_per_rep(), c.median(),
                                               "%.0f - %.0f" % (min(c.kept()), max(c.kept()))))
    print()


def print_tls_rounds(c_s8, c_d8):
    """The TLS/plain ratio of each round (both turns of a round are neighbours in time, so
    the per-round ratio is steadier than the ratio of the medians on a loaded machine)."""
    r = [c_s8.rates[i] / c_d8.rates[i] for i in KEPT]
    print("TLS / plain mb8 di100, per round used: median %.3f (min %.3f, max %.3f): %s"
          % (statistics.median(r), min(r), max(r), " ".join("%.2f" % x for x in r)))
    print()


def print_overheads(c_d1000, c_d8, c_s8, c_i8, run_us, comp):
    """Where a daemon call's time goes: the daemon's own run time (RunReply.run_us) against
    the wall time the client saw; the rest is transport, framing and scheduling."""
    print("daemon call breakdown (sums over the rounds used):")
    for label, name, c in (("mb1000 di1", "b1000", c_d1000), ("mb8 di100", "mb8", c_d8),
                           ("TLS mb8", "tls", c_s8)):
        kept = [run_us[name][i] for i in KEPT if i < len(run_us[name])]
        wall = sum(k[0] for k in kept)
        calls = sum(k[1] for k in kept)
        sim = sum(k[2] for k in kept)
        cpu = sum(k[3] for k in kept)
        if calls == 0 or wall == 0:
            continue
        print("  %-10s %.2f ms per call: %.2f ms running in the daemon's simulator, "
              "%.2f ms (%.1f%%) outside it; CPU %.2f ms per call (daemon + client)"
              % (label, wall / calls * 1e3, sim / calls * 1e3, (wall - sim) / calls * 1e3,
                 (wall - sim) / wall * 100, cpu / calls * 1e3))
    print("  in-process mb8 di100: %.2f ms per call (copy in + sim_exe_run)"
          % (800 / c_i8.median() * 1e3))
    print("  compile: mb1000 daemon %.1f ms / in-process %.1f ms; mb8 di100 daemon %.1f ms / "
          "in-process %.1f ms" % (float(comp["b1000"]["daemon_compile_s"]) * 1e3,
                                 float(comp["b1000"]["inproc_compile_s"]) * 1e3,
                                 float(comp["mb8"]["daemon_compile_s"]) * 1e3,
                                 float(comp["mb8"]["inproc_compile_s"]) * 1e3))
    print()


if __name__ == "__main__":
    main()
