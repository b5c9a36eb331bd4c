"""What the optimizer code reads of an optimizer and an executor without the classes of
optim/__init__.py: its kind (IPUOF_OPTIMIZER_*), whether it is one of poptorch.optim's, the key of
its settings, the executor's weight names and automatic loss scaling. Below optim/__init__.py,
optim/_state.py and optim/_log.py, so they need not import one another in a circle
(tools/py_cycles.py). poptorch.optim's classes say what they are with class attributes:
`_ipuof_kind` (LAMB: torch has no class of its own for it) and `_ipuof_optimizer_base` on
the base class itself."""
import torch

from .. import _lib
from ..errors import Error


def kind(optimizer):
    """The optimizer's IPUOF_OPTIMIZER_*: LAMB by its class attribute, the others by
    torch.optim's classes (a torch.optim optimizer runs as poptorch.optim's does)."""
    k = getattr(type(optimizer), "_ipuof_kind", None)
    if k is not None:
        return k
    if isinstance(optimizer, torch.optim.SGD):
        return _lib.OPTIMIZER_SGD
    if isinstance(optimizer, torch.optim.AdamW):
        return _lib.OPTIMIZER_ADAMW
    if isinstance(optimizer, torch.optim.Adam):
        return _lib.OPTIMIZER_ADAM
    if isinstance(optimizer, torch.optim.RMSprop):
        return _lib.OPTIMIZER_RMSPROP
    raise Error(f"the optimizer {type(optimizer).__name__} is not one ipuofd runs: use "
                "poptorch.optim's (or torch.optim's) SGD, Adam, AdamW, RMSprop, or "
                "poptorch.optim.LAMB / LAMBNoBias")


def is_poptorch(optimizer):
    """Whether the optimizer is one of poptorch.optim's (derives from its Optimizer)."""
    return any("_ipuof_optimizer_base" in c.__dict__ for c in type(optimizer).__mro__)


def is_base(cls):
    """Whether cls is poptorch.optim.Optimizer itself."""
    return "_ipuof_optimizer_base" in cls.__dict__


def names(executor):
    """id(parameter) -> its weight name, for the executor's module."""
    out = {}
    for name, t in executor._weights.items():
        out.setdefault(id(t), name)
    return out


def auto_loss_scaling(executor):
    """Whether the executor's options enable automatic loss scaling
    (Options.Training.setAutomaticLossScaling(True))."""
    opts = getattr(executor, "_options", None)
    return bool(opts is not None and
                opts.Training.__dict__.get("_auto_loss_scaling", False))


def base_key(optimizer):
    """Everything optim.plan reads from param_groups and the optimizer's settings."""
    groups = tuple(tuple(sorted((k, repr(v) if k != "params" else tuple(id(p) for p in v))
                                for k, v in g.items()))
                   for g in optimizer.param_groups)
    extra = tuple(repr(getattr(optimizer, k, None))
                  for k in ("loss_scaling", "velocity_scaling", "max_grad_norm",
                            "bias_correction", "use_tf_variant", "use_combined_accum",
                            "accum_type", "velocity_accum_type",
                            "first_order_momentum_accum_type",
                            "second_order_momentum_accum_type"))
    return (type(optimizer), groups, extra)
