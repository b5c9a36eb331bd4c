"""The compiled graph as PopTorch's users read it: the lowering lines PopTorch logs at
DEBUG (each graph input, parameter and op with its PopART tensor name, type, shape and
placement: " l1/Mul:0 [float32(1, 5), mode(Pipelined), ipu(0), stage(0)]"), the session
options its compiler derives from the placement ("enablePipelining set to value 1"), and
`_debugGetPopartIR()`: PopART's IR JSON ({"maingraph": [op, ...]}, each op's type, name,
inputs with shape and type, outputs and attributes), logged too at TRACE ("Popart IR: ...").

All of it is built from the graph this package sends the daemon (the ONNX graph after
the capture and its annotations) and the placement sent with it, node by node as the
daemon places them (sim/sched/place.c: the block whose name prefix is the longest match,
else the latest block among the producers of the node's inputs, else the first block).
Names follow PopART's builder: "<scope>/<OpType>:<output index>", made unique with "/1",
"/2", ...; the scope is the module path ("layer1/0/" for `layer1[0]`), none with
Options.disableModuleNamescope(). ONNX op types are PopART's for the standard ops.

What it does not show: the daemon's backward ops (the daemon derives them from the
forward graph when it compiles), PopART's pattern rewrites, and which ops automatic
recomputation picks (only checkpointed ops are marked, "recomputetype": "Checkpoint").
The training ops listed are the optimizer's, one set per trained weight, with PopART's
names for the optimizer the daemon runs (SGD0VarUpdate, AdamUpdater, ...).
"""
import json
import re

import torch

from . import _lib, _logging, _recompute, blocks, enums, optim
from .optim import _log as _optim_log

logger = _logging.logger

_DTYPES = {1: "float32", 10: "float16", 6: "int32", 7: "int32", 9: "bool", 2: "uint8",
           3: "int8", 5: "int16", 11: "float64", 12: "uint32"}
_ONNX_DTYPES = {1: "FLOAT", 10: "FLOAT16", 6: "INT32", 7: "INT32", 9: "BOOL", 2: "UINT8",
                3: "INT8", 5: "INT16", 11: "DOUBLE", 12: "UINT32"}
_MODES = {0: "Pipelined", 1: "Sharded", 2: "Phased"}
_BLOCK_SCOPE = re.compile(r"^ipuof_block_\d+$")


def _scope(node_name, enabled):
    """The PopART name scope of an ONNX node named by torch 1.13's exporter
    ("/layer1/layer1.0/Conv" -> "layer1/0/"): the module path, without the Block
    contexts' own scopes; "" when name scopes are disabled."""
    if not enabled or not node_name.startswith("/"):
        return ""
    comps = node_name.split("/")[1:-1]
    out = []
    for c in comps:
        if _BLOCK_SCOPE.match(c):
            continue
        atoms = c.split(".")
        if len(atoms) > 1 and out and atoms[0] == out[-1]:
            atoms = atoms[1:]        # "layer1.0" under "layer1": the child "0"
        out.extend(atoms)
    return "".join(a + "/" for a in out)


class _Names:
    """PopART's builder ids: base, then base/1, base/2, ... once base is taken."""

    def __init__(self):
        self.used = set()

    def next(self, base):
        k, name = 0, base
        while name in self.used:
            k += 1
            name = f"{base}/{k}"
        self.used.add(name)
        return name


class Graph:
    """The compiled graph's ops in order, with PopART names, types, shapes and
    placement."""

    def __init__(self, ex):
        import onnx
        model = onnx.load_from_string(ex._onnx)
        try:
            model = onnx.shape_inference.infer_shapes(model)
        except Exception:  # pylint: disable=broad-except
            pass               # custom-domain ops: shapes stay unknown where so
        g = model.graph
        self.ex = ex
        self.types = {}
        for v in list(g.input) + list(g.output) + list(g.value_info):
            t = v.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim] \
                if t.HasField("shape") else None
            self.types[v.name] = (t.elem_type, dims)
        for i in g.initializer:
            self.types[i.name] = (i.data_type, list(i.dims))
        self.initializers = {i.name for i in g.initializer}
        self.nodes = [n for n in g.node]
        self.inputs = [i.name for i in g.input if i.name not in self.initializers]
        self.outputs = [o.name for o in g.output]
        scopes = not ex._options._values.get("module_namescope_disabled")
        names = _Names()
        self.ids = {}
        for k, name in enumerate(self.inputs):
            self.ids[name] = names.next("input")
        for name in sorted(self.initializers):
            self.ids[name] = names.next(name)
        self.op_names = []
        for j, n in enumerate(self.nodes):
            sc = _scope(n.name, scopes)
            self.op_names.append(sc + n.op_type)
            if n.op_type == "Identity" and self.is_constant(j):
                # torch's exporter gives a state tensor equal to another (a fresh
                # BatchNorm's running_var and weight) as an Identity of it: a parameter
                self.ids[n.output[0]] = names.next(n.output[0])
                continue
            for k, o in enumerate(n.output):
                if o:
                    self.ids[o] = names.next(f"{sc}{n.op_type}:{k}")
        self.place = _placement(self, ex)

    def is_constant(self, k):
        """Node k makes a value known at compile time (PopART folds it into a tensor)."""
        n = self.nodes[k]
        return n.op_type == "Constant" or (
            n.op_type == "Identity" and n.input and n.input[0] in self.initializers)

    def type_text(self, name):
        """PopTorch's "float32(1, 5)" of a tensor."""
        elem, dims = self.types.get(name, (0, None))
        if dims is None or any(d is None for d in dims):
            return "undefined(shape inference failed)"
        return f"{_DTYPES.get(elem, 'undefined')}({', '.join(str(d) for d in dims)})"


def _node_blocks(graph, blocks_list):
    """Each node's index in blocks_list as the daemon chooses it (place.c's match_block
    and producer_block)."""
    by_index = any(st < 0 for _, st, _ in blocks_list)
    producer = {}
    out = []
    for k, n in enumerate(graph.nodes):
        best, best_len = -1, 0
        for b, (prefix, _, _) in enumerate(blocks_list):
            if n.name.startswith(prefix) and (best < 0 or len(prefix) > best_len):
                best, best_len = b, len(prefix)
        if best < 0:
            for i in n.input:
                p = producer.get(i)
                if p is None:
                    continue
                b = out[p]
                if best < 0 or (b > best if by_index else
                                blocks_list[b][1] > blocks_list[best][1]):
                    best = b
            best = max(best, 0)
        out.append(best)
        if not graph.is_constant(k):
            for o in n.output:
                producer[o] = k
    return out


def _mode(options):
    return options.toDict()["execution_mode"]


def _phase_of(strategy, rec_blocks, prefix):
    """The phase of the block holding prefix under a phased strategy (0 if none)."""
    uid = next((u for u, b in rec_blocks.items() if prefix in b["prefixes"]), None)
    phases = getattr(strategy, "_phases", None)
    if phases is not None:
        for k, ph in enumerate(phases):
            if any(uid in st.blocks for st in ph.stages):
                return k
        return 0
    # Serial phases with tensors off chip between them leave gaps (Compiler.cpp's
    # setActiveIpu: phase x 2 for OffChipAfterFwdNoOverlap, x 4 for OffChipAfterEachPhase)
    stride = {enums.Liveness.OffChipAfterFwdNoOverlap: 2,
              enums.Liveness.OffChipAfterEachPhase: 4}.get(
                  getattr(strategy, "liveness", None), 1)
    for k, st in enumerate(strategy.stages):
        if uid in st.blocks:
            return k * stride
    return 0


def _placement(graph, ex):
    """[(ipu, stage or phase)] of each node: IPU 0, stage 0 without a placement."""
    opts = getattr(ex, "_placement_opts", None)
    blocks_list = opts["blocks"] if opts else []
    if not blocks_list:
        return [(0, 0)] * len(graph.nodes)
    which = _node_blocks(graph, blocks_list)
    strategy = ex._options.execution_strategy
    rec = getattr(ex, "_blocks_record", None)
    out = []
    for b in which:
        prefix, stage, ipu = blocks_list[b]
        if _mode(ex._options) == 2 and rec is not None:
            stage = _phase_of(strategy, rec, prefix)
        out.append((ipu, stage))
    return out


def _execution_info(mode, ipu, stage):
    if mode == 2:
        return f" mode(Phased), ipu({ipu}), phase({stage})"
    return f" mode({_MODES.get(mode, 'Pipelined')}), ipu({ipu}), stage({stage})"


def _torch_type(t):
    """A parameter's type as torch's JIT prints it: "Float(16, strides=[1],
    requires_grad=0, device=ipu:0)"."""
    name = {torch.float32: "Float", torch.float16: "Half", torch.int64: "Long",
            torch.int32: "Int", torch.bool: "Bool"}.get(t.dtype, str(t.dtype))
    dims = "".join(f"{d}, " for d in t.shape)
    strides = ", ".join(str(s) for s in t.stride())
    return (f"{name}({dims}strides=[{strides}], requires_grad={int(t.requires_grad)}, "
            "device=ipu:0)")


def log_lowering(ex):
    """PopTorch's DEBUG lines of the lowering, then its compiler's session options."""
    if not logger.isEnabledFor(10):
        return
    graph = Graph(ex)
    mode = _mode(ex._options)
    logger.debug("Graph lowered to PopART {")
    logger.debug("graph(")
    for name in graph.inputs:
        k = ex._names.index(name) if name in ex._names else -1
        jit = _torch_type(ex._sample[k]) if 0 <= k < len(ex._sample) else \
            graph.type_text(name)
        logger.debug("      input: %%%s : %s -> %s [%s]", name, jit, graph.ids[name],
                     graph.type_text(name))
    known = set(graph.ids)
    for name, t in ex._weights.items():
        if name in known:
            logger.debug("      param: %%%s : %s -> %s [%s]", name, _torch_type(t),
                         graph.ids[name], graph.type_text(name))
    logger.debug("  ):")
    for k, n in enumerate(graph.nodes):
        if graph.is_constant(k):
            continue
        outs = [o for o in n.output if o]
        ipu, stage = graph.place[k]
        logger.debug("%s was lowered to %s [%s,%s]", _node_text(n),
                     ", ".join(graph.ids[o] for o in outs),
                     ", ".join(graph.type_text(o) for o in outs),
                     _execution_info(mode, ipu, stage))
    logger.debug("  return (")
    for k, name in enumerate(graph.outputs):
        logger.debug("    output: %%%s -> %s [%s]", name, graph.ids.get(name, name),
                     graph.type_text(name))
    logger.debug("  )")
    logger.debug("}")
    _log_session(ex, graph, mode)
    if _logging.output_popart_ir():
        logger.debug("Popart IR: %s", ir_json(ex, graph))


def _node_text(n):
    return f"%{', %'.join(o for o in n.output if o)} = {n.domain or 'ai.onnx'}::" \
        f"{n.op_type}({', '.join('%' + i for i in n.input if i)})"


def _log_session(ex, graph, mode):
    """The session options PopTorch's compiler sets from the placement (Compiler.cpp
    initSession's "NAME set to value VALUE")."""
    o = ex._options
    ipus = {ipu for k, (ipu, _) in enumerate(graph.place) if not graph.is_constant(k)}
    d = logger.debug
    d("engineOptions[debug.retainDebugInformation] set to value false")
    if mode == 0:
        d("enablePipelining set to value %d", int(len(ipus) > 1))
        if len(ipus) > 1 and _recompute.recomputation_mode(o) is None:
            d("autoRecomputation set to value Pipeline")
    else:
        d("enablePipelining set to value 0")
    if mode == 2:
        s = o.execution_strategy
        phases = max((st for k, (_, st) in enumerate(graph.place)
                      if not graph.is_constant(k)), default=0) + 1
        live = getattr(s, "liveness", enums.Liveness.AlwaysLive)
        if live != enums.Liveness.AlwaysLive:
            phases += 3
        elif getattr(s, "separate_backward", False):
            phases += 1
        serial = not isinstance(s, blocks.ParallelPhasedExecution)
        d("executionPhaseSettings.phases set to value %d", phases)
        d("executionPhaseSettings.stages set to value %d", 1 if serial else 2)
        for kind in ("activation", "weight", "optimizer", "accumulator"):
            d("location_%s set to value useOnChipStorage(False)", kind)
    d("enableLoadAndOffloadRNGState set to value 1")
    vg = "ExecutionPhases" if mode == 2 else ("Manual" if len(ipus) > 1 else "Auto")
    d("virtualGraphMode set to value %s", vg)
    nproc = o.Distributed.numProcesses
    d("enableDistributedReplicatedGraphs set to value %d", int(nproc > 1))
    d("globalReplicationFactor set to value %d", nproc * o.replication_factor)
    d("globalReplicaOffset set to value %d", o.Distributed.processId * o.replication_factor)
    d("enableReplicatedGraphs set to value %d", int(o.replication_factor > 1))
    d("constantWeights set to value 0")
    accum = o.Training.gradient_accumulation if ex._training else 1
    d("enableGradientAccumulation set to value %d", int(accum > 1))


def _attr_text(a):
    from onnx import helper
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(str(x) for x in v) + "]"
    return str(v)


def _op_attributes(ex, graph, k):
    """The attributes of node k as PopART's IR JSON writes them (all strings)."""
    n = graph.nodes[k]
    mode = _mode(ex._options)
    attrs = {}
    recompute = "Undefined"
    for a in n.attribute:
        if a.name == "__recompute_output_in_backward":
            recompute = "Checkpoint"
        elif a.name == "__available_memory_proportion":
            attrs["availableMemoryProportion"] = _attr_text(a)
        elif a.name != "value":
            attrs[a.name] = _attr_text(a)
    half = ex._options.Precision.partials_type == torch.float16
    if n.op_type in ("MatMul", "Gemm"):
        attrs["partialsType"] = "MatMulPartialsType::" + ("HALF" if half else "FLOAT")
    elif n.op_type in ("Conv", "ConvTranspose"):
        attrs["partialsType[0]"] = "half" if half else "float"
    attrs["recompute"] = "NO"
    if getattr(ex, "_placement_opts", None):
        ipu, stage = graph.place[k]
        attrs["__ipu_number"] = str(ipu)
        if mode == 2:
            attrs["__execution_phase"] = str(stage)
        else:
            attrs["__pipeline_stage"] = str(stage)
    attrs["recomputetype"] = recompute
    return attrs


def _tensor(graph, name, index):
    elem, dims = graph.types.get(name, (0, None))
    shape = "[" + " ".join(str(d) for d in dims) + "]" if dims is not None and \
        all(d is not None for d in dims) else "[]"
    return {"name": graph.ids.get(name, name), "shape": shape,
            "type": _ONNX_DTYPES.get(elem, "UNDEFINED"), "index": str(index)}


def _optimizer_ops(ex):
    """PopART's update ops for the optimizer the daemon runs, in the order PopART
    schedules them for one weight."""
    opt = ex._optimizer
    if opt is None:
        return ["SGD0VarUpdate"]
    kind = optim._kind(opt)
    lib = _lib
    if kind == lib.OPTIMIZER_SGD:
        if not any(float(g.get("momentum", 0.0) or 0.0) > 0 for g in opt.param_groups):
            return ["SGD0VarUpdate"]
        if _optim_log.combined(opt):
            return ["SGD1AcclUpdate", "SGD1VarUpdate"]
        return ["SGD2PartialAcclUpdate", "Accumulate", "SGD2VarUpdate"]
    if kind == lib.OPTIMIZER_RMSPROP:
        return ["Accumulate", "RMSPropUpdater", "ScaledVarUpdate"]
    ops = ["Accumulate", "Accumulate", "AdamUpdater"]
    if kind == lib.OPTIMIZER_LAMB:
        ops += ["LambSquare", "LambSquare"]
    return ops + ["AdamVarUpdate"]


def ir_json(ex, graph=None):
    """PopART's IR JSON of the compiled graph (see the module's docstring)."""
    graph = graph or Graph(ex)
    ops = []
    for k, n in enumerate(graph.nodes):
        if graph.is_constant(k):
            continue
        ops.append({"type": n.op_type, "name": graph.op_names[k],
                    "inputs": [_tensor(graph, i, j) for j, i in enumerate(n.input) if i],
                    "outputs": [{"name": graph.ids[o], "index": str(j)}
                                for j, o in enumerate(n.output) if o],
                    "attributes": _op_attributes(ex, graph, k)})
    if ex._training:
        updates = _optimizer_ops(ex)
        for w in sorted(ex._trainable()):
            if w not in graph.initializers:
                continue
            for t in updates:
                ops.append({"type": t, "name": f"{t}_{w}",
                            "inputs": [_tensor(graph, w, 0)],
                            "outputs": [{"name": f"Updated___{w}", "index": "0"}],
                            "attributes": {"recompute": "NO", "recomputetype": "Undefined"}})
    return json.dumps({"maingraph": ops}, separators=(",", ":"))
