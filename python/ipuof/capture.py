"""Capturing a module's call as an ONNX graph, without side effects.

A PopTorch call takes any structure of inputs and returns any structure of outputs; the
daemon takes and returns flat lists of tensors. This module binds a call's arguments as
Python does (inspect.signature: keywords to their parameters, defaults, *args, **kwargs),
flattens them into tensors and a spec of everything else (None, numbers, strings: constants
of the graph), and flattens outputs the same way (tuples, lists, dicts, None).

The host runs the module twice while capturing (once to learn the output structure, the
loss and which inputs are changed in place, once inside torch.onnx.export). Neither run may
leave a trace: both run on copies of the caller's tensors, and every parameter and buffer
(BatchNorm's running statistics, num_batches_tracked) and the RNG state are put back
afterwards, so the host state is what it was; the device run is the one real call.
An input the module changes in place becomes an extra output of the graph, copied back into
the caller's tensor after each run, as PopTorch does.

identity_loss() marks the loss of a training model: during a capture the tensor it makes
is recorded, and added as a hidden output when the module does not return it.
"""
import abc
import contextlib
import inspect
import re
import threading

import torch

from . import blocks
from .errors import Error

_state = threading.local()


def identity_loss(x, reduction):
    """PopTorch's identity_loss: x reduced by reduction ("sum", "mean" or "none") and
    marked as the loss a training model minimises. With "none" x comes back unchanged and
    the gradient that flows into it is one for every element (the loss is its sum), as
    PopART's IdentityLoss without reduction."""
    if not isinstance(x, torch.Tensor):
        raise Error(f"identity_loss takes a tensor, not a {type(x).__name__}")
    if reduction == "sum":
        out = x.sum()
        loss = out
    elif reduction == "mean":
        out = x.mean()
        loss = out
    elif reduction == "none":
        out = x
        loss = None
    else:
        raise Error(f"identity_loss: reduction must be 'sum', 'mean' or 'none', not "
                    f"{reduction!r}")
    rec = getattr(_state, "losses", None)
    if rec is not None:
        rec.append((out, loss))
    return out


def record_print(tensor, title):
    """Notes, during a capture, a tensor ipu_print_tensor is to print after each run."""
    rec = getattr(_state, "prints", None)
    if rec is not None:
        rec.append((tensor, title))


# ---- structures ------------------------------------------------------------------------

class ICustomArgParser(abc.ABC):
    """PopTorch's interface for inputs and outputs of a type of one's own: yieldTensors
    gives the object's tensors in a fixed order, reconstruct builds a new object like the
    original from an iterator over tensors in that order."""

    @abc.abstractmethod
    def yieldTensors(self, struct):
        """Yields every tensor of struct, in a deterministic order."""

    @abc.abstractmethod
    def reconstruct(self, original_structure, tensor_iterator):
        """A new object like original_structure with tensors from tensor_iterator."""


_custom_parsers = {}


def registerCustomArgParser(arg_data_type, arg_parser):
    """Registers arg_parser (an ICustomArgParser) for inputs and outputs of type
    arg_data_type, replacing any earlier one; None removes it."""
    if arg_parser is None:
        _custom_parsers.pop(arg_data_type, None)
        return
    if not isinstance(arg_parser, ICustomArgParser):
        raise Error("arg_parser must inherit from ICustomArgParser")
    _custom_parsers[arg_data_type] = arg_parser


def flatten(obj, path, leaves, names):
    """The spec of obj; its tensors appended to leaves and their names (path-based) to
    names. Tuples (named tuples too), lists and dicts are walked; anything else is a
    constant."""
    if isinstance(obj, torch.Tensor):
        leaves.append(obj)
        names.append(path)
        return ("T",)
    parser = _custom_parsers.get(type(obj))
    if parser is not None:
        tensors = list(parser.yieldTensors(obj))
        for i, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor):
                raise Error(f"{type(parser).__name__}.yieldTensors gave a "
                            f"{type(t).__name__} for {path}: it must yield tensors")
            leaves.append(t)
            names.append(f"{path}.{i}")
        return ("X", parser, obj, len(tensors))
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return ("N", type(obj), [flatten(v, f"{path}.{k}", leaves, names)
                                 for k, v in zip(obj._fields, obj)])
    if isinstance(obj, (tuple, list)):
        return ("S", type(obj), [flatten(v, f"{path}.{i}", leaves, names)
                                 for i, v in enumerate(obj)])
    if isinstance(obj, dict):
        return ("D", type(obj), [(k, flatten(v, f"{path}.{k}", leaves, names))
                                 for k, v in obj.items()])
    return ("C", obj)


def unflatten(spec, it):
    """Rebuilds the structure spec describes, taking tensors from iterator it."""
    kind = spec[0]
    if kind == "T":
        return next(it)
    if kind == "C":
        return spec[1]
    if kind == "X":
        return spec[1].reconstruct(spec[2], iter([next(it) for _ in range(spec[3])]))
    if kind == "N":
        return spec[1](*[unflatten(s, it) for s in spec[2]])
    if kind == "S":
        return spec[1](unflatten(s, it) for s in spec[2])
    return spec[1]((k, unflatten(s, it)) for k, s in spec[2])


class Call:
    """One call's arguments bound to forward's signature: .leaves (the tensors, in order),
    .names (one per tensor: the parameter's name, with .index/.key for nested ones),
    .spec (how to rebuild (args, kwargs) from the tensors)."""

    def __init__(self, module, args, kwargs):
        sig = inspect.signature(module.forward)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            m = re.match(r"missing a required argument: '(\w+)'", str(exc))
            lead = f"Mandatory parameter {m.group(1)} missing: " if m else ""
            raise Error(f"{lead}the call does not match {type(module).__name__}.forward"
                        f"{sig}: {exc}") from None
        bound.apply_defaults()  # a default is a constant of the graph, as a given value
        # The positional arguments once the defaults are in (PopTorch compares them).
        self.n_args = len(bound.args)
        self.values = bound.arguments  # the call's own objects; dropped once compiled
        self.leaves, self.names = [], []
        parts = []
        skipped = False  # a positional parameter left to its default: the rest by keyword
        for name, p in sig.parameters.items():
            if name not in bound.arguments:
                skipped = skipped or p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                inspect.Parameter.POSITIONAL_OR_KEYWORD)
                continue
            kind = p.kind
            if kind == inspect.Parameter.POSITIONAL_OR_KEYWORD and skipped:
                kind = inspect.Parameter.KEYWORD_ONLY
            value = bound.arguments[name]
            parts.append((name, kind, flatten(value, name, self.leaves, self.names)))
        self.spec = parts

    def rebuild(self, tensors):
        """(args, kwargs) for forward with tensors in place of the leaves."""
        it = iter(tensors)
        args, kwargs = [], {}
        for name, kind, spec in self.spec:
            value = unflatten(spec, it)
            if kind == inspect.Parameter.VAR_POSITIONAL:
                args.extend(value)
            elif kind == inspect.Parameter.VAR_KEYWORD:
                kwargs.update(value)
            elif kind == inspect.Parameter.KEYWORD_ONLY:
                kwargs[name] = value
            else:
                args.append(value)
        return args, kwargs

    def conform(self, other):
        """other's tensors in this (the compiled) call's order, after checking that other
        has this call's structure, constants, tensor dtypes and shapes (dict keys in any
        order); Error naming the first difference, in PopTorch's terms, otherwise."""
        meta = iter([(t.dtype, t.shape) for t in self.leaves] if self.leaves and
                    isinstance(self.leaves[0], torch.Tensor) else self.meta)
        out = []
        n_args = getattr(self, "n_args", None)
        if n_args is not None and other.n_args != n_args:
            raise Error(f"Number of positional arguments mismatch: expected {n_args} "
                        f"arguments but got {other.n_args}.{_END_TEXT}")
        mine = [name for name, _, _ in self.spec]
        theirs = list(other.values)
        missing = [n for n in mine if n not in other.values]
        extra = [n for n in theirs if n not in mine]
        if missing or extra:
            _mismatch("named arguments", missing, extra)
        for name, kind, spec in self.spec:
            value = other.values[name]
            if kind == inspect.Parameter.VAR_KEYWORD and spec[0] == "D" and \
                    isinstance(value, dict):
                # **kwargs' entries are named arguments, named by their keys (PopTorch's)
                keys = [k for k, _ in spec[2]]
                missing = [k for k in keys if k not in value]
                extra = [k for k in value if k not in keys]
                if missing or extra:
                    _mismatch("named arguments", missing, extra)
                for k, sub in spec[2]:
                    _conform(str(k), sub, value[k], meta, out)
                continue
            _conform(name, spec, value, meta, out)
        return out

    def forget_values(self):
        """Keeps only what conform() needs (dtypes and shapes), not the tensors."""
        self.meta = [(t.dtype, t.shape) for t in self.leaves]
        self.values = None
        self.leaves = []



_END_TEXT = ("\nThe inputs of this call do not match those the model was compiled for: call "
             "destroy() on the model (or make a new inferenceModel / trainingModel) to "
             "compile it for these.")


def _mismatch(name, missing, extra):
    details = []
    if extra:
        details.append("Unexpected arguments: " + ", ".join(sorted(map(str, extra))))
    if missing:
        details.append("Missing arguments: " + ", ".join(sorted(map(str, missing))))
    raise Error(f"Keys mismatch for {name}: {'. '.join(details)}.{_END_TEXT}")


def _type_name(spec):
    return {"T": torch.Tensor, "S": spec[1] if len(spec) > 1 else None,
            "N": spec[1] if len(spec) > 1 else None,
            "D": spec[1] if len(spec) > 1 else None}.get(spec[0], None)


def _conform(name, spec, value, meta, out):
    """Walks value along the compiled spec, appending its tensors to out in the compiled
    order; Error at the first difference."""
    kind = spec[0]
    if kind == "T":
        if not isinstance(value, torch.Tensor):
            raise Error(f"Type mismatch for {name}: expected {torch.Tensor} but got "
                        f"{type(value)}.{_END_TEXT}")
        dtype, shape = next(meta)
        if value.dtype != dtype:
            raise Error(f"Data type mismatch for {name}: expected {dtype} but got "
                        f"{value.dtype}.{_END_TEXT}")
        if value.shape != shape:
            raise Error(f"Shape mismatch for {name}: expected {shape} but got "
                        f"{value.shape}.{_END_TEXT}")
        out.append(value)
        return
    if kind == "C":
        if isinstance(value, torch.Tensor) or type(value) is not type(spec[1]):
            raise Error(f"Type mismatch for {name}: expected {type(spec[1])} but got "
                        f"{type(value)}.{_END_TEXT}")
        try:
            same = bool(value == spec[1])
        except Exception:
            same = value is spec[1]
        if not same:
            raise Error(f"Value mismatch for {name}: expected {spec[1]} but got {value}."
                        f"{_END_TEXT}")
        return
    if kind == "X":
        if type(value) is not type(spec[2]):
            raise Error(f"Type mismatch for {name}: expected {type(spec[2])} but got "
                        f"{type(value)}.{_END_TEXT}")
        tensors = list(spec[1].yieldTensors(value))
        if len(tensors) != spec[3]:
            raise Error(f"Length mismatch for {name}: expected {spec[3]} tensors but got "
                        f"{len(tensors)}.{_END_TEXT}")
        for i, t in enumerate(tensors):
            _conform(f"{name}[{i}]", ("T",), t, meta, out)
        return
    if type(value) is not spec[1]:
        raise Error(f"Type mismatch for {name}: expected {spec[1]} but got {type(value)}."
                    f"{_END_TEXT}")
    if kind == "D":
        keys = [k for k, _ in spec[2]]
        missing = [k for k in keys if k not in value]
        extra = [k for k in value if k not in keys]
        if missing or extra:
            _mismatch(name, missing, extra)
        for k, sub in spec[2]:
            _conform(f"{name}[{k!r}]", sub, value[k], meta, out)
        return
    if len(value) != len(spec[2]):
        raise Error(f"Length mismatch for {name}: expected {len(spec[2])} elements but got "
                    f"{len(value)}.{_END_TEXT}")
    for i, (sub, v) in enumerate(zip(spec[2], value)):
        _conform(f"{name}[{i}]", sub, v, meta, out)


# ---- running without side effects ---------------------------------------------------------

def _state_slots(module):
    """[(owner module, kind, name, tensor)] of every parameter and buffer."""
    out = []
    for m in module.modules():
        for name, t in m._parameters.items():
            if t is not None:
                out.append((m, "_parameters", name, t))
        for name, t in m._buffers.items():
            if t is not None:
                out.append((m, "_buffers", name, t))
    return out


class Snapshot:
    """The parameters and buffers of a module as they were (see no_side_effects)."""

    def __init__(self, module):
        self.module = module
        self.saved = [(m, kind, name, t, t.detach().clone()) for m, kind, name, t in
                      _state_slots(module)]

    def changed(self):
        """{state_dict name: value before} of the parameters and buffers whose values
        changed (or whose tensor was replaced) since the snapshot."""
        names = {id(t): k for k, t in
                 torch.nn.Module.state_dict(self.module, keep_vars=True).items()}
        out = {}
        for m, kind, name, t, value in self.saved:
            now = getattr(m, kind).get(name)
            if now is not t or not torch.equal(t.detach().to(value.dtype), value):
                k = names.get(id(t)) or names.get(id(now))
                if k is not None:
                    out[k] = value
        return out


def fix_initializers(onnx_bytes, values):
    """onnx_bytes with the initializers named in values ({name: tensor}) set to those
    values: a capture traced in training mode runs the module once, and torch.onnx.export
    reads the weights after that run (BatchNorm's running statistics already updated)."""
    if not values:
        return onnx_bytes
    import onnx
    from onnx import numpy_helper
    model = onnx.load_from_string(onnx_bytes)
    hit = False
    for i, init in enumerate(model.graph.initializer):
        v = values.get(init.name)
        if v is not None:
            if init.data_type == onnx.TensorProto.FLOAT:
                v = v.float()
            model.graph.initializer[i].CopyFrom(
                numpy_helper.from_array(v.detach().cpu().numpy(), init.name))
            hit = True
    return model.SerializeToString() if hit else onnx_bytes


@contextlib.contextmanager
def no_side_effects(module):
    """Runs the body (given a Snapshot of module), then puts back every parameter and
    buffer of module (the same objects, with their values) and the RNG state as they
    were."""
    snap = Snapshot(module)
    saved = snap.saved
    rng = torch.random.get_rng_state()
    try:
        yield snap
    finally:
        with torch.no_grad():
            for m, kind, name, t, value in saved:
                getattr(m, kind)[name] = t
                if t.dtype != value.dtype or t.shape != value.shape:
                    t.data = value
                elif t.data_ptr() != value.data_ptr():
                    t.data.copy_(value)
        torch.random.set_rng_state(rng)


def buffer_versions(module):
    """{state_dict name: (tensor, copy of its value)} of module's buffers."""
    return {k: (t, t.detach().clone()) for k, t in
            torch.nn.Module.named_buffers(module) if t is not None}


def changed_buffers(module, before):
    """The names of buffers whose value changed since before (buffer_versions), except
    BatchNorm's running statistics and count, which the daemon updates itself. Values are
    compared, not version counters: instance_norm writes its running statistics back
    unchanged in eval mode."""
    keep = set()
    for name, m in module.named_modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            for b in ("running_mean", "running_var", "num_batches_tracked"):
                keep.add(f"{name}.{b}" if name else b)
    out = []
    for k, t in torch.nn.Module.named_buffers(module):
        if k in keep or k not in before or t is None:
            continue
        old, value = before[k]
        if t is not old or t.shape != value.shape or \
                not torch.equal(t.detach().to(value.dtype), value):
            out.append(k)
    return out


def type_float16(onnx_bytes, inputs, state, keep_float=(), stochastic=False,
                 partials_half=False):
    """onnx_bytes typed float16 where torch computes float16 (see _half.type_float16):
    returns (bytes, the outputs Cast to float that torch gives as float16)."""
    from . import _half
    return _half.type_float16(onnx_bytes, inputs, state, keep_float, stochastic,
                              partials_half)


WIDENED = (torch.float16, torch.bfloat16, torch.float64)


def widened(module):
    """True when module holds parameters or buffers of a floating type the daemon does not
    take (float16, bfloat16, float64): they are captured as float32 (as_float32)."""
    return any(t.dtype in WIDENED for _, _, _, t in _state_slots(module))


def as_float32(module):
    """Makes every float16/bfloat16/float64 parameter and buffer of module float32 in
    place (the same objects); only inside no_side_effects, which puts them back."""
    with torch.no_grad():
        for _, _, _, t in _state_slots(module):
            if t.dtype in WIDENED:
                t.data = t.data.float()


def widened_half(module, inputs):
    """True when module's floating state or a floating input is float16: its floating
    outputs are given back as float16."""
    return any(t.dtype == torch.float16 for _, _, _, t in _state_slots(module)) or \
        any(t.dtype == torch.float16 for t in inputs)


class Probe:
    """What one host run of a call shows: .out_spec (the output structure), .n_out (tensors
    returned), .mutated (indices of input leaves changed in place), .loss (index into the
    flat outputs of the loss identity_loss marked, n_out for a hidden one, or None),
    .hidden_loss (True when the loss is an extra output), .prints (the titles of the
    ipu_print_tensor outputs, after all others), .flat (the outputs).

    .buffers (set by the probe) names the module buffers forward() changes in place; their
    new values are the last graph outputs, each written back by a BufferUpdate node
    (add_buffer_updates).

    n_graph() is the number of graph outputs: returned, changed inputs, hidden loss,
    printed, changed buffers."""

    buffers = ()

    def n_graph(self):
        return self.n_out + len(self.mutated) + int(self.hidden_loss) + len(self.prints) + \
            len(self.buffers)


def _versions(tensors):
    return [t._version for t in tensors]


def run_flat(fn, call, tensors, record):
    """Calls fn (the module, or its original forward) with tensors in the places of
    call's leaves; returns the flat list of graph outputs: the module's tensors, then the
    inputs changed in place (record.mutated, found on the first run), then a hidden loss.
    record is a Probe, filled on the first run and followed on later ones."""
    args, kwargs = call.rebuild(tensors)
    before = _versions(tensors)
    prev = getattr(_state, "losses", None), getattr(_state, "prints", None)
    _state.losses, _state.prints = [], []
    try:
        out = fn(*args, **kwargs)
        losses, prints = _state.losses, _state.prints
    finally:
        _state.losses, _state.prints = prev
        blocks.forward_returned()
    leaves, names = [], []
    spec = flatten(out, "output", leaves, names)
    if not hasattr(record, "out_spec"):
        record.out_spec = spec
        record.n_out = len(leaves)
        record.flat = leaves
        record.mutated = [i for i, (b, a) in enumerate(zip(before, _versions(tensors)))
                          if a != b]
        record.loss, record.hidden_loss = None, False
        record.prints = [title for _, title in prints]
        if len(losses) > 1:
            raise Error(f"identity_loss was called {len(losses)} times in one call: a "
                        "model has one loss (add the terms and call it once)")
        if losses:
            shown, loss = losses[0]
            idx = next((i for i, t in enumerate(leaves) if t is shown), None)
            if loss is not None and idx is not None:
                record.loss = idx
            else:
                record.loss, record.hidden_loss = record.n_out + len(record.mutated), True
    elif len(leaves) != record.n_out:
        raise Error(f"the model returned {len(leaves)} tensors while capturing it, "
                    f"{record.n_out} the first time: its outputs must not depend on "
                    "anything but the shapes of its inputs")
    flat = list(leaves) + [tensors[i] for i in record.mutated]
    if record.hidden_loss:
        shown, loss = losses[0]
        flat.append(loss if loss is not None else shown.sum())
    if len(prints) != len(record.prints):
        raise Error("ipu_print_tensor was called a different number of times while "
                    "capturing the model")
    flat.extend(t for t, _ in prints)
    return flat


@contextlib.contextmanager
def flat_forward(module, call, record):
    """Within the body, module(*tensors) returns run_flat()'s tuple (what
    torch.onnx.export traces); module's own forward runs inside it."""
    had = "forward" in module.__dict__
    old = module.__dict__.get("forward")
    original = module.forward

    def forward(*tensors):
        flat = run_flat(original, call, list(tensors), record)
        return tuple(flat + [torch.nn.Module.get_buffer(module, k) for k in record.buffers])

    module.forward = forward
    try:
        yield
    finally:
        if had:
            module.forward = old
        else:
            del module.forward
