"""Blocks, stages and execution strategies, as PopTorch declares them, turned into the
daemon's placement: a list of (node-name prefix, stage, IPU).

A block is marked in the model with poptorch.Block (a context manager, or the decorator
BlockFunction), or by BeginBlock on a layer. While the model is captured
(torch.onnx.export), a module forward pre-hook records which modules run inside which
block; torch 1.13 names every ONNX node after its module path ("/layer1/conv/Conv"), so a
block becomes the prefixes "/layer1/" of its modules (the scopes of the modules being
called when it starts, so a layer of an nn.ModuleList is "/encoder/layer.0/"). A Block context pushes a tracing
scope of its own while the exporter traces, so every op run inside it, inline ops too, is
named under "/ipuof_block_N/" (below the path of the module that opened it), that
block's prefix. Other ops outside any module stay with
the latest block among their producers', as the daemon places them.
"""
import functools
import threading

import torch

from . import enums
from .errors import Error

_state = threading.local()


def _recording():
    """The recorder of the capture in progress on this thread, or None."""
    return getattr(_state, "recorder", None)


def _scope_name(qualified):
    """The tracing scope torch.onnx.export (torch 1.13) gives the module named `qualified`
    in named_modules(): its last non-numeric atom and the numeric ones after it
    ("bert.encoder.layer.0" -> "layer.0", "seq.1" -> "seq.1", "d.a" -> "a"). A node's
    name joins the scopes of the modules being called when it is made; a container that
    is never called (nn.ModuleList, nn.ModuleDict) adds none."""
    atoms = qualified.split(".")
    for i in range(len(atoms) - 1, -1, -1):
        if not atoms[i].isnumeric():
            return ".".join(atoms[i:])
    return qualified


class _NoBlockCheck(torch.overrides.TorchFunctionMode):
    """Active only while a capture's `with Block` context has closed and no block has
    started since (_Recorder.ended): an op (a torch function giving a tensor) run then
    belongs to no block, which PopTorch refuses ("No active Block, all the ops must
    belong to a Block": its compiler clears the active IPU when the context ends). Shape
    queries give no tensor and pass."""

    def __init__(self, rec):
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.rec.ended and isinstance(out, torch.Tensor):
            name = getattr(func, "__name__", str(func))
            raise Error(f"No active Block, all the ops must belong to a Block ('{name}' "
                        "runs after a `with poptorch.Block(...)` closed and before the "
                        "next block starts)")
        return out


class _StartedBlockScope(torch.overrides.TorchFunctionMode):
    """The tracing scope of a block opened by Block.start (no context closes it): while
    the exporter traces, each op (a torch function) run outside any `with Block` is
    traced under the scope "ipuof_block_N", pushed and popped around the op alone, so
    the module scopes around it stay balanced; inline ops get the block's prefix as in
    a context. Active until the next Block.start or BeginBlock layer, or the end of
    forward()."""

    def __init__(self, rec, name):
        super().__init__()
        self.rec = rec
        self.name = name

    def __torch_function__(self, func, types, args=(), kwargs=None):
        state = torch._C._get_tracing_state()
        if state is None or self.rec.stack:
            return func(*args, **(kwargs or {}))
        state.push_scope(f"poptorch.Block::{self.name}")
        try:
            return func(*args, **(kwargs or {}))
        finally:
            state.pop_scope()


def forward_returned():
    """The model's forward() has returned: what the capture computes after it (a hidden
    loss's sum) belongs to the last block."""
    rec = _recording()
    if rec is not None:
        rec.ended = False
        rec.stop_started()


class _Recorder:
    """Collects, during one capture, the module paths run inside each block."""

    def __init__(self, root):
        # Each module's tracing scope name, as torch.onnx.export names it (below).
        self.scope_names = {id(m): _scope_name(name) for name, m in root.named_modules()}
        self.calls = []           # scope names of the modules being called, outermost first
        self.stack = []           # (user_id, ipu_id) of the open Block contexts
        self.begun = None         # the block a BeginBlock layer started
        self.blocks = {}          # user_id -> {"ipu": id or None, "prefixes": [...]}
        self.order = []           # user ids in the order they were first seen
        self.before = []          # prefixes of the modules called before any block
        self.defaults = []        # those the default block holds (default_prefixes)
        self.handle = None
        self.scoped = 0           # Block contexts open with a tracing scope
        self.scopes = 0           # tracing scopes made (their names are numbered)
        self.started = None       # the _StartedBlockScope of a Block.start block

    def __enter__(self):
        _state.recorder = self
        self.handle = torch.nn.modules.module.register_module_forward_pre_hook(self._pre)
        self.post_handle = torch.nn.modules.module.register_module_forward_hook(self._post)
        self.mode = None          # the _NoBlockCheck while ended
        return self

    @property
    def ended(self):
        """True after a Block context closed and before the next block starts: the
        check of _NoBlockCheck is on (only then, so other captures trace without it)."""
        return self.mode is not None

    @ended.setter
    def ended(self, value):
        if value and self.mode is None:
            self.mode = _NoBlockCheck(self)
            self.mode.__enter__()
        elif not value and self.mode is not None:
            mode, self.mode = self.mode, None
            mode.__exit__(None, None, None)

    def stop_started(self):
        """Ends the tracing scope of the block Block.start opened, if any."""
        if self.started is not None:
            mode, self.started = self.started, None
            mode.__exit__(None, None, None)

    def start_block(self, user_id, ipu_id):
        """Block.start during a capture: the block begins (as a BeginBlock layer's), and
        while the exporter traces, the ops run from here get its own scope."""
        self.begun = (user_id, ipu_id)
        self.ended = False
        self.stop_started()
        b = self._block(user_id, ipu_id)
        if torch._C._get_tracing_state() is not None:
            name = f"ipuof_block_{self.scopes}"
            self.scopes += 1
            b["prefixes"].append(f"/{name}/")
            self.started = _StartedBlockScope(self, name)
            self.started.__enter__()

    def __exit__(self, *exc):
        self.ended = False
        self.stop_started()
        self.handle.remove()
        self.post_handle.remove()
        _state.recorder = None

    def _block(self, user_id, ipu_id):
        b = self.blocks.get(user_id)
        if b is None:
            b = self.blocks[user_id] = {"ipu": ipu_id, "prefixes": [], "modules": []}
            self.order.append(user_id)
        elif ipu_id is not None:
            b["ipu"] = ipu_id
        return b

    def prune(self, node_names):
        """The prefixes as the ONNX graph names them: a Block scope "/ipuof_block_N/"
        sits under the path of the module whose forward opened it
        ("/model/ipuof_block_0/..."), so it becomes the node-name prefixes up to it; a
        prefix no node name starts with (a Block around no op) is dropped, since the
        daemon refuses one that matches no node."""
        self.split()
        for b in self.blocks.values():
            out = []
            for p in b["prefixes"]:
                if p.startswith("/ipuof_block_"):
                    found = {n[:n.index(p) + len(p)] for n in node_names if p in n}
                elif any(n.startswith(p) for n in node_names):
                    found = {p}
                else:
                    found = set()
                out += sorted(f for f in found if f not in out)
            b["prefixes"] = out
        self.default_prefixes(node_names)

    def default_prefixes(self, node_names):
        """The prefixes of the modules run before the first block that hold no block
        (outermost first), into self.defaults: PopTorch runs them in its default block,
        IPU 0 and stage 0, ahead of the first block (_placement puts them there)."""
        taken = [p for b in self.blocks.values() for p in b["prefixes"]]
        out = []
        for m in self.before:
            if any(q.startswith(m) for q in taken) or any(m.startswith(p) for p in out):
                continue
            if any(n.startswith(m) for n in node_names):
                out.append(m)
        self.defaults = out

    def _post(self, module, args, out):
        """Leaves module's call (its scope)."""
        if self.calls:
            self.calls.pop()

    def _pre(self, module, args):
        """Enters module's call: its scope goes on the call stack, and the module's node
        prefix, the scopes of the modules being called joined ("/bert/encoder/layer.0/"),
        goes to the current block (unless an enclosing module's prefix covers it)."""
        name = self.scope_names.get(id(module))
        self.calls.append(name)
        begin = getattr(module, "_ipuof_begin_block", None)
        if begin is not None:
            self.begun = begin
            self.ended = False
            self.stop_started()
            self._block(*begin)
        if self.scoped or self.started is not None:
            return  # inside a Block context or after Block.start: its tracing scope names
            #         the module's nodes
        current = self.stack[-1] if self.stack else self.begun
        if current is None and name and not self.order:
            self.before.append("/" + "/".join(n for n in self.calls if n) + "/")
        if current is None or not name:
            return
        prefix = "/" + "/".join(n for n in self.calls if n) + "/"
        b = self._block(*current)
        if prefix not in b["modules"]:
            b["modules"].append(prefix)
        # Only the outermost module of a block is needed: its prefix covers the others
        # (split() undoes that where another block's module lies below it).
        if any(prefix.startswith(p) for p in b["prefixes"]):
            return
        if any(prefix == p for blk in self.blocks.values() for p in blk["prefixes"]):
            return
        b["prefixes"].append(prefix)

    def split(self):
        """A block's container prefix with another block's module below it (the
        embeddings' block entered "/bert/encoder/", then "/bert/encoder/layer.0/" began
        Encoder0) is replaced by the block's own modules one scope below it, again
        until none is: the container's inline ops then have no prefix and go with
        their latest producer, as PopTorch puts an op in the block current when it runs."""
        for uid, b in self.blocks.items():
            others = [q for u2, b2 in self.blocks.items() if u2 != uid
                      for q in b2["prefixes"]]
            out = list(b["prefixes"])
            while True:
                bad = [p for p in out if not p.startswith("/ipuof_block_")
                       and any(q != p and q.startswith(p) for q in others)]
                if not bad:
                    break
                for p in bad:
                    out.remove(p)
                    out += [m for m in b["modules"] if m.startswith(p) and m not in out
                            and m not in others and m[len(p):].count("/") == 1]
            b["prefixes"] = out


class Block:
    """Ops run inside `with poptorch.Block("B1", ipu_id=0):` belong to block "B1"."""

    _auto = None

    def __init__(self, user_id=None, ipu_id=None):
        if user_id is None:
            if Block._auto is None:
                raise ValueError("poptorch.Block needs a user_id (or Block.useAutoId())")
            user_id = str(Block._auto)
            Block._auto += 1
        self.user_id = str(user_id)
        self.ipu_id = ipu_id

    @staticmethod
    def useAutoId():
        """Blocks without a user_id are numbered "0", "1", ... from now on."""
        Block._auto = 0

    @staticmethod
    def start(user_id=None, ipu_id=None):
        """Starts block user_id (on ipu_id): the layers that run from here on belong to
        it, up to the next Block.start or BeginBlock layer (as a BeginBlock mark does)."""
        b = Block(user_id, ipu_id)
        rec = _recording()
        if rec is not None:
            rec.start_block(b.user_id, b.ipu_id)
        return b

    def __enter__(self):
        rec = _recording()
        self._scope = False
        if rec is not None:
            rec.stack.append((self.user_id, self.ipu_id))
            rec.ended = False
            b = rec._block(self.user_id, self.ipu_id)
            state = torch._C._get_tracing_state()
            if state is not None:
                # While torch.onnx.export traces, the ops run here (inline ones too, not
                # only modules') get node names under a scope of this block's own.
                name = f"ipuof_block_{rec.scopes}"
                rec.scopes += 1
                state.push_scope(f"poptorch.Block::{name}")
                b["prefixes"].append(f"/{name}/")
                rec.scoped += 1
                self._scope = True
        return self

    def __exit__(self, *exc):
        rec = _recording()
        if rec is not None and rec.stack:
            rec.stack.pop()
            rec.ended = exc[0] is None  # PopTorch ends the active block with the context
        if self.__dict__.get("_scope"):
            self._scope = False
            rec.scoped -= 1
            state = torch._C._get_tracing_state()
            if state is not None:
                state.pop_scope()
        return False


def BlockFunction(user_id=None, ipu_id=None):
    """A decorator: every call of the function runs inside Block(user_id, ipu_id)."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with Block(user_id, ipu_id):
                return fn(*args, **kwargs)
        return inner
    return wrap


class _BeginBlockFn(torch.nn.Module):
    """BeginBlock of a function (PopTorch's legacy form): a module whose call runs the
    function inside Block(user_id, ipu_id)."""

    def __init__(self, fn, user_id=None, ipu_id=None):
        super().__init__()
        self._layer_to_call = fn
        self._user_id = user_id
        self._ipu_id = ipu_id

    def forward(self, *args, **kwargs):
        uid = self._user_id if self._user_id is not None else f"fn{id(self)}"
        with Block(uid, self._ipu_id):
            return self._layer_to_call(*args, **kwargs)


def BeginBlock(layer, user_id=None, ipu_id=None):
    """Marks layer (a torch.nn.Module) as the start of block user_id: it and the layers
    that run after it, up to the next BeginBlock, form the block. Returns layer. A
    function (PopTorch's legacy form) is returned wrapped in a module that runs it
    inside the block."""
    if not isinstance(layer, torch.nn.Module):
        if callable(layer):
            return _BeginBlockFn(layer, user_id, ipu_id)
        raise ValueError("BeginBlock expects a torch.nn.Module or a function, not "
                         f"{type(layer).__name__}")
    if hasattr(layer, "_ipuof_begin_block"):
        raise Error("module has already been assigned to a block.")
    layer._ipuof_begin_block_args = (user_id, ipu_id)  # as given, for module_repr
    if user_id is None:
        user_id = str(id(layer))
    layer._ipuof_begin_block = (str(user_id), ipu_id)
    return layer


def module_repr(m):
    """torch's repr of module m with each BeginBlock mark shown before the module it
    starts, as PopTorch's module_repr shows its block pre-hooks:
    "(l1): BeginBlock(user_id=None, ipu_id=1) Linear(...)"."""
    lines = []
    extra = m.extra_repr()
    extra_lines = extra.split("\n") if extra else []
    child_lines = []
    for key, child in m._modules.items():
        text = "\n  ".join(module_repr(child).split("\n"))
        child_lines.append(f"({key}): {text}")
    lines = extra_lines + child_lines
    mark = ""
    args = m.__dict__.get("_ipuof_begin_block_args")
    if args is not None and hasattr(m, "_ipuof_begin_block"):
        mark = f"BeginBlock(user_id={args[0]}, ipu_id={args[1]}) "
    out = mark + m._get_name() + "("
    if lines:
        if len(extra_lines) == 1 and not child_lines:
            out += extra_lines[0]
        else:
            out += "\n  " + "\n  ".join(lines) + "\n"
    return out + ")"


def removeBlocks(module):
    """Removes the BeginBlock marks of module and its children."""
    for m in module.modules():
        if hasattr(m, "_ipuof_begin_block"):
            del m._ipuof_begin_block
        m.__dict__.pop("_ipuof_begin_block_args", None)


class Stage:
    """Blocks run one after another in one pipeline stage, on one IPU."""

    def __init__(self, *block_ids):
        self.blocks = [str(b) for b in block_ids]
        self._ipu = None

    def ipu(self, ipu):
        self._ipu = ipu
        return self


class _Strategy:
    """The common part of the execution strategies: stages of blocks."""
    code = 0
    name = ""

    def __init__(self, *args):
        self.auto = enums.AutoStage.SameAsIpu
        self.stages = []
        for a in args:
            if isinstance(a, enums.AutoStage):
                self.auto = a
            elif isinstance(a, Stage):
                self.stages.append(a)
            elif isinstance(a, (list, tuple)) and a and all(isinstance(x, Stage) for x in a):
                self.stages.extend(a)
            elif isinstance(a, (list, tuple)):
                self.stages.append(Stage(*a))
            else:
                self.stages.append(Stage(a))
        seen = set()
        for s in self.stages:
            for b in s.blocks:
                if b in seen:
                    raise ValueError(f"{b} associated with more than one stage")
                seen.add(b)

    def stage(self, block_id):
        """The stage holding block_id (to set its IPU)."""
        for s in self.stages:
            if str(block_id) in s.blocks:
                return s
        raise ValueError(f"Unknown Block '{block_id}' list of expected Blocks: "
                         f"{[b for s in self.stages for b in s.blocks]}")

    def placement(self, recorder_blocks, order):
        """[(prefix, stage, ipu)] for the daemon from the recorded blocks; stage -1 lets
        the daemon number them. Raises poptorch.Error for a block the model never used."""
        from .errors import Error
        stages = self.stages or [Stage(b) for b in order]
        known = {b for s in stages for b in s.blocks}
        for b in order:
            if b not in known:
                stages.append(Stage(b))
        out = []
        # PopTorch's AutoIncrement numbers the blocks' stages from 1: stage 0 is its
        # default block, the ops run before the first block (_DefaultStageManager).
        next_stage = 1 if not self.stages and self.auto == enums.AutoStage.AutoIncrement \
            else 0
        for s in stages:
            stage_id = next_stage
            next_stage += 1
            for b in s.blocks:
                if b not in recorder_blocks:
                    raise Error(f"{self.name}: Unknown Block '{b}' list of expected Blocks: "
                                f"{order}")
                blk = recorder_blocks[b]
                ipu = s._ipu if s._ipu is not None else blk["ipu"]
                if ipu is None:
                    raise Error("poptorch.AutoStage.SameAsIpu was selected but no IPU was "
                                f"specified for block {b}")
                if self.auto == enums.AutoStage.SameAsIpu and not self.stages:
                    stage_id = ipu
                if not blk["prefixes"]:
                    raise Error(f"{self.name}: block '{b}' contains no module, so no ONNX "
                                "node can be assigned to it; put layers (nn.Module calls) "
                                "inside the block")
                out.extend((p, stage_id, ipu) for p in blk["prefixes"])
        return out


class PipelinedExecution(_Strategy):
    """Stages on different IPUs work on different micro-batches at once."""
    code = 1
    name = "PipelinedExecution"


class ShardedExecution(_Strategy):
    """Stages run one after another, one micro-batch at a time."""
    code = 2
    name = "ShardedExecution"


class SerialPhasedExecution(_Strategy):
    """Phases run in turn on the same IPUs, weights streamed in and out."""
    code = 3
    name = "SerialPhasedExecution"

    def __init__(self, *args):
        if any(isinstance(a, enums.AutoStage) for a in args):
            raise ValueError("There is currently no AutoStage for PhasedExecution, please "
                             "explicitly specify the phases")
        super().__init__(*args)

    def setTensorsLiveness(self, liveness):
        self.liveness = enums.Liveness(liveness)
        return self

    def useSeparateBackwardPhase(self, use=True):
        self.separate_backward = bool(use)
        return self


class Phase(Stage):
    """A phase of a phased execution: stages given as Stage objects (run in parallel on
    their IPUs under ParallelPhasedExecution), or block ids (one stage of them all)."""

    def __init__(self, *args):
        if args and all(isinstance(a, Stage) for a in args):
            self.stages = list(args)
            super().__init__(*[b for st in args for b in st.blocks])
        else:
            if not all(isinstance(a, str) for a in args):
                raise ValueError("poptorch.Phase expects block ids (str) or "
                                 "poptorch.Stage objects, not "
                                 f"{[type(a).__name__ for a in args]}")
            super().__init__(*args)
            self.stages = [self]

    def stage(self, idx):
        return self.stages[idx]

    def ipus(self, *ids):
        """The IPU of each of the phase's stages, in order."""
        if len(ids) != len(self.stages):
            raise ValueError(f"Phase contains {len(self.stages)} stages but you provided "
                             f"{len(ids)} ipus")
        for st, ipu in zip(self.stages, ids):
            st._ipu = ipu
        if len(ids) == 1:
            self._ipu = ids[0]
        return self


class ParallelPhasedExecution(SerialPhasedExecution):
    """Phases in turn, the stages of one phase on different IPUs (PopTorch: in parallel).
    On ipuofd the phases' stages run as serial phased ones do, one after another on
    their IPUs, with their weights streamed in: the numbers are the same, while the
    simulated clock counts the stages of a phase one after the other rather than at
    once (docs/python.md)."""
    code = 3
    name = "ParallelPhasedExecution"

    def __init__(self, *phases):
        if not phases:
            raise ValueError("There is currently no AutoStage for PhasedExecution, please "
                             "explicitly specify the phases")
        self._phases = []
        for p in phases:
            if isinstance(p, Phase):
                phase = p
            elif isinstance(p, (list, tuple)):
                phase = Phase(*p)
            else:
                phase = Phase(p)
            self._phases.append(phase)
        super().__init__(*[st for ph in self._phases for st in ph.stages])

    def placement(self, recorder_blocks, order):
        """As the base's, but a step (stage) per use of a block in the order the model
        ran them, on its stage's IPU: the stages of one phase may pass data both ways
        (block A -> B -> A again across two IPUs), so each `with Block` use is its own
        step (its tracing scope's number gives the order; module prefixes follow, in
        block order)."""
        import re
        from .errors import Error
        stage_of = {b: st for st in self.stages for b in st.blocks}
        for b in stage_of:
            if b not in recorder_blocks:
                raise Error(f"{self.name}: Unknown Block '{b}' list of expected Blocks: "
                            f"{order}")
        uses = []
        for k, b in enumerate(order):
            if b not in stage_of:
                raise Error(f"{self.name}: block '{b}' is in no phase; phases: "
                            f"{[st.blocks for st in self.stages]}")
            blk = recorder_blocks[b]
            ipu = stage_of[b]._ipu if stage_of[b]._ipu is not None else blk["ipu"]
            if ipu is None:
                raise Error(f"{self.name}: no IPU for block {b}: give it with "
                            "Block(ipu_id=...) or the phase's ipus()")
            if not blk["prefixes"]:
                raise Error(f"{self.name}: block '{b}' contains no op")
            for p in blk["prefixes"]:
                m = re.search(r"/ipuof_block_(\d+)/$", p)
                uses.append(((0, int(m.group(1))) if m else (1, k), p, ipu))
        uses.sort()
        return [(p, step, ipu) for step, (_, p, ipu) in enumerate(uses)]

    def phase(self, phase):
        if not isinstance(phase, int) or phase < 0:
            raise ValueError("Phases are identified by positive integers")
        return self._phases[phase]