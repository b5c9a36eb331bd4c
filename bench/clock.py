"""make bench-clock: the simulated clock's prediction against Graphcore's published
throughput (issue 28; docs/cost-model.md). Not part of make test: each configuration
compiles a full-size model (about 30 s for ResNet-50 training).

For each configuration: export the model (torchvision 0.14, weights=None, seed 0; the
tutorial's network in torch) with its loss, typed as its precision (16.16: float16 with
float16 partials as PopTorch's .half() and setPartialsType(half) do; 16.32; 32.32),
compile it for one replica on an ipuofd of the configuration's device type (--ipu-memory
8GiB: the published runs recomputed activations, which ipuof-run's compiles do not ask
for), its pipeline placed by ipuof-run --block at the published splits, and read the prediction
for the published replicas with ipuof-run --predict=json --predict-replicas R. BERT-Base
goes through poptorch (bench/published_models.py) in a child process; when it does not
compile its row says why. Prints one table: predicted, published, ratio, source.

Usage: python3 bench/clock.py [--build build] [--only TEXT] [--skip TEXT]
                              [--daemon-config IPUOFD.CONF] [--bert-timeout SECONDS]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
# a full-size compile on a shared machine can take minutes (as make test-published allows)
ENV = dict(os.environ, IPUOF_REQUEST_TIMEOUT_MS=os.environ.get("IPUOF_REQUEST_TIMEOUT_MS",
                                                               "3600000"))
sys.path.insert(0, os.path.join(ROOT, "python"))

# Each configuration: title, role, device type, the network (a name of NETS), its input
# (C, H, W; or a flat feature count), the precision ("16.16": float16 with float16 partials,
# "16.32": float partials, "32.32": float32), micro-batch, accumulation, device
# iterations, output mode, replicas, the pipeline's blocks (ipuof-run --block
# PREFIX:STAGE:IPU with STAGE = IPU; none: one IPU a replica), published samples/s (all
# replicas), source.
CONFIGS = [
    dict(title="ResNet-50 training, MLPerf v1.1 IPU-POD16", role="calibration", ipu="gc200",
         net="resnet50", shape=(3, 224, 224), precision="16.16", B=20, A=10, D=1,
         out="all", R=16, blocks=[], published=1830.0 * 16,
         source="mlcommons/training_results_v1.1 Graphcore/results/ipu-pod16-TF1/resnet "
                "(1 281 167 images an epoch in 43-45 s)"),
    dict(title="ResNet-50 v1.5 training, Bow Pod16, TF1, global batch 1 920",
         role="validation", ipu="bow", net="resnet50", shape=(3, 224, 224), precision="16.16",
         B=20, A=6, D=1, out="all", R=16, blocks=[], published=42029.0,
         source="graphcore.ai/performance-results, Bow platform training (pre-SDK 2.5); the "
                "split 20 x 6 x 16 of the global batch is assumed"),
    # graphcore/examples vision/cnns/tensorflow1/training/configs.yml `resnext101_16ipus`:
    # ResNeXt-101 32x4d, 2-IPU pipeline split at stage3/unit4/relu, 8 replicas, micro-batch
    # 6, accumulation 16, half partials. torchvision's ResNet class builds 32x4d
    # (groups 32, width 4); batch norm where the TF1 model has group norm.
    dict(title="ResNeXt-101 32x4d training, Bow Pod16 (2-IPU pipeline x 8 replicas)",
         role="validation", ipu="bow", net="resnext101_32x4d", shape=(3, 224, 224),
         precision="16.16", B=6, A=16, D=1, out="all", R=8,
         blocks=[("/net/conv1/", 0), ("/net/layer3/layer3.4/", 1)], published=12221.0,
         source="graphcore.ai/performance-results, Bow Pod16 (docs/cost-model.md); "
                "configuration: graphcore/examples TF1 configs.yml resnext101_16ipus"),
    # configs.yml `efficientnet_b4_g1_16ipus` (standard depthwise B4, as torchvision's):
    # 4-IPU pipeline split at block2b, block4b, block6c, 4 replicas, micro-batch 3,
    # accumulation 64, 16.32, 380 x 380 (torchvision's B4 resolution); stochastic depth 0
# (a random op torch.onnx cannot export in training mode; it costs little).
    dict(title="EfficientNet-B4 training, Bow Pod16 (4-IPU pipeline x 4 replicas)",
         role="validation", ipu="bow", net="efficientnet_b4", shape=(3, 380, 380),
         precision="16.32", B=3, A=64, D=1, out="all", R=4,
         blocks=[("/net/features/features.0/", 0),
                 ("/net/features/features.2/features.2.1/", 1),
                 ("/net/features/features.4/features.4.1/", 2),
                 ("/net/features/features.6/features.6.2/", 3)], published=8936.0,
         source="graphcore.ai/performance-results, Bow Pod16 (docs/cost-model.md); "
                "configuration: graphcore/examples TF1 configs.yml efficientnet_b4_g1_16ipus"),
    # The small network dominated by fixed costs: the PopTorch pipelining tutorial
    # (graphcore/tutorials tutorials/pytorch/pipelining), MNIST 1-10-20 conv, 320-256-10,
    # blocks B1..B4 on 4 IPUs, micro-batch 40, accumulation 10, 10 device iterations,
    # OutputMode.All (the predictions and the loss of every micro-batch), float32, one
    # replica; its executed README prints 16.92 and 16.68 it/s
    # (epochs 2 and 3) of 4 000 images: about 67 200 images/s.
    dict(title="PopTorch pipelining tutorial (MNIST), 4 IPUs (GC200, IPU-POD16)",
         role="validation", ipu="gc200", net="mnist_tutorial", shape=(1, 28, 28),
         precision="32.32", B=40, A=10, D=10, out="all", preds=True, R=1,
         blocks=[("/net/layer1/", 0), ("/net/layer2/", 1), ("/net/Reshape", 2),
                 ("/net/layer3", 2), ("/net/layer4/", 3), ("/Cast", 3)],
         published=16.8 * 4000,
         source="graphcore/tutorials tutorials/pytorch/pipelining README (SDK 2.6): 16.92 "
                "and 16.68 it/s of 4 000 images, host data loading included"),
    # A small network without host data loading: the efficient data loading tutorial
    # (graphcore/tutorials tutorials/pytorch/efficient_data_loading, README generated with
    # SDK 2.5.1 on 2022-05-19): conv 1-5 k3, max pool 2, conv 5-12 k5, group norm 3 x 12,
    # linear 41772-100-10, micro-batch 16, 50 device iterations, one replica, synthetic
    # data (enableSyntheticData: no host transfer), OutputMode.Final, SGD momentum 0.9;
    # its executed README prints 30 487.88 items/s (12 calls of 800 items in 0.31 s) and,
    # in its Case 1, 29 659.83. The IPU type is not named: GC200 (the IPU-M2000) assumed.
    dict(title="PopTorch efficient data loading tutorial, synthetic data, 1 IPU",
         role="validation", ipu="gc200", net="dataloading_tutorial", shape=(1, 128, 128),
         precision="32.32", B=16, A=1, D=50, out="final", synthetic=True, R=1, blocks=[],
         published=30488.0,
         source="graphcore/tutorials tutorials/pytorch/efficient_data_loading README (SDK "
                "2.5.1): 30 487.88 items/s (Case 1: 29 659.83), synthetic data, 12 calls "
                "timed from Python"),
]

# BERT-Base through poptorch (bench/published_models.py bert_base_128_config), compiled for
# one replica (4 IPUs, AutoIncrement stages) on a Bow ipuofd, predicted for 4 replicas.
# Phase 1 (SL128) is the second calibration point the issue allows: `matmul_efficiency` is
# calibrated on it (docs/cost-model.md). Phase 2 (SL384) validates it: the same network at
# 3x the sequence (the attention's products grow 9x), graphcore/examples
# nlp/bert/tensorflow2/configs/pretrain_base_384_phase2.json: micro-batch 8, 4 replicas,
# gradient accumulation 510, 56 masked tokens, the same [emb | 4 | 4 | 4 | heads on IPU 0]
# pipeline, matmul memory proportion 0.28 (0.26 on one stage).
BERTS = [
    dict(title="BERT-Base phase 1 SL128 training, Bow Pod16 (4-IPU pipeline x 4 replicas)",
         role="calibration", ipu="bow", R=4, B=32, A=512, seq=128, mask=20, amp=0.25,
         published=15911.0,
         source="graphcore.ai/performance-results (PyTorch, SDK 3.3); configuration: "
                "graphcore/examples nlp/bert/pytorch configs_pretraining.yml "
                "pretrain_base_128"),
    dict(title="BERT-Base phase 2 SL384 training, Bow Pod16 (4-IPU pipeline x 4 replicas)",
         role="validation", ipu="bow", R=4, B=8, A=510, seq=384, mask=56, amp=0.28,
         published=4387.0,
         source="graphcore.ai/performance-results (TensorFlow2, SDK 3.3, batch 16 320); "
                "configuration: graphcore/examples nlp/bert/tensorflow2/configs/"
                "pretrain_base_384_phase2.json"),
]

BERT_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import published_models as P
model, opts, opt, batch = P.bert_base_128_config(micro_batch=int(sys.argv[2]),
                                                 gradient_accumulation=int(sys.argv[3]),
                                                 replicas=1, seq=int(sys.argv[5]),
                                                 mask_tokens=int(sys.argv[6]),
                                                 matmul_proportion=float(sys.argv[7]))
opts._values["ipuof_predict_replicas"] = int(sys.argv[4])  # executor._clock_args
import poptorch
pm = poptorch.trainingModel(model, opts, opt)
pm.compile(*batch)
print(pm.ipuofPredictionReport(), file=sys.stderr)
print(json.dumps(pm.ipuofPrediction()))
"""


def bert_row(bert, build, addr, timeout_s):
    """A BERT row: (predicted samples/s or None, the prediction or the failure); the
    prediction's text report goes to stderr."""
    env = dict(ENV, IPUOF_SERVER=addr, IPUOF_BUILD=build,
               PYTHONPATH=os.path.join(ROOT, "python"))
    cmd = ["/usr/bin/python3", "-c", BERT_SCRIPT, os.path.join(ROOT, "bench"),
           str(bert["B"]), str(bert["A"]), str(bert["R"]), str(bert["seq"]),
           str(bert["mask"]), str(bert["amp"])]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"did not compile within {timeout_s} s"
    if out.returncode != 0:
        last = [ln for ln in out.stderr.strip().splitlines() if ln.strip()]
        return None, "did not compile: " + (last[-1] if last else f"exit {out.returncode}")
    sys.stderr.write(bert["title"] + ":\n" + out.stderr)
    p = json.loads(out.stdout.strip().splitlines()[-1])
    return p["samples_per_s"], p


def _resnext101_32x4d():
    from torchvision.models.resnet import Bottleneck, ResNet
    return ResNet(Bottleneck, [3, 4, 23, 3], groups=32, width_per_group=4)


def _mnist_tutorial():
    """The pipelining tutorial's Network (conv 1->10 k5, pool 2, relu; conv 10->20 k5,
    pool 2, relu; linear 320->256, relu; linear 256->10)."""
    from torch import nn

    class ConvLayer(nn.Module):
        def __init__(self, cin, cout, k, pool):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, kernel_size=k)
            self.pool = nn.MaxPool2d(kernel_size=pool)
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.pool(self.conv(x)))

    class Network(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = ConvLayer(1, 10, 5, 2)
            self.layer2 = ConvLayer(10, 20, 5, 2)
            self.layer3 = nn.Linear(320, 256)
            self.layer3_act = nn.ReLU()
            self.layer4 = nn.Linear(256, 10)

        def forward(self, x):
            x = self.layer2(self.layer1(x))
            x = x.view(-1, 320)
            return self.layer4(self.layer3_act(self.layer3(x)))

    return Network()


def _dataloading_tutorial():
    """The efficient data loading tutorial's ClassificationModel without its loss (the
    bench adds cross-entropy; the tutorial's LogSoftmax(dim=0) + NLLLoss costs the same)."""
    from torch import nn

    class ClassificationModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 5, 3)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(5, 12, 5)
            self.norm = nn.GroupNorm(3, 12)
            self.fc1 = nn.Linear(41772, 100)
            self.relu = nn.ReLU()
            self.fc2 = nn.Linear(100, 10)

        def forward(self, x):
            x = self.pool(self.relu(self.conv1(x)))
            x = self.norm(self.relu(self.conv2(x)))
            x = x.flatten(1)
            return self.fc2(self.relu(self.fc1(x)))

    return ClassificationModel()


NETS = {"resnext101_32x4d": _resnext101_32x4d, "mnist_tutorial": _mnist_tutorial,
        "dataloading_tutorial": _dataloading_tutorial}


def export(cfg, path):
    """The configuration's network with a cross-entropy loss, typed as its precision."""
    import onnx
    import torch
    import torchvision
    from ipuof import _half

    torch.manual_seed(0)
    name, B = cfg["net"], cfg["B"]
    kw = {"stochastic_depth_prob": 0.0} if name.startswith("efficientnet") else {}
    net = NETS[name]() if name in NETS else getattr(torchvision.models, name)(weights=None,
                                                                             **kw)

    class WithLoss(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.net = n

        def forward(self, x, labels):
            y = self.net(x)
            loss = torch.nn.functional.cross_entropy(y.float(), labels)
            return (loss, y) if cfg.get("preds") else loss

    f32 = path + ".f32" if cfg["precision"] != "32.32" else path
    torch.onnx.export(WithLoss(net), (torch.zeros(B, *cfg["shape"]),
                                      torch.zeros(B, dtype=torch.long)), f32,
                      input_names=["x", "labels"],
                      output_names=["loss", "preds"] if cfg.get("preds") else ["loss"],
                      opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    if cfg["precision"] == "32.32":
        return
    b = open(f32, "rb").read()
    os.unlink(f32)
    state = [i.name for i in onnx.load_from_string(b).graph.initializer
             if "running" not in i.name and "num_batches" not in i.name]
    hb, _ = _half.type_float16(b, ["x"], state, keep_float=("loss",),
                               partials_half=cfg["precision"] == "16.16")
    with open(path, "wb") as f:
        f.write(hb)


def start_daemon(build, ipu_type, wd, config=None):
    port_file = os.path.join(wd, "port." + ipu_type)
    extra = ["--config", config] if config else []
    p = subprocess.Popen([os.path.join(build, "bin", "ipuofd"), "--listen", "127.0.0.1:0",
                          "--port-file", port_file, "--foreground", "--log-level", "warn",
                          "--ipu-memory", "8GiB", "--ipu-type", ipu_type] + extra)
    for _ in range(200):
        if os.path.exists(port_file) and open(port_file).read().strip():
            return p, "127.0.0.1:" + open(port_file).read().strip()
        time.sleep(0.05)
    p.terminate()
    raise SystemExit(f"ipuofd --ipu-type {ipu_type} did not start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", default="", help="run the configurations whose title "
                    "contains this text")
    ap.add_argument("--skip", default=None, help="leave out the configurations whose title "
                    "contains this text")
    ap.add_argument("--daemon-config", default=None,
                    help="an ipuofd.conf for the daemons (a [cost] section changes the "
                    "clock's constants, e.g. to calibrate `efficiency`)")
    ap.add_argument("--bert-timeout", type=int, default=1800,
                    help="seconds BERT's compile may take before its row says pending")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as wd:
        daemons = {}
        try:
            def wanted(title):
                return a.only in title and (a.skip is None or a.skip not in title)

            for cfg in [c for c in CONFIGS if wanted(c["title"])]:
                title, role, published = cfg["title"], cfg["role"], cfg["published"]
                source, ipu = cfg["source"], cfg["ipu"]
                path = os.path.join(wd, f"{cfg['net']}_{cfg['B']}_{cfg['precision']}.onnx")
                if not os.path.exists(path):
                    export(cfg, path)
                if ipu not in daemons:
                    daemons[ipu] = start_daemon(a.build, ipu, wd, a.daemon_config)
                cmd = [os.path.join(a.build, "bin", "ipuof-run"), "--server", daemons[ipu][1],
                       "--model", path, "--loss", "loss",
                       "--gradient-accumulation", str(cfg["A"]),
                       "--device-iterations", str(cfg["D"]), "--output-mode", cfg["out"],
                       "--predict-replicas", str(cfg["R"]), "--predict=json"]
                if cfg.get("synthetic"):
                    cmd += ["--synthetic"]
                if cfg["blocks"]:
                    cmd += ["--ipus", str(1 + max(i for _, i in cfg["blocks"]))]
                for prefix, i in cfg["blocks"]:     # stage i on IPU i
                    cmd += ["--block", f"{prefix}:{i}:{i}"]
                out = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
                if out.returncode != 0:
                    rows.append((title, role, None, published, source, out.stderr.strip()))
                    continue
                p = json.loads(out.stdout)
                rows.append((title, role, p["samples_per_s"], published, source, p))
            for bert in [b for b in BERTS if wanted(b["title"])]:
                if bert["ipu"] not in daemons:
                    daemons[bert["ipu"]] = start_daemon(a.build, bert["ipu"], wd,
                                                        a.daemon_config)
                pred, extra = bert_row(bert, a.build, daemons[bert["ipu"]][1],
                                       a.bert_timeout)
                rows.append((bert["title"], bert["role"], pred, bert["published"],
                             bert["source"], extra))
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
