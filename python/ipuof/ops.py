"""poptorch's ops (PopTorch's python/ops.py names), as the simulated IPUs can honour them.

Honoured: ipu_print_tensor (the value comes back with the run as a hidden output and is
printed on the host after it), serializedMatMul (the product; how it is split is a memory
plan of real IPUs, the numbers are the same), for_loop (unrolled at capture: the same
values as the on-device loop), cond (a constant condition takes its branch, a tensor one
computes both and selects with Where, as the daemon does for an ONNX If on data), nop,
NameScope, recomputationCheckpoint (its tensors are kept for the backward pass and the
segments between checkpoints are recomputed there, as the recomputation mode says:
docs/memory.md), set_available_memory (bounds the temporary memory of the convolution or
matmul producing the tensor; docs/memory.md).
Accepted with a one-time warning (no meaning on ipuofd's IPUs yet): MultiConv.
Refused with a sentence: custom_op (no Poplar codelets to run), CPU.
"""
import threading
import warnings

import torch

from . import _recompute, enums
from .errors import Error

_warned = set()
_lock = threading.Lock()


def _warn_once(name, why):
    with _lock:
        if name in _warned:
            return
        _warned.add(name)
    warnings.warn(f"poptorch.{name}: {why}; accepted and ignored (warned once)",
                  stacklevel=3)


def ipu_print_tensor(tensor, title="", print_gradient=True, summarise_threshold=1000,
                     edge_items=3, max_line_width=80, digits=4, float_format="auto",
                     separator=", ", open_bracket="(", close_bracket=")"):
    """Returns tensor; its value is printed on the host ("title: value") after every run
    of the model (each micro-batch of the run, as the device computed it). Gradients are
    not printed (print_gradient has no effect here)."""
    if not isinstance(tensor, torch.Tensor):
        raise Error(f"ipu_print_tensor takes a tensor, not a {type(tensor).__name__}")
    from . import capture
    capture.record_print(tensor, title)
    return tensor


def nop(tensor):
    """An identity op (PopTorch uses it to keep a value from being optimised away)."""
    return tensor


def set_available_memory(tensor, available_memory_proportion):
    """Returns tensor. The proportion is checked (0..1) and otherwise has no effect: the
    simulator has no PopLibs planner to give it to."""
    if not isinstance(tensor, torch.Tensor):
        raise Error("You may only set available memory for torch.tensor values. "
                    f"{type(tensor)} is not supported.")
    p = float(available_memory_proportion)
    if not 0.0 < p <= 1.0:
        raise Error(f"set_available_memory: the proportion must be in (0, 1], not {p}")
    return _recompute.mark(tensor, _recompute.AVAILABLE_MEMORY, p)


def recomputationCheckpoint(*tensors):
    """Returns its tensors as given (one tensor, a list, or a tuple), each marked as a
    checkpoint: kept from the forward to the backward pass, where the operations after
    it (up to the next checkpoint) are recomputed when recomputation is on."""
    for t in tensors:
        for x in (t if isinstance(t, (list, tuple)) else [t]):
            if not isinstance(x, torch.Tensor):
                raise Error("recomputationCheckpoint takes tensors (or lists of tensors), "
                            f"not a {type(x).__name__}")
    marked = [[_recompute.mark(x, _recompute.CHECKPOINT) for x in t]
              if isinstance(t, (list, tuple)) else _recompute.mark(t, _recompute.CHECKPOINT)
              for t in tensors]
    if len(marked) == 1:
        return marked[0]
    return tuple(marked)


def serializedMatMul(lhs, rhs, mode, factor=0, keep_precision=False):
    """lhs @ rhs. The split into smaller products is a memory plan of real IPUs; the
    numbers are those of one product (keep_precision: float32 partials, as here)."""
    if not isinstance(keep_precision, bool):
        raise Error("serializedMatMul: keep_precision must be a bool")
    if not isinstance(factor, int) or factor < 0:
        raise Error("serializedMatMul: factor must be an integer >= 0")
    if not isinstance(mode, enums.MatMulSerializationMode):
        raise Error("serializedMatMul: mode must be a poptorch.MatMulSerializationMode")
    return torch.matmul(lhs, rhs)


def for_loop(count, body, inputs):
    """Runs body count times, each time on the previous outputs (PopTorch's on-device
    loop, unrolled into the graph at capture); returns the last outputs as a list."""
    if not isinstance(inputs, list):
        raise ValueError("poptorch.for_loop expects input tensors (inputs) to be a list of "
                         "tensors. (Object is not list)")
    for i, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            raise ValueError("poptorch.for_loop expects input tensors (inputs) to be a list "
                             f"of tensors. (Object contained in list at index {i} is not "
                             "torch.tensor)")
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"poptorch.for_loop: count must be an integer >= 0, not {count!r}")
    outs = [t.clone() for t in inputs]
    for _ in range(count):
        res = body(*outs)
        res = list(res) if isinstance(res, (list, tuple)) else [res]
        if len(res) != len(outs):
            raise Error(f"poptorch.for_loop: the body takes {len(outs)} tensors and returned "
                        f"{len(res)}; it must return as many as it takes")
        outs = res
    return outs


def _branch_outputs(which, body, inputs):
    if not isinstance(inputs, list):
        raise ValueError(f"poptorch.cond expects {which}_inputs to be a list of tensors "
                         f"(not a {type(inputs).__name__})")
    res = body(*inputs)
    res = list(res) if isinstance(res, (list, tuple)) else [res]
    for i, t in enumerate(res):
        if not isinstance(t, torch.Tensor):
            raise Error(f"poptorch.cond: output {i} of {which}_body is a "
                        f"{type(t).__name__}; the branches must return tensors")
    return res


def cond(condition, then_body, then_inputs, else_body, else_inputs):
    """then_body(*then_inputs) if condition else else_body(*else_inputs), as a list.

    A Python bool (or a one-element tensor known when the model is captured as a constant)
    takes its branch. A tensor condition computes both branches and selects each output
    with torch.where, which the capture exports as ONNX Where: the same values and gradients
    as the branch taken (the other branch's gradient is zero), at the cost of running both
    branches every time; the daemon does the same with an ONNX If whose condition is data.
    The branches must return as many tensors, of equal shapes and dtypes."""
    if isinstance(condition, torch.Tensor):
        if condition.numel() != 1:
            raise ValueError(f"poptorch.cond: the condition must hold one value, not "
                             f"{condition.numel()} (shape {tuple(condition.shape)})")
    elif isinstance(condition, (bool, int)):
        if condition:
            return _branch_outputs("then", then_body, then_inputs)
        return _branch_outputs("else", else_body, else_inputs)
    else:
        raise ValueError(f"poptorch.cond: the condition must be a tensor or a bool, not a "
                         f"{type(condition).__name__}")
    outs_t = _branch_outputs("then", then_body, then_inputs)
    outs_e = _branch_outputs("else", else_body, else_inputs)
    if len(outs_t) != len(outs_e):
        raise Error(f"poptorch.cond: then_body returns {len(outs_t)} tensors and else_body "
                    f"{len(outs_e)}; they must return as many")
    c = condition.reshape(()).to(torch.bool)
    res = []
    for i, (t, e) in enumerate(zip(outs_t, outs_e)):
        if t.shape != e.shape or t.dtype != e.dtype:
            raise Error(f"poptorch.cond: output {i} is {tuple(t.shape)} {t.dtype} in "
                        f"then_body and {tuple(e.shape)} {e.dtype} in else_body; both "
                        "branches must give equal shapes and dtypes")
        res.append(torch.where(c, t, e))
    return res


def custom_op(inputs, name, domain, domain_version, example_outputs, attributes=None):
    raise Error(f"poptorch.custom_op ({domain}::{name}) cannot run on ipuofd: custom ops are "
                "Poplar codelets, and the simulated IPUs run only the ONNX ops they know")


class CPU:
    """PopTorch's host callback: not available on ipuofd yet."""

    def __init__(self, layer_to_call, ID):
        raise Error("poptorch.CPU (host callbacks inside a model) is not supported by "
                    "ipuofd yet")


class NameScope:
    """Names the ops made inside it (PopTorch). A context that changes nothing here: the
    exporter names nodes after the module path."""

    def __init__(self, name):
        if not isinstance(name, str):
            raise Error("NameScope takes a string")
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class MultiConv:
    """PopTorch's grouping of convolutions planned together: the convolutions run as
    written; the per-convolution planning options are checked and have no effect."""

    def availableMemoryProportions(self, value):
        return self

    def partialsTypes(self, value):
        return self

    def enableConvDithering(self, value):
        return self

    def planType(self, value):
        enums.MultiConvPlanType(value)
        return self

    def perConvReservedTiles(self, value):
        return self

    def cycleBackOff(self, value):
        return self

    def __enter__(self):
        _warn_once("MultiConv", "the simulated IPUs plan each convolution alone")
        return self

    def __exit__(self, *exc):
        return False
