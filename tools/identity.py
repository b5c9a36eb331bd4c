#!/usr/bin/python3
"""identity.py: the identity harness of a refactor (issue 30), called by tools/identity.sh.

  identity.py run BUILD OUT.txt WORKDIR [FILTER]   runs every configuration against BUILD
  identity.py compare OLD.txt NEW.txt                compares two runs line by line
  identity.py list                                    prints the configurations

`run` starts BUILD/bin/ipuofd on an ephemeral loopback port (--listen 127.0.0.1:0
--port-file), with IPUOF_SIM_THREADS=2 (and IPUOF_SIM_ISA as the caller set it) for the daemon,
and runs each configuration with the tools of that build:
  - drv:   tools/identity_drv.c, compiled here against BUILD's public header
           (BUILD/../client/include) and library (BUILD/lib/libipuof-client.so): compiles a
           model made by this script (onnx.helper, no torch), runs it once, writes its
           outputs, its weights after training, the prediction report (the JSON
           `ipuof-run --predict=json` prints) and the trace;
  - run:   BUILD/bin/ipuof-run on an ONNX node test (/usr/share/libonnx-testdata): its
           outputs (--output-dir), --predict=json, and the trace of --profile;
  - mnist: BUILD/bin/ipuof-mnist (the tutorial's network, made in C): its outputs part is
           its printed losses and accuracies (the lines with "loss=" or "Accuracy"), its
           weights the trained model (--save, weights included), its cost part the rest of
           what it prints (memory, simulated device time, busy, prediction) and
           `ipuof-run --predict=json` on the saved model, its trace that of --profile.
Each line of OUT.txt: the configuration's name, then the hashes of outputs, weights, cost
report and trace ('-' for a part the configuration has not: weights of inference; 'FAIL:...'
when the tool failed, which a comparison reports like any difference).

What is stripped before hashing (legitimately variable; nothing else is):
  - ipuof-mnist's output: its two wall-clock figures ("compiled in X ms", "N samples in
    X s") become '#', and the work folder's path (in "trace: PATH") becomes WORKDIR; its
    simulated figures (device time, busy, predicted samples/s) are kept;
  - ipuof-run's --predict=json and the driver's report: nothing (simulated time only);
  - traces: nothing; a trace is simulated time ("ts"/"dur" in simulated microseconds, "pid"
    0), no wall clock, no process id, no port. The harness checks this: two runs of one
    build give the same lines (see docs/testing.md).
"""
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = "/usr/share/libonnx-testdata/data/node"
MNIST = "/usr/share/datasets/fashion-mnist"
THREADS = "2"

# ---- models (onnx.helper; the same files for every build) -------------------------------


def _models(d):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper, TensorProto as T

    def init(rng, name, shape, np_dt, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np_dt), name)

    def save(nodes, name, inputs, outputs, inits, meta, opset=13):
        g = helper.make_graph(nodes, name, inputs, outputs, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        for k, v in meta.items():
            e = m.metadata_props.add()
            e.key, e.value = k, v
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(d, name + ".onnx"))

    def mlp(dt, meta, name):
        rng = np.random.default_rng(1)
        np_dt, et = (np.float32, T.FLOAT) if dt == "f32" else (np.float16, T.FLOAT16)
        dims = [16, 32, 32, 8, 4]
        nodes, inits, x = [], [], "x"
        for i in range(4):
            inits += [init(rng, "w%d" % i, (dims[i], dims[i + 1]), np_dt, 0.3),
                      init(rng, "b%d" % i, (dims[i + 1],), np_dt, 0.1)]
            nodes += [helper.make_node("MatMul", [x, "w%d" % i], ["l%d_mm" % i], "l%d/mm" % i),
                      helper.make_node("Add", ["l%d_mm" % i, "b%d" % i], ["l%d_add" % i],
                                       "l%d/add" % i)]
            x = "l%d_add" % i
            if i < 3:
                nodes.append(helper.make_node("Relu", [x], ["l%d_relu" % i], "l%d/relu" % i))
                x = "l%d_relu" % i
        # the loss in float32 (a float16 model's too: a loss is one float)
        nodes += [helper.make_node("Sub", [x, "t"], ["diff"], "loss/sub"),
                  helper.make_node("Mul", ["diff", "diff"], ["sq"], "loss/mul"),
                  helper.make_node("Cast", ["sq"], ["sqf"], "loss/cast", to=T.FLOAT),
                  helper.make_node("ReduceMean", ["sqf"], ["loss"], "loss/mean", keepdims=0)]
        save(nodes, name, [helper.make_tensor_value_info("x", et, [4, 16]),
                           helper.make_tensor_value_info("t", et, [4, 4])],
             [helper.make_tensor_value_info("loss", T.FLOAT, []),
              helper.make_tensor_value_info(x, et, [4, 4])], inits, meta)

    def cnn(dt, meta, name, bn_training=0):
        rng = np.random.default_rng(2)
        np_dt, et = (np.float32, T.FLOAT) if dt == "f32" else (np.float16, T.FLOAT16)
        inits = [init(rng, "c0.w", (4, 2, 3, 3), np_dt, 0.3), init(rng, "c0.b", (4,), np_dt, 0.1),
                 numpy_helper.from_array(np.ones(4, np_dt), "bn.scale"),
                 numpy_helper.from_array(np.zeros(4, np_dt), "bn.bias"),
                 numpy_helper.from_array(np.zeros(4, np_dt), "bn.mean"),
                 numpy_helper.from_array(np.ones(4, np_dt), "bn.var"),
                 init(rng, "c1.w", (8, 4, 3, 3), np_dt, 0.2), init(rng, "c1.b", (8,), np_dt, 0.1),
                 init(rng, "fc.w", (10, 128), np_dt, 0.1), init(rng, "fc.b", (10,), np_dt, 0.1)]
        N = helper.make_node
        nodes = [N("Conv", ["x", "c0.w", "c0.b"], ["c0"], "c0/conv", pads=[1, 1, 1, 1]),
                 N("BatchNormalization", ["c0", "bn.scale", "bn.bias", "bn.mean", "bn.var"],
                   ["bn"], "c0/bn", **({"training_mode": 1} if bn_training else {})),
                 N("Relu", ["bn"], ["r0"], "c0/relu"),
                 N("MaxPool", ["r0"], ["p0"], "c0/pool", kernel_shape=[2, 2], strides=[2, 2]),
                 N("Conv", ["p0", "c1.w", "c1.b"], ["c1"], "c1/conv", pads=[1, 1, 1, 1]),
                 N("Relu", ["c1"], ["r1"], "c1/relu"),
                 N("Flatten", ["r1"], ["f"], "c1/flat"),
                 N("Gemm", ["f", "fc.w", "fc.b"], ["logits"], "fc/gemm", transB=1),
                 N("Cast", ["logits"], ["logits_f"], "fc/cast", to=T.FLOAT),
                 N("SoftmaxCrossEntropyLoss", ["logits_f", "labels"], ["loss"], "fc/loss")]
        save(nodes, name, [helper.make_tensor_value_info("x", et, [4, 2, 8, 8]),
                           helper.make_tensor_value_info("labels", T.INT64, [4])],
             [helper.make_tensor_value_info("loss", T.FLOAT, []),
              helper.make_tensor_value_info("logits", et, [4, 10])], inits, meta,
             14 if bn_training else 13)   # training_mode: opset 14

    def lin3d(dt, name):
        """torch.onnx's float16 Linear on a (B, S, F) input: MatMul with the weight through a
        Transpose (3a6f781's case)."""
        rng = np.random.default_rng(3)
        np_dt, et = (np.float32, T.FLOAT) if dt == "f32" else (np.float16, T.FLOAT16)
        N = helper.make_node
        nodes = [N("Transpose", ["w"], ["wt"], "lin/t", perm=[1, 0]),
                 N("MatMul", ["x", "wt"], ["y"], "lin/mm"),
                 N("Mul", ["y", "y"], ["sq"], "loss/mul"),
                 N("Cast", ["sq"], ["sqf"], "loss/cast", to=T.FLOAT),
                 N("ReduceMean", ["sqf"], ["loss"], "loss/mean", keepdims=0)]
        save(nodes, name, [helper.make_tensor_value_info("x", et, [4, 3, 16])],
             [helper.make_tensor_value_info("loss", T.FLOAT, []),
              helper.make_tensor_value_info("y", et, [4, 3, 8])],
             [init(rng, "w", (8, 16), np_dt, 0.3)], {})

    for dt in ("f32", "f16"):
        lin3d(dt, "lin3d_%s" % dt)
        for variant, meta in VARIANTS.items():
            if variant.startswith("_half") and dt == "f32":
                continue
            mlp(dt, meta, "mlp_%s%s" % (dt, variant))
            cnn(dt, meta, "cnn_%s%s" % (dt, variant))
        # BatchNorm as torch exports it in train(): training_mode 1, batch statistics
        cnn(dt, {}, "cnnbt_%s" % dt, bn_training=1)


# metadata_props of the model files: PopTorch's options as its ONNX carries them
VARIANTS = {"": {}, "_half_partials": {"ipuof.partials_type": "half"},
            "_half_sr": {"ipuof.stochastic_rounding": "1"}}
VARIANTS.update({"_rc%d" % r: {"ipuof.recomputation": str(r)} for r in range(5)})

# ---- configurations ---------------------------------------------------------------------

# strategies: (name, ipus, replicas, strategy, blocks of mlp, blocks of cnn)
STRATS = {
    "single": (1, 1, None, [], []),
    "pipe4": (4, 1, "pipelined", ["l0:0:0", "l1:1:1", "l2:2:2", "l3:3:3"],
              ["c0:0:0", "c1:1:1", "fc:2:2"]),
    "pipe2": (2, 1, "pipelined", ["l0:0:0", "l2:1:1"], ["c0:0:0", "c1:1:1"]),
    "shard2": (2, 1, "sharded", ["l0:0:0", "l2:1:1"], ["c0:0:0", "c1:1:1"]),
    "shard4": (4, 1, "sharded", ["l0:0:0", "l1:1:1", "l2:2:2", "l3:3:3"],
               ["c0:0:0", "c1:1:1", "fc:2:2"]),
    "phased2": (2, 1, "phased", ["l0:0:0", "l2:1:1"], ["c0:0:0", "c1:1:1"]),
    "phased4": (4, 1, "phased", ["l0:0:0", "l1:1:1", "l2:2:2", "l3:3:3"],
                ["c0:0:0", "c1:1:1", "fc:2:2"]),
    "rep2": (2, 2, None, [], []),
}


def _drv(model, net, strat, di=1, ga=1, loss=None, opt=None, variant=""):
    ipus, reps, s, bm, bc = STRATS[strat]
    a = ["--ipus", str(ipus), "--replicas", str(reps), "--device-iterations", str(di),
         "--gradient-accumulation", str(ga), "--seed", "7"]
    if s:
        a += ["--strategy", s]
    for b in (bm if net == "mlp" else bc):
        a += ["--block", b]
    if loss:
        a += ["--loss", loss]
    if opt:
        a += ["--optimizer", opt]
    return ("drv", model + variant, a)


def configs():
    """[(name, kind, model, args)], in a fixed order."""
    out = []
    for net in ("mlp", "cnn"):
        for dt in ("f32", "f16"):
            m = "%s_%s" % (net, dt)
            inf = [("single", 1), ("single", 4), ("pipe2", 4), ("shard4", 2), ("phased2", 2),
                   ("rep2", 2)]
            for strat, di in inf:
                out.append(("%s/infer/%s/di%d" % (m, strat, di),) + _drv(m, net, strat, di))
            if dt == "f16":
                out.append(("%s/infer/single/partials_half" % m,)
                           + _drv(m, net, "single", 2, variant="_half_partials"))
            tr = lambda strat, **k: _drv(m, net, strat, loss="loss", **k)
            for opt in ("sgd", "momentum", "adam", "adamw", "lamb", "rmsprop"):
                out.append(("%s/train/single/%s" % (m, opt),) + tr("single", di=2, opt=opt))
            out.append(("%s/train/single/default/di4" % m,) + tr("single", di=4))
            out.append(("%s/train/single/momentum/ga4" % m,) + tr("single", ga=4, opt="momentum"))
            for strat in ("pipe4", "pipe2", "shard2", "phased4", "rep2"):
                out.append(("%s/train/%s/momentum/ga4" % (m, strat),)
                           + tr(strat, di=2, ga=4, opt="momentum"))
            out.append(("%s/train/rep2/adam/ga2" % m,) + tr("rep2", ga=2, opt="adam"))
            for r in range(5):
                out.append(("%s/train/pipe4/sgd/ga4/recompute%d" % (m, r),)
                           + tr("pipe4", ga=4, opt="sgd", variant="_rc%d" % r))
            if dt == "f16":
                out.append(("%s/train/single/adam/partials_half" % m,)
                           + tr("single", di=2, opt="adam", variant="_half_partials"))
                out.append(("%s/train/single/sgd/stochastic_rounding" % m,)
                           + tr("single", di=2, opt="sgd", variant="_half_sr"))
    for dt in ("f32", "f16"):
        m = "cnnbt_" + dt
        for strat, di, ga in (("single", 2, 1), ("pipe4", 2, 4), ("rep2", 2, 4)):
            out.append(("%s/train/%s/momentum/ga%d" % (m, strat, ga),)
                       + _drv(m, "cnn", strat, di, ga, loss="loss", opt="momentum"))
        out.append(("lin3d_%s/train/single/sgd" % dt,)
                   + _drv("lin3d_" + dt, "mlp", "single", 2, loss="loss", opt="sgd"))
    for t in NODE_TESTS:
        out.append(("onnx/%s" % t, "run", t, []))
    for strat, opt, reps in MNIST_CONFIGS:
        out.append(("mnist/%s/%s/r%d" % (strat, opt, reps), "mnist", "mnist",
                    ["--strategy", strat, "--optimizer", opt, "--replicas", str(reps)]))
    return out


NODE_TESTS = ["test_conv_with_strides_padding", "test_averagepool_2d_pads", "test_gemm_default_"
              "matrix_bias", "test_matmul_4d", "test_softmax_axis_1", "test_batchnorm_example",
              "test_maxpool_2d_strides", "test_relu", "test_sigmoid", "test_tanh",
              "test_layer_normalization_4d_axis1", "test_reduce_mean_default_axes_keepdims_random",
              "test_transpose_all_permutations_3", "test_gather_0", "test_concat_3d_axis_1",
              "test_slice", "test_resize_upsample_scales_nearest", "test_lstm_defaults",
              "test_gru_defaults", "test_convtranspose", "test_instancenorm_example",
              "test_cast_FLOAT_to_FLOAT16", "test_cast_FLOAT16_to_FLOAT",
              "test_batchnorm_example_training_mode", "test_clip", "test_pow", "test_erf", "test_where_example"]
MNIST_CONFIGS = [("single", "sgd", 1), ("single", "adam", 1), ("single", "adamw", 1),
                 ("single", "lamb", 1), ("single", "rmsprop", 1), ("pipelined", "sgd", 1),
                 ("sharded", "adam", 1), ("phased", "sgd", 1), ("single", "sgd", 2)]

# ---- running ----------------------------------------------------------------------------


def _h(path, strip=None):
    if not os.path.exists(path):
        return "FAIL:missing"
    data = open(path, "rb").read()
    if strip:
        data = strip(data)
    return hashlib.sha256(data).hexdigest()[:16]


def _hash_dir(d):
    h = hashlib.sha256()
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        h.update(f.encode() + b"\0" + open(os.path.join(d, f), "rb").read())
    return h.hexdigest()[:16] if os.path.isdir(d) else "FAIL:missing"


def _wall(data, w):
    """ipuof-mnist's wall-clock figures and the work folder's path out."""
    data = re.sub(rb"compiled in [0-9.]+ ms", b"compiled in # ms", data)
    data = re.sub(rb"samples in [0-9.]+ s", b"samples in # s", data)
    return data.replace(w.encode(), b"WORKDIR")


def _tool(cmd, env, log):
    with open(log, "wb") as f:
        r = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=600)
    return r.returncode


def _fail(log):
    txt = open(log, "rb").read().decode(errors="replace").strip().splitlines()
    return "FAIL:" + re.sub(r"\s+", "_", (txt[-1] if txt else "no output")[:60])


def run_one(cfg, build, drv, w, env):
    name, kind, model, args = cfg
    d = os.path.join(w, "out", re.sub(r"[^A-Za-z0-9_.-]", "_", name))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    log = os.path.join(d, "log")
    if kind == "drv":
        rc = _tool([drv, d, os.path.join(w, "models", model + ".onnx")] + args, env, log)
        if rc != 0:
            return [_fail(log)] * 4
        weights = _h(d + "/weights.bin") if "--loss" in args else "-"
        return [_h(d + "/outputs.bin"), weights, _h(d + "/predict.json"), _h(d + "/trace.json")]
    if kind == "run":
        t = os.path.join(NODE, model)
        ins = []
        for i in range(16):
            p = "%s/test_data_set_0/input_%d.pb" % (t, i)
            if os.path.exists(p):
                ins += ["--input", p]
        base = [build + "/bin/ipuof-run", "--model", t + "/model.onnx", "--quiet"] + ins
        if _tool(base + ["--output-dir", d + "/o", "--profile", d + "/p"], env, log) != 0:
            return [_fail(log)] * 4
        if _tool(base + ["--predict=json"], env, d + "/predict.json") != 0:
            return [_hash_dir(d + "/o"), "-", _fail(d + "/predict.json"), _h(d + "/p/trace.json")]
        return [_hash_dir(d + "/o"), "-", _h(d + "/predict.json"), _h(d + "/p/trace.json")]
    cmd = [build + "/bin/ipuof-mnist", "--epochs", "1", "--limit-train", "800",
           "--limit-test", "80", "--batch-size", "8", "--device-iterations", "2",
           "--gradient-accumulation", "4", "--learning-rate", "0.01", "--seed", "3",
           "--save", d + "/model.onnx", "--profile", d + "/p"] + args
    if _tool(cmd, env, log) != 0:
        return [_fail(log)] * 4
    pr = [build + "/bin/ipuof-run", "--model", d + "/model.onnx", "--micro-batch", "8",
          "--predict=json"]
    if _tool(pr, env, d + "/predict.json") != 0:
        return [_fail(d + "/predict.json")] * 4
    text = _wall(open(log, "rb").read(), w).splitlines(True)
    numbers = [l for l in text if b"loss=" in l or b"Accuracy" in l]
    sim = [l for l in text if l not in numbers] + open(d + "/predict.json", "rb").readlines()
    return [hashlib.sha256(b"".join(numbers)).hexdigest()[:16], _h(d + "/model.onnx"),
            hashlib.sha256(b"".join(sim)).hexdigest()[:16], _h(d + "/p/trace.json")]


def build_driver(build, w):
    src = os.path.dirname(os.path.abspath(build))
    inc = os.path.join(src, "client", "include")
    lib = os.path.join(os.path.abspath(build), "lib")
    if not os.path.exists(os.path.join(inc, "ipuof", "client.h")):
        sys.exit("identity: %s has no client/include/ipuof/client.h: BUILD must be the build "
                 "folder of a checkout (its parent holds the sources)" % src)
    out = os.path.join(w, "identity_drv")
    nm = subprocess.run(["nm", "-D", os.path.join(lib, "libipuof-client.so")],
                        capture_output=True, text=True).stdout
    san = ["-fsanitize=address,undefined"] if "__asan_init" in nm else []  # a SAN=1 build
    subprocess.run(["cc", "-std=c11", "-O1", "-Wall"] + san + ["-I" + inc, os.path.join(
                    HERE, "identity_drv.c"), "-L" + lib, "-Wl,-rpath," + lib,
                    "-lipuof-client", "-o", out], check=True)
    return out


def start_daemon(build, w):
    port = os.path.join(w, "port")
    if os.path.exists(port):
        os.unlink(port)
    env = dict(os.environ, IPUOF_SIM_THREADS=THREADS)
    env.pop("IPUOF_SERVER", None)
    p = subprocess.Popen([build + "/bin/ipuofd", "--listen", "127.0.0.1:0", "--port-file", port,
                          "--foreground"], env=env, stderr=open(os.path.join(w, "ipuofd.log"),
                                                                "wb"))
    for _ in range(1000):
        if os.path.exists(port) and open(port).read().strip():
            return p, "127.0.0.1:" + open(port).read().strip()
        if p.poll() is not None:
            break
        time.sleep(0.02)
    p.kill()
    sys.exit("identity: %s/bin/ipuofd did not write its port (log: %s/ipuofd.log)" % (build, w))


def cmd_run(build, out, w, flt=None):
    build = os.path.abspath(build)
    os.makedirs(os.path.join(w, "models"), exist_ok=True)
    if not os.path.exists(os.path.join(w, "models", "done")):
        _models(os.path.join(w, "models"))
        open(os.path.join(w, "models", "done"), "w").close()
    drv = build_driver(build, w)
    daemon, server = start_daemon(build, w)
    env = dict(os.environ, IPUOF_SERVER=server, IPUOF_SIM_THREADS=THREADS)
    t0 = time.time()
    try:
        with open(out, "w") as f:
            for cfg in configs():
                if flt and not re.search(flt, cfg[0]):
                    continue
                line = " ".join([cfg[0]] + run_one(cfg, build, drv, w, env))
                f.write(line + "\n")
                f.flush()
                print(line, flush=True)
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(10)
        except subprocess.TimeoutExpired:
            daemon.kill()
    print("identity: %s: %d s" % (build, time.time() - t0), file=sys.stderr)


PARTS = ("outputs", "weights", "cost", "trace")


def cmd_compare(a, b):
    la = {l.split()[0]: l.split()[1:] for l in open(a) if l.strip()}
    lb = {l.split()[0]: l.split()[1:] for l in open(b) if l.strip()}
    bad = 0
    for name in list(la) + [n for n in lb if n not in la]:
        if name not in la or name not in lb:
            print("%s: only in %s" % (name, a if name in la else b))
            bad += 1
            continue
        diff = [p for p, x, y in zip(PARTS, la[name], lb[name]) if x != y or x.startswith("FAIL")]
        if diff:
            bad += 1
            print("%s: %s differ (%s | %s)" % (name, ",".join(diff), " ".join(la[name]),
                                                " ".join(lb[name])))
    print("identity: %d configurations, %d differ" % (len(set(la) | set(lb)), bad))
    return 1 if bad else 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "run":
        cmd_run(argv[2], argv[3], argv[4] if len(argv) > 4 else "/tmp/ipuof-identity",
                argv[5] if len(argv) > 5 else None)
        return 0
    if len(argv) == 4 and argv[1] == "compare":
        return cmd_compare(argv[2], argv[3])
    if len(argv) == 2 and argv[1] == "list":
        for c in configs():
            print(c[0])
        return 0
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
