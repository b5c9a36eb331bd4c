"""The memory plan's figures per IPU of Graphcore's published training configurations
(bench/published_models.py; docs/memory.md records them): compiles ResNet-50 at configs.yml
`resnet50` (micro-batch 18, one IPU) and BERT-Base pretrain_base_128 (micro-batch 32, four
IPUs) on a daemon of its own and prints each IPU's parts, without running a step.

    make memory-published            (or: python3 bench/published_memory.py --build build
                                      [resnet50] [bert])
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))


def start_daemon(build, tmp):
    """An ipuofd on an ephemeral loopback port; returns (process, "127.0.0.1:PORT")."""
    port_file = os.path.join(tmp, "port")
    log = open(os.path.join(tmp, "log"), "wb")
    proc = subprocess.Popen([os.path.join(build, "bin", "ipuofd"), "--listen", "127.0.0.1:0",
                             "--port-file", port_file, "--foreground"],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 10
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(port_file) and open(port_file).read().strip():
            return proc, "127.0.0.1:" + open(port_file).read().strip()
        time.sleep(0.05)
    proc.kill()
    sys.exit("ipuofd did not start: " + open(os.path.join(tmp, "log")).read())


def report(name, rows):
    """One line per IPU: the total against the capacity, then the parts, in MiB."""
    mib = 1 << 20
    for r in rows:
        print(f"{name} IPU {r['ipu']}: {r['total'] / mib:.1f} of {r['capacity'] / mib:.1f} "
              f"MiB (weights {r['weights'] / mib:.1f}, activations "
              f"{r['activations'] / mib:.1f}, code {r['code'] / mib:.1f}, gradients "
              f"{r['gradients'] / mib:.1f}, optimizer {r['optimizer'] / mib:.1f}, stash "
              f"{r['stash'] / mib:.1f}; off chip {r['offchip'] / mib:.1f})", flush=True)


def compile_one(which):
    """Compiles one configuration; prints its figures, or the refusal."""
    import poptorch
    import published_models as P
    if which == "resnet50":
        name = "ResNet-50 (micro-batch 18, 1 IPU)"
        model, opts, opt, batch = P.resnet50_config(micro_batch=18, gradient_accumulation=2,
                                                    replicas=1)
    else:
        name = "BERT-Base phase 1 (micro-batch 32, 4 IPUs)"
        model, opts, opt, batch = P.bert_base_128_config(micro_batch=32,
                                                         gradient_accumulation=29,
                                                         replicas=1)
    pm = poptorch.trainingModel(model, opts, opt)
    try:
        pm.compile(*batch)
        report(name, pm._exe.memory())
    except poptorch.Error as e:
        print(f"{name}: {e}", flush=True)
    finally:
        pm.destroy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("models", nargs="*", default=["resnet50", "bert"],
                    choices=["resnet50", "bert"])
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    os.environ.setdefault("IPUOF_CLIENT_LIB", os.path.join(build, "lib", "libipuof-client.so"))
    os.environ.setdefault("IPUOF_REQUEST_TIMEOUT_MS", "3600000")
    sys.path[:0] = [os.path.join(HERE, "..", "python"), HERE]
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="ipuof-mem-") as tmp:
        proc, addr = start_daemon(build, tmp)
        os.environ["IPUOF_SERVER"] = addr
        try:
            for which in a.models:
                compile_one(which)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
