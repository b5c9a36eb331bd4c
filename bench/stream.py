"""Outputs streamed or not: the mb8-di100 calls of `make bench` through the daemon with
libipuof-client streaming the outputs (RunOutputs frames while later steps compute, the
default) and with IPUOF_STREAM_OUTPUTS=0 (one RunReply at the end), against the same plan
in-process. Rounds alternate the three; each reports wall milliseconds per call and CPU
milliseconds per call (the driver's, plus the daemon's for the daemon rows, from
/proc/PID/stat), and the load other processes put on the machine during the round.

    python3 bench/stream.py --build build [--reps 5] [--seconds 1.0]
    python3 bench/stream.py --build build --callgrind 20

With --callgrind N: instead, instruction counts (valgrind --tool=callgrind, repeatable under
load) of the daemon and of the driver for N daemon calls, streamed and not, each mode with
its own daemon and driver (the same set-up: data, connect, compile); the pool's spin off
(IPUOF_SIM_SPIN_US=0) and BLAS at one thread, as callgrind runs one thread at a time.

Reported, never judged. Needs python3-torch (the model is exported as bench.py does).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (mnist_cnn, load_images, start_daemon, stop_daemon, Driver)
import torch  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")


def jiffies(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def machine_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]


def callgrind_ir(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    return 0


def count(args, onnx_path, data_path, n_img, wd, env):
    """Instructions of the daemon and of the driver for args.callgrind calls per mode."""
    ipuofd = os.path.join(args.build, "bin", "ipuofd")
    drv_bin = os.path.join(args.build, "bench", "ipuof-bench")
    e = dict(env)
    e["IPUOF_SIM_SPIN_US"] = "0"
    e["OPENBLAS_NUM_THREADS"] = "1"
    for mode, stream in (("streamed", "1"), ("one RunReply", "0")):
        tag = stream
        port_file = os.path.join(wd, "port" + tag)
        dout = os.path.join(wd, "d%s.cg" % tag)
        cout = os.path.join(wd, "c%s.cg" % tag)
        log = open(os.path.join(wd, "log" + tag), "w")
        daemon = subprocess.Popen(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + dout,
                                   ipuofd, "--listen", "127.0.0.1:0", "--port-file", port_file,
                                   "--ipus", "1", "--foreground", "--log-level", "warn"],
                                  stderr=log, stdout=log, env=e)
        while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
            time.sleep(0.1)
        addr = "127.0.0.1:" + open(port_file).read().strip()
        ce = dict(e)
        ce["IPUOF_STREAM_OUTPUTS"] = stream
        ce["IPUOF_BENCH_TIMEOUT_MS"] = "600000"
        drv = subprocess.Popen(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + cout,
                                drv_bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env=ce)
        cmds = ["data %s %d" % (data_path, n_img), "connect %s" % addr,
                "load mb8 %s 8 100" % onnx_path, "time daemon mb8 %d" % args.callgrind, "quit"]
        out, _ = drv.communicate("\n".join(cmds) + "\n", timeout=3600)
        bench.stop_daemon(daemon)
        if "error" in out:
            sys.exit("stream: the driver said: " + out)
        d_ir, c_ir = callgrind_ir(dout), callgrind_ir(cout)
        print("  %-13s daemon %14d instructions, driver %14d, both %14d (%d calls)"
              % (mode, d_ir, c_ir, d_ir + c_ir, args.callgrind))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--callgrind", type=int, default=0)
    args = ap.parse_args()
    ipuofd = os.path.join(args.build, "bin", "ipuofd")
    drv_bin = os.path.join(args.build, "bench", "ipuof-bench")
    torch.manual_seed(0)
    net = bench.mnist_cnn().eval()
    images, _ = bench.load_images(10000)
    xs = torch.from_numpy(images).view(images.shape[0], 1, 28, 28)
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(len(os.sched_getaffinity(0)))
    with tempfile.TemporaryDirectory(prefix="ipuof-stream-") as wd:
        onnx_path = os.path.join(wd, "m.onnx")
        torch.onnx.export(net, xs[:1], onnx_path, input_names=["image"],
                          output_names=["logits"], opset_version=13,
                          dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
        data_path = os.path.join(wd, "images.f32")
        images.tofile(data_path)
        if args.callgrind > 0:
            print("mb8 x di100 (800 samples per call): instructions, callgrind")
            count(args, onnx_path, data_path, images.shape[0], wd, env)
            return
        # ipuofd with 2 IPUs: one driver streams, the other does not.
        port_file = os.path.join(wd, "port")
        log = open(os.path.join(wd, "ipuofd.log"), "w")
        daemon = subprocess.Popen([ipuofd, "--listen", "127.0.0.1:0", "--port-file", port_file,
                                   "--ipus", "2", "--foreground", "--log-level", "warn"],
                                  stderr=log, env=env)
        while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
            time.sleep(0.05)
        addr = "127.0.0.1:" + open(port_file).read().strip()
        drivers = {}
        try:
            for how, stream in (("stream", "1"), ("nostream", "0")):
                e = dict(env)
                e["IPUOF_STREAM_OUTPUTS"] = stream
                d = bench.Driver(drv_bin, e)
                d.cmd("data %s %d" % (data_path, images.shape[0]))
                d.cmd("connect %s" % addr)
                d.cmd("load mb8 %s 8 100" % onnx_path)
                drivers[how] = d
            rows = {"daemon, streamed": ("stream", "daemon"),
                    "daemon, one RunReply": ("nostream", "daemon"),
                    "in-process": ("stream", "inproc")}
            res = {k: [] for k in rows}
            loads = []
            for k, (d, how) in rows.items():  # warm up
                drivers[d].cmd("for %s mb8 0.5" % how)
            for rnd in range(args.reps):
                for k, (d, how) in rows.items():
                    drv = drivers[d]
                    pids = [drv.p.pid] + ([daemon.pid] if how == "daemon" else [])
                    j0 = sum(jiffies(p) for p in pids)
                    b0 = machine_busy()
                    r, _ = drv.cmd("for %s mb8 %.3f" % (how, args.seconds))
                    j1 = sum(jiffies(p) for p in pids)
                    b1 = machine_busy()
                    calls, secs = int(r["calls"]), float(r["seconds"])
                    ours = j1 - j0
                    loads.append((b1 - b0 - ours) / HZ / secs)
                    res[k].append((secs / calls * 1e3, ours / HZ / calls * 1e3))
                    time.sleep(0.2)
            print("mb8 x di100 (800 samples per call), %d rounds of %.1f s each, alternated"
                  % (args.reps, args.seconds))
            print("load of other processes per turn (CPUs): median %.2f, min %.2f, max %.2f"
                  % (statistics.median(loads), min(loads), max(loads)))
            inproc = statistics.median(x[0] for x in res["in-process"])
            for k, v in res.items():
                wall = statistics.median(x[0] for x in v)
                cpu = statistics.median(x[1] for x in v)
                print("  %-22s wall %7.2f ms/call (min %.2f, max %.2f)  cpu %7.2f ms/call  "
                      "in-process/this %.3fx" % (k, wall, min(x[0] for x in v),
                                                max(x[0] for x in v), cpu, inproc / wall))
        finally:
            for d in drivers.values():
                d.close()
            bench.stop_daemon(daemon)


if __name__ == "__main__":
    main()
