"""PopTorch's log lines for the optimizer a training model is given, in PopTorch's words,
describing what the package sends the daemon (optim.plan):

  DEBUG "Updating graph optimizer with SGD, defaultDampening=0 (const), ...,
         lossScaling=2, nesterov=0 (const), accumType=float32, ..., maxGradNorm=inf"
  DEBUG "Updating group 0 optimizer with SGD, learningRate=0.01, ... for (tensors
         affected [w, b])"
  WARN  "Ignoring unexpected optimizer attribute in SGD optimizer: ['lr']" (or "group N
         attribute"; DEBUG with Options.relaxOptimizerAttributesChecks())
  WARN  "Optimizer `X` subclassed from classes in poptorch.optim or torch.optim ..."
        (given: at trainingModel and setOptimizer)

The lines are written only when the description differs from the one last sent to the
same model (PopTorch's rule: an identical optimizer is not sent again). Hyper-parameters
are named as PopART names them ("default" prefix for the model-wide values), sorted, each
with " (const)" when the program declared it constant (VariableAttributes, or for torch's
optimizers PopTorch's rule: equal to torch's default). The accumulator types are those
the device keeps the state in (sim/exec/optim.c rounds float16 ones after every update).
Used by optim.plan: configured(optimizer, executor, names); by _optim_state.bind:
given(optimizer, executor)."""
import torch

from .. import _lib
from . import _kind as _optim_kind
from .._logging import logger

# PopTorch's names: (model-wide, per group), python attribute -> PopART name.
_GROUP = {"SGD": ("lr", "weight_decay", "momentum", "dampening", "velocity_scaling",
                  "nesterov"),
          "ADAM": ("lr", "weight_decay", "betas", "eps"),
          "ADAMW": ("lr", "weight_decay", "betas", "eps"),
          "RMSPROP": ("lr", "weight_decay", "alpha", "momentum", "eps"),
          "LAMB": ("lr", "weight_decay", "betas", "eps", "max_weight_norm")}
_POPART = {"lr": "learningRate", "weight_decay": "weightDecay", "momentum": "momentum",
           "dampening": "dampening", "velocity_scaling": "velocityScaling",
           "nesterov": "nesterov", "eps": "eps", "alpha": "alpha",
           "max_weight_norm": "maxWeightNorm"}
# Keys PopTorch never prefixes with "default" (not per-group in PopART).
_NO_DEFAULT = ("nesterov",)
_OPT_EXCLUDE = ("defaults", "state", "param_groups", "variable_attrs", "state_dict",
                "load_state_dict")


def _type_name(optimizer):
    return {_lib.OPTIMIZER_LAMB: "LAMB", _lib.OPTIMIZER_SGD: "SGD",
            _lib.OPTIMIZER_ADAMW: "ADAMW", _lib.OPTIMIZER_ADAM: "ADAM"}.get(
                _optim_kind.kind(optimizer), "RMSPROP")


def _fmt(v):
    """A number as C++'s ostream prints a float (6 significant digits)."""
    return "%g" % float(v)


def _dtype(t):
    return "float16" if t in (torch.float16, torch.half) else "float32"


def _is_const(optimizer, typ, name, value):
    """PopTorch's rule: the program's VariableAttributes mark, or for torch's optimizers
    constant when equal to torch's default (lr never; alpha, betas, nesterov always)."""
    va = getattr(optimizer, "variable_attrs", None)
    if va is not None:
        return va.isConstant(name)
    if name == "lr":
        return False
    if name in ("alpha", "betas", "nesterov"):
        return True
    default = {"weight_decay": 1e-2 if typ == "ADAMW" else 0.0, "momentum": 0.0,
               "velocity_scaling": 1.0, "dampening": 0.0, "eps": 1e-8,
               "max_weight_norm": 65500.0, "loss_scaling": 1.0}[name]
    return value == default


def combined(optimizer):
    """PopTorch's SGD1 (use_combined_accum=True) rather than SGD2 (separate)."""
    return bool(getattr(optimizer, "use_combined_accum", False))


def _params(optimizer, typ, src, is_default, als=False):
    """{PopART name: (value, const)} for one group (src: a param_groups entry, or the
    optimizer's defaults when is_default)."""
    out = {}
    for attr in _GROUP[typ]:
        if attr == "velocity_scaling" and not combined(optimizer):
            # Separate variant: PopTorch glues velocity scaling to loss scaling.
            v = float(getattr(optimizer, "loss_scaling", 1.0))
            const = _is_const(optimizer, typ, "loss_scaling", v)
        elif attr == "betas":
            b = src.get("betas", (0.9, 0.999))
            const = _is_const(optimizer, typ, "betas", b)
            for i, n in ((0, "beta1"), (1, "beta2")):
                out[("default" + n.capitalize()) if is_default else n] = (b[i], const)
            continue
        else:
            v = src.get(attr, 1.0 if attr == "velocity_scaling" else None)
            if v is None:
                v = {"max_weight_norm": 65500.0}.get(attr, 0.0)
            const = _is_const(optimizer, typ, attr, v)
        n = _POPART[attr]
        if is_default and attr not in _NO_DEFAULT:
            n = "default" + n[0].upper() + n[1:]
        out[n] = (float(v), const)
    if is_default:
        # automatic loss scaling changes it: never constant then (PopTorch's rule)
        ls = float(getattr(optimizer, "loss_scaling", 1.0))
        out["lossScaling"] = (ls, not als and _is_const(optimizer, typ, "loss_scaling", ls))
    return out


def _debug(optimizer, typ, params):
    s = typ
    for k in sorted(params):
        v, const = params[k]
        s += f", {k}={_fmt(v)}" + (" (const)" if const else "")
    return s


def describe(optimizer, names, als=False):
    """(graph line, [group lines]) describing optimizer; names: per group the weight names
    it trains; als: automatic loss scaling is on."""
    typ = _type_name(optimizer)
    first = getattr(optimizer, "velocity_accum_type", None) if typ == "SGD" else \
        getattr(optimizer, "first_order_momentum_accum_type", None)
    second = None if typ == "SGD" else \
        getattr(optimizer, "second_order_momentum_accum_type", None)
    mgn = getattr(optimizer, "max_grad_norm", None)
    tail = (f", accumType={_dtype(getattr(optimizer, 'accum_type', None))}"
            f", firstOrderMomentumAccumType={_dtype(first)}"
            f", secondOrderMomentumAccumType={_dtype(second)}"
            f", useTfVariant={int(bool(getattr(optimizer, 'use_tf_variant', False)))}"
            f", maxGradNorm={_fmt(float('inf') if mgn is None else mgn)}")
    graph = "graph optimizer with " + \
        _debug(optimizer, typ, _params(optimizer, typ, optimizer.defaults, True, als)) + tail
    groups = []
    for i, g in enumerate(optimizer.param_groups):
        groups.append(f"group {i} optimizer with " +
                      _debug(optimizer, typ, _params(optimizer, typ, g, False)) + tail +
                      f" for (tensors affected [{', '.join(names[i])}])")
    return graph, groups


class _Tracker:
    """PopTorch's OptimizerAttrTracker: the attributes an optimizer had when the model
    first took one are expected; any added later is reported once."""

    def __init__(self, relaxed):
        self.log = logger.debug if relaxed else logger.warning
        self.group_attrs, self.opt_attrs = [], []
        self.recording = True
        self.printed = set()

    def check(self, expected, provided, what, typ):
        extra = [a for a in provided if a not in expected]
        if self.recording:
            expected += extra
        elif extra:
            msg = f"Ignoring unexpected {what} in {typ} optimizer: {extra}"
            if msg not in self.printed:
                self.printed.add(msg)
                self.log(msg)


def given(optimizer, executor):
    """At trainingModel / setOptimizer: PopTorch's warning for an optimizer class derived
    from poptorch.optim's or torch.optim's (its Python step() never runs), once per model
    and optimizer."""
    if optimizer is None or executor.__dict__.get("_ipuof_warned_opt") is optimizer:
        return
    executor.__dict__["_ipuof_warned_opt"] = optimizer
    bases = type(optimizer).__bases__
    if torch.optim.Optimizer not in bases and not any(_optim_kind.is_base(b) for b in bases):
        logger.warning("Optimizer `%s` subclassed from classes in poptorch.optim or "
                       "torch.optim are unlikely to behave as intended. Poptorch does not "
                       "run Python optimizer code directly; but instead uses IPU native "
                       "optimisers implemented in PopART.", type(optimizer).__name__)


def configured(optimizer, executor, names):
    """Logs what the model is about to be given: called by optim.plan for each
    optimizer sent to the daemon (names: per parameter group, its weights' names)."""
    if optimizer is None:
        return
    d = executor.__dict__
    tracker = d.get("_ipuof_attr_tracker")
    if tracker is None:
        opts = getattr(executor, "_options", None)
        relaxed = bool(getattr(opts, "__dict__", {}).get("_relax_optimizer_checks", False))
        tracker = d["_ipuof_attr_tracker"] = _Tracker(relaxed)
    typ = {"ADAM": "ADAM", "ADAMW": "ADAMW"}.get(_type_name(optimizer),
                                                 _type_name(optimizer))
    tracker.check(tracker.group_attrs, list(optimizer.defaults.keys()),
                  "default group variable", typ)
    tracker.check(tracker.opt_attrs,
                  [k for k in optimizer.__dict__ if k not in _OPT_EXCLUDE and
                   not k.startswith("_ipuof")], "optimizer attribute", typ)
    for i, g in enumerate(optimizer.param_groups):
        tracker.check(tracker.group_attrs, [k for k in g if k != "params"],
                      f"group {i} attribute", typ)
    tracker.recording = False
    graph, groups = describe(optimizer, names, _optim_kind.auto_loss_scaling(executor))
    if d.get("_ipuof_opt_described") == (graph, groups):
        return
    d["_ipuof_opt_described"] = (graph, groups)
    logger.debug("Updating %s", graph)
    for line in groups:
        logger.debug("Updating %s", line)
