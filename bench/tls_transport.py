"""What TLS costs a daemon call's transport, without the network's compute in the way.

    /usr/bin/python3 bench/tls_transport.py [--build build] [--calls 100] [--rounds 5]
                                            [IPUOFD...]

(after `make bench` built build/bench/ipuof-bench). The model sums each 784-float sample
(Flatten, ReduceSum), so a call is almost all transport: micro_batch 8, device_iterations
100, 2.5 MB of inputs and 3.2 kB of outputs per call, the tutorial's inference call
(bench.py's mb8-di100). Each IPUOFD binary given (default: BUILD/bin/ipuofd) runs twice,
plain and with TLS (bench.py's certificates and config), each with its own ipuof-bench; the
rounds alternate the order. Prints per call: wall ms, the daemon's CPU ms and the client's
(/proc, 10 ms ticks summed over the calls of a round), median (min-max) over the rounds.
Judges nothing.
"""
import argparse
import os
import statistics
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


class SumSamples(torch.nn.Module):
    def forward(self, x):
        return x.flatten(1).sum(1, keepdim=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("daemons", nargs="*")
    a = ap.parse_args()
    daemons = a.daemons or [os.path.join(a.build, "bin", "ipuofd")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("IPUOF_TLS")}
    sides = []
    with tempfile.TemporaryDirectory(prefix="ipuof-tls-") as wd:
        model = os.path.join(wd, "sum.onnx")
        torch.onnx.export(SumSamples(), torch.zeros(1, 1, 28, 28), model,
                          input_names=["image"], output_names=["s"], opset_version=13,
                          dynamic_axes={"image": {0: "batch"}, "s": {0: "batch"}})
        data = os.path.join(wd, "x.f32")
        np.random.default_rng(0).standard_normal((1000, 784), dtype=np.float32).tofile(data)
        conf, ca = bench.make_tls_files(wd)
        try:
            for i, d in enumerate(daemons):
                for tls in (0, 1):
                    p, addr = bench.start_daemon(d, wd, env, "-%d-%d" % (i, tls),
                                                 conf if tls else None)
                    drv = bench.Driver(os.path.join(a.build, "bench", "ipuof-bench"),
                                       dict(env, IPUOF_TLS_CA_FILE=ca) if tls else env)
                    sides.append(("%s %s" % (d, "TLS" if tls else "plain"), p, drv, [], [], []))
                    drv.cmd("data %s 1000" % data)
                    drv.cmd("connect " + addr)
                    drv.cmd("load m %s 8 100" % model)
                    drv.cmd("time daemon m 5")
            for r in range(a.rounds):
                for name, p, drv, wall, dcpu, ccpu in (sides if r % 2 == 0 else sides[::-1]):
                    d0, c0 = bench.proc_cpu_s([p.pid]), bench.proc_cpu_s([drv.p.pid])
                    out, _ = drv.cmd("time daemon m %d" % a.calls)
                    wall.append(float(out["seconds"]) / a.calls * 1e3)
                    dcpu.append((bench.proc_cpu_s([p.pid]) - d0) / a.calls * 1e3)
                    ccpu.append((bench.proc_cpu_s([drv.p.pid]) - c0) / a.calls * 1e3)
            print("per call (mb8 di100, 2.5 MB in), ms: median (min-max) over %d rounds of %d "
                  "calls" % (a.rounds, a.calls))
            for name, p, drv, wall, dcpu, ccpu in sides:
                def f(v):
                    return "%.2f (%.2f-%.2f)" % (statistics.median(v), min(v), max(v))
                print("%-34s wall %s  daemon CPU %s  client CPU %s" % (name, f(wall), f(dcpu),
                                                                     f(ccpu)))
        finally:
            for name, p, drv, *_ in sides:
                drv.close()
                bench.stop_daemon(p)


if __name__ == "__main__":
    main()
