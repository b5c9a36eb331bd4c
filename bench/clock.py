"""make bench-clock: the simulated clock's prediction against Graphcore's published
throughput (issue 28; docs/cost-model.md). Not part of make test: each configuration
compiles a full-size model (about 30 s for ResNet-50 training).

For each configuration: export the model (torchvision, weights=None, seed 0) with its loss,
typed float16 with float16 partials as PopTorch's .half() and setPartialsType(half) do,
compile it for one replica on an ipuofd of the configuration's device type (--ipu-memory
8GiB: the published runs recomputed activations, which the step program does not yet), and
read the prediction for the published replicas with ipuof-run --predict=json
--predict-replicas R. Prints one table: predicted, published, ratio, source.

Usage: python3 bench/clock.py [--build build]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

# name, role, ipu type, torchvision model, micro-batch, accumulation, replicas,
# published samples/s (all replicas), source
CONFIGS = [
    ("ResNet-50 training, MLPerf v1.1 IPU-POD16", "calibration", "gc200", "resnet50", 20, 10,
     16, 1830.0 * 16,
     "mlcommons/training_results_v1.1 Graphcore/results/ipu-pod16-TF1/resnet "
     "(1 281 167 images an epoch in 43-45 s)"),
    ("ResNet-50 v1.5 training, Bow Pod16, TF1, global batch 1 920", "validation", "bow",
     "resnet50", 20, 6, 16, 42029.0,
     "graphcore.ai/performance-results, Bow platform training (pre-SDK 2.5); the split "
     "20 x 6 x 16 of the global batch is assumed"),
]


def export(name, B, path):
    """torchvision `name` with a cross-entropy loss, float16 with float16 partials."""
    import onnx
    import torch
    import torchvision
    from ipuof import _half

    torch.manual_seed(0)
    net = getattr(torchvision.models, name)(weights=None)

    class WithLoss(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.net = n

        def forward(self, x, labels):
            return torch.nn.functional.cross_entropy(self.net(x).float(), labels)

    f32 = path + ".f32"
    torch.onnx.export(WithLoss(net), (torch.zeros(B, 3, 224, 224),
                                      torch.zeros(B, dtype=torch.long)), f32,
                      input_names=["x", "labels"], output_names=["loss"], opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    b = open(f32, "rb").read()
    os.unlink(f32)
    state = [i.name for i in onnx.load_from_string(b).graph.initializer
             if "running" not in i.name and "num_batches" not in i.name]
    hb, _ = _half.type_float16(b, ["x"], state, keep_float=("loss",), partials_half=True)
    with open(path, "wb") as f:
        f.write(hb)


def start_daemon(build, ipu_type, wd):
    port_file = os.path.join(wd, "port." + ipu_type)
    p = subprocess.Popen([os.path.join(build, "bin", "ipuofd"), "--listen", "127.0.0.1:0",
                          "--port-file", port_file, "--foreground", "--log-level", "warn",
                          "--ipu-memory", "8GiB", "--ipu-type", ipu_type])
    for _ in range(200):
        if os.path.exists(port_file) and open(port_file).read().strip():
            return p, "127.0.0.1:" + open(port_file).read().strip()
        time.sleep(0.05)
    p.terminate()
    raise SystemExit(f"ipuofd --ipu-type {ipu_type} did not start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as wd:
        daemons = {}
        try:
            for (title, role, ipu, model, B, A, R, published, source) in CONFIGS:
                path = os.path.join(wd, f"{model}_{B}.onnx")
                if not os.path.exists(path):
                    export(model, B, path)
                if ipu not in daemons:
                    daemons[ipu] = start_daemon(a.build, ipu, wd)
                cmd = [os.path.join(a.build, "bin", "ipuof-run"), "--server", daemons[ipu][1],
                       "--model", path, "--loss", "loss", "--gradient-accumulation", str(A),
                       "--predict-replicas", str(R), "--predict=json"]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    rows.append((title, role, None, published, source, out.stderr.strip()))
                    continue
                p = json.loads(out.stdout)
                rows.append((title, role, p["samples_per_s"], published, source, p))
        finally:
            for proc, _ in daemons.values():
                proc.terminate()
                proc.wait()
    print("| configuration | role | predicted samples/s | published | ratio | source |")
    print("| --- | --- | --- | --- | --- | --- |")
    for title, role, pred, pub, source, extra in rows:
        if pred is None:
            print(f"| {title} | {role} | failed: {extra} | {pub:.0f} | - | {source} |")
        else:
            print(f"| {title} | {role} | {pred:.0f} | {pub:.0f} | {pred / pub:.2f} | "
                  f"{source} |")


if __name__ == "__main__":
    main()
