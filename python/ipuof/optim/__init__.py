"""poptorch.optim: PopTorch's SGD, Adam, AdamW, RMSprop, LAMB and LAMBNoBias, with their
extra arguments, run by the daemon's optimizers (sim/exec/optim.c) for a training model.

Every argument PopTorch's optimizers take is honoured or, where it only chooses a precision,
accepted: loss_scaling and velocity_scaling are checked and cancel in float32 arithmetic
(as they do on an IPU in float32); accum_type and the *_accum_type arguments take
torch.float32 or torch.float16, and on the device float16 keeps that state rounded to
float16 after every step, stored scaled by loss_scaling (the gradient) or velocity_scaling
(SGD's velocity) as the IPU stores it (sim/exec/optim.c; step() on the host stays float32);
use_combined_accum=True keeps velocity_scaling per group (PopTorch's combined SGD), False
scales the velocity by loss_scaling.
max_grad_norm clips by the global gradient norm (torch.nn.utils.clip_grad_norm_),
bias_correction=False drops Adam's and LAMB's corrections, max_weight_norm clips LAMB's
weight norm, use_tf_variant is TensorFlow's RMSprop. Parameter groups keep their own
hyper-parameters on the device.

torch.optim's SGD, Adam, AdamW and RMSprop given to trainingModel map to the same device
optimizers. Bound to a training model, an optimizer's state_dict() reads the state from the
device (torch's "state" entries, plus PopTorch's "ipu_state" and "ipu_param" views) and
load_state_dict() writes it there, so a run resumes where the saved one stopped.

Used by the executor: plan (the optimizer of a compile and of setOptimizer, set on the
library's options handle), half_settings, key, bind, attached, pull.
"""
import math
import warnings

import torch

from .. import _lib
from . import _log as _optim_log
from .._logging import logger
from ._kind import auto_loss_scaling, base_key as _base_key, kind as _kind
from ._kind import names as _names
# The state (state_dict, load_state_dict, what the executor calls) is optim/_state.py's;
# it and this module share optim/_kind.py's helpers, and it imports none of the classes.
from ._state import _load_state_dict, _state_dict, attached, bind, overrides, pull
from ..errors import Error


# ---- the classes -----------------------------------------------------------------------

_ACCUM = ("accum_type", "velocity_accum_type", "first_order_momentum_accum_type",
          "second_order_momentum_accum_type")
_warned = set()


def _warn_once(key, msg):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(msg, stacklevel=4)


class VariableAttributes:
    """Which hyper-parameters of a poptorch optimizer are variable (may change between runs
    without recompiling) and which are constant: PopTorch's optimizer.variable_attrs. Those
    the program gave explicitly start variable. On ipuofd every hyper-parameter can change
    between runs (setOptimizer), so the marks are kept and checked, and change nothing."""

    def __init__(self, variable_attributes, allowed_attributes):
        self._variable_attributes = list(variable_attributes)
        self._allowed_attributes = list(allowed_attributes)

    def isConstant(self, attr):
        return attr not in self._variable_attributes

    def _check(self, attr):
        if attr not in self._allowed_attributes:
            raise ValueError(f"Unknown attribute {attr}, allowed values: "
                             f"{self._allowed_attributes}")

    def markAsConstant(self, attr):
        self._check(attr)
        self._variable_attributes = [a for a in self._variable_attributes if a != attr]

    def markAsVariable(self, attr):
        self._check(attr)
        if attr not in self._variable_attributes:
            self._variable_attributes.append(attr)


class Optimizer:
    """The base of poptorch.optim's optimizers (PopTorch's poptorch.optim.Optimizer): its
    state_dict() holds PopTorch's "ipu_state" and "ipu_param" views (None before the
    training model is compiled), and load_state_dict() takes only such an IPU state."""

    _ipuof_optimizer_base = True   # _optim_kind.is_poptorch / is_base

    def state_dict(self):
        return _state_dict(self)

    def load_state_dict(self, state_dict):
        return _load_state_dict(self, state_dict)


def _extras(opt, name, kwargs, defaults):
    """Pops PopTorch's extra arguments (defaults: name -> default) from kwargs onto opt as
    attributes; the accumulator types must be float32 or float16. Returns the names given
    explicitly."""
    given = []
    for k, default in defaults.items():
        v = kwargs.pop(k, None)
        if v is not None:
            given.append(k)
        if k in _ACCUM:
            if v not in (None, torch.float32, torch.float16, torch.half):
                raise ValueError(f"poptorch.optim.{name}: {k} must be torch.float32 or "
                                 f"torch.float16, not {v}")
            v = torch.float32 if v is None else v
        elif v is None:
            v = default
        if k == "max_grad_norm" and v is not None and not (v > 0):
            raise ValueError(f"poptorch.optim.{name}: max_grad_norm must be > 0 (or None or "
                             f"inf for no clipping), not {v}")
        if k in ("loss_scaling", "velocity_scaling") and not (v > 0 and math.isfinite(v)):
            raise ValueError(f"poptorch.optim.{name}: {k} must be > 0 and finite, not {v}")
        setattr(opt, k, v)
    return given


def _attach_attrs(opt, given, extra):
    """Gives optimizer opt its variable_attrs: given (the arguments passed explicitly) are
    variable; the allowed ones are its defaults' keys plus extra."""
    allowed = [k for k in opt.defaults if k not in ("foreach", "maximize", "capturable",
                                                    "differentiable", "fused")] + extra
    opt.variable_attrs = VariableAttributes([k for k in given if k in allowed], allowed)


def _clip(opt):
    """torch.nn.utils.clip_grad_norm_ over every parameter of opt, when it has a
    max_grad_norm."""
    m = getattr(opt, "max_grad_norm", None)
    if m is None or math.isinf(m):
        return
    params = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
    if params:
        torch.nn.utils.clip_grad_norm_(params, m)


def _closure(closure):
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


class SGD(Optimizer, torch.optim.SGD):
    """torch.optim.SGD with PopTorch's extra arguments; velocity_scaling and loss_scaling
    cancel in float32, use_combined_accum changes no number."""

    _EXTRA = {"loss_scaling": 1.0, "velocity_scaling": 1.0, "use_combined_accum": None,
              "accum_type": None, "velocity_accum_type": None, "max_grad_norm": None}

    def __init__(self, params, lr=0.01, *args, **kwargs):
        given = ["lr"] + [k for k in kwargs if k not in self._EXTRA]
        if kwargs.get("velocity_scaling") is not None and \
                not kwargs.get("use_combined_accum"):
            logger.warning("velocity_scaling value ignored when using the separate variant "
                           "(use_combined_accum=False): its velocity is scaled by "
                           "loss_scaling, as PopTorch's")
        given += _extras(self, "SGD", kwargs, self._EXTRA)
        super().__init__(params, lr, *args, **kwargs)
        self.use_combined_accum = bool(self.use_combined_accum)
        if self.use_combined_accum:
            # PopTorch: velocity scaling is per group in the combined variant only; the
            # separate one glues it to loss_scaling.
            self.defaults["velocity_scaling"] = self.velocity_scaling
            for g in self.param_groups:
                g.setdefault("velocity_scaling", self.velocity_scaling)
        _attach_attrs(self, given, ["loss_scaling"])

    @torch.no_grad()
    def step(self, closure=None):
        loss = _closure(closure)
        _clip(self)
        super().step()
        return loss


_ADAM_EXTRA = {"loss_scaling": 1.0, "accum_type": None,
               "first_order_momentum_accum_type": None,
               "second_order_momentum_accum_type": None, "max_grad_norm": None,
               "bias_correction": True}


def _adam_step(opt, decoupled):
    """Adam / AdamW without bias correction (PopTorch's bias_correction=False):
    m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, p -= lr m / (sqrt(v) + eps), with the
    weight decay added to g (Adam) or applied as p *= 1 - lr wd first (AdamW)."""
    for group in opt.param_groups:
        b1, b2 = group["betas"]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = p.grad
            st = opt.state[p]
            if not st:
                st["step"] = torch.tensor(0.0)
                st["exp_avg"] = torch.zeros_like(p)
                st["exp_avg_sq"] = torch.zeros_like(p)
            st["step"] += 1
            if decoupled:
                p.mul_(1 - group["lr"] * group["weight_decay"])
            elif group["weight_decay"]:
                g = g.add(p, alpha=group["weight_decay"])
            st["exp_avg"].mul_(b1).add_(g, alpha=1 - b1)
            st["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
            p.sub_(group["lr"] * st["exp_avg"] / (st["exp_avg_sq"].sqrt() + group["eps"]))


class Adam(Optimizer, torch.optim.Adam):
    def __init__(self, params, *args, **kwargs):
        given = [k for k in kwargs if k not in _ADAM_EXTRA]
        given += _extras(self, "Adam", kwargs, _ADAM_EXTRA)
        super().__init__(params, *args, **kwargs)
        _attach_attrs(self, given, ["loss_scaling"])

    @torch.no_grad()
    def step(self, closure=None):
        loss = _closure(closure)
        _clip(self)
        if self.bias_correction:
            super().step()
        else:
            _adam_step(self, False)
        return loss


class AdamW(Optimizer, torch.optim.AdamW):
    def __init__(self, params, *args, **kwargs):
        given = [k for k in kwargs if k not in _ADAM_EXTRA]
        given += _extras(self, "AdamW", kwargs, _ADAM_EXTRA)
        super().__init__(params, *args, **kwargs)
        _attach_attrs(self, given, ["loss_scaling"])

    @torch.no_grad()
    def step(self, closure=None):
        loss = _closure(closure)
        _clip(self)
        if self.bias_correction:
            super().step()
        else:
            _adam_step(self, True)
        return loss


class RMSprop(Optimizer, torch.optim.RMSprop):
    """torch.optim.RMSprop with PopTorch's extra arguments. use_tf_variant=True is
    TensorFlow's RMSprop (tf.raw_ops.ApplyRMSProp / ApplyCenteredRMSProp): eps inside the
    square root and the learning rate inside the momentum; the state starts at zero."""

    _EXTRA = {"loss_scaling": 1.0, "accum_type": None,
              "first_order_momentum_accum_type": None,
              "second_order_momentum_accum_type": None, "use_tf_variant": False,
              "max_grad_norm": None}

    def __init__(self, params, lr=0.01, alpha=None, eps=None, weight_decay=None,
                 momentum=None, centered=None, **kwargs):
        named = dict(alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                     centered=centered)
        # PopTorch's rule: the hyper-parameters given explicitly are variable.
        given = ["lr"] + [k for k, v in named.items() if v is not None] + \
            [k for k in kwargs if k not in self._EXTRA]
        alpha = 0.99 if alpha is None else alpha
        eps = 1e-8 if eps is None else eps
        weight_decay = 0 if weight_decay is None else weight_decay
        momentum = 0 if momentum is None else momentum
        centered = False if centered is None else centered
        given += _extras(self, "RMSprop", kwargs, self._EXTRA)
        self.use_tf_variant = bool(self.use_tf_variant)
        super().__init__(params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                         momentum=momentum, centered=centered, **kwargs)
        _attach_attrs(self, given, ["loss_scaling"])

    @torch.no_grad()
    def step(self, closure=None):
        loss = _closure(closure)
        _clip(self)
        if not self.use_tf_variant:
            super().step()
            return loss
        for group in self.param_groups:
            a, mu = group["alpha"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                if group["weight_decay"]:
                    g = g.add(p, alpha=group["weight_decay"])
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["square_avg"] = torch.zeros_like(p)
                    if mu > 0:
                        st["momentum_buffer"] = torch.zeros_like(p)
                    if group["centered"]:
                        st["grad_avg"] = torch.zeros_like(p)
                st["step"] += 1
                st["square_avg"].mul_(a).addcmul_(g, g, value=1 - a)
                var = st["square_avg"]
                if group["centered"]:
                    st["grad_avg"].mul_(a).add_(g, alpha=1 - a)
                    var = var - st["grad_avg"] * st["grad_avg"]
                upd = group["lr"] * g / (var + group["eps"]).sqrt()
                if mu > 0:
                    st["momentum_buffer"].mul_(mu).add_(upd)
                    upd = st["momentum_buffer"]
                p.sub_(upd)
        return loss


class LAMB(Optimizer, torch.optim.Optimizer):
    _ipuof_kind = _lib.OPTIMIZER_LAMB   # _optim_kind.kind: torch has no LAMB class

    """PopTorch's LAMB (You et al., "Large Batch Optimization for Deep Learning", 2019),
    biased unless bias_correction: per weight w with gradient g at step t,
        m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2
        u = (m / c1) / (sqrt(v / c2) + eps) + weight_decay w   (c = 1 - b^t, or 1)
        r1 = min(|w|, max_weight_norm),  r2 = |u|
        w -= lr * (r1 / r2 if r1 > 0 and r2 > 0 else 1) * u
    A training model runs it on the device (sim/exec/optim.c); step() is the same on the host."""

    def __init__(self, params, lr=None, betas=None, eps=None, weight_decay=None,
                 bias_correction=None, loss_scaling=None, max_weight_norm=None,
                 accum_type=None, first_order_momentum_accum_type=None,
                 second_order_momentum_accum_type=None, max_grad_norm=None):
        defaults = dict(lr=1e-3 if lr is None else lr,
                        betas=(0.9, 0.999) if betas is None else tuple(betas),
                        eps=1e-8 if eps is None else eps,
                        weight_decay=1e-2 if weight_decay is None else weight_decay,
                        # PopTorch's default: float16's largest value
                        max_weight_norm=65500.0 if max_weight_norm is None
                        else max_weight_norm)
        super().__init__(params, defaults)
        kw = dict(loss_scaling=loss_scaling, accum_type=accum_type,
                  first_order_momentum_accum_type=first_order_momentum_accum_type,
                  second_order_momentum_accum_type=second_order_momentum_accum_type,
                  max_grad_norm=max_grad_norm)
        given = [k for k, v in (("lr", lr), ("betas", betas), ("eps", eps),
                                ("weight_decay", weight_decay),
                                ("max_weight_norm", max_weight_norm)) if v is not None]
        given += _extras(self, type(self).__name__, kw,
                         {k: (1.0 if k == "loss_scaling" else None) for k in kw})
        self.bias_correction = True if bias_correction is None else bool(bias_correction)
        self.max_weight_norm = defaults["max_weight_norm"]
        _attach_attrs(self, given, ["loss_scaling"])

    @torch.no_grad()
    def step(self, closure=None):
        loss = _closure(closure)
        _clip(self)
        for group in self.param_groups:
            b1, b2 = group["betas"]
            mwn = group.get("max_weight_norm")
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                st["step"] += 1
                m, v = st["exp_avg"], st["exp_avg_sq"]
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                c1 = 1 - b1 ** st["step"] if self.bias_correction else 1.0
                c2 = 1 - b2 ** st["step"] if self.bias_correction else 1.0
                u = (m / c1) / ((v / c2).sqrt() + group["eps"]) + \
                    group["weight_decay"] * p
                r1 = float(p.double().norm())
                if mwn is not None and r1 > mwn:
                    r1 = float(mwn)
                r2 = float(u.double().norm())
                trust = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
                p.sub_(group["lr"] * trust * u)
        return loss


class LAMBNoBias(LAMB):
    """LAMB without bias correction (PopTorch's LAMBNoBias)."""

    def __init__(self, params, *args, **kwargs):
        kwargs["bias_correction"] = False
        super().__init__(params, *args, **kwargs)


# ---- to the daemon ----------------------------------------------------------------------

# The hyper-parameters of one parameter group each kind has (IPUOF_OPT_PARAM_* without the
# prefix).
_GROUP_PARAMS = {
    "SGD": ("LR", "WEIGHT_DECAY", "MOMENTUM", "DAMPENING", "NESTEROV"),
    "ADAM": ("LR", "WEIGHT_DECAY", "BETA1", "BETA2", "EPS"),
    "RMSPROP": ("LR", "WEIGHT_DECAY", "MOMENTUM", "EPS", "ALPHA"),
}
_GROUP_PARAMS["ADAMW"] = _GROUP_PARAMS["LAMB"] = _GROUP_PARAMS["ADAM"]


def _kind_name(kind):
    return next(k for k in _GROUP_PARAMS if getattr(_lib, "OPTIMIZER_" + k) == kind)


def _hyper(g, kind):
    """Group g's hyper-parameters that optimizers of kind have: {PARAM: value}."""
    if g.get("maximize"):
        raise Error("optimizer maximize=True is not supported by ipuofd")
    if g.get("amsgrad"):
        raise Error("Adam/AdamW with amsgrad=True is not supported by ipuofd")
    have = _GROUP_PARAMS[_kind_name(kind)]
    out = {"LR": float(g["lr"]), "WEIGHT_DECAY": float(g.get("weight_decay", 0.0) or 0.0),
           "MOMENTUM": float(g.get("momentum", 0.0) or 0.0),
           "DAMPENING": float(g.get("dampening", 0.0) or 0.0),
           "NESTEROV": int(bool(g.get("nesterov", False)))}
    if "betas" in g:
        out["BETA1"], out["BETA2"] = (float(b) for b in g["betas"])
    if "eps" in g:
        out["EPS"] = float(g["eps"])
    if "alpha" in g:
        out["ALPHA"] = float(g["alpha"])
    return {k: v for k, v in out.items() if k in have}


def _same(groups, key, what):
    vals = {repr(g.get(key)) for g in groups}
    if len(vals) > 1:
        raise Error(f"optimizer parameter groups differ in {key} ({', '.join(sorted(vals))}); "
                    f"ipuofd takes one {what} for every group")


def _norm_limit(v):
    """0 (none) for None or inf, else v."""
    return 0.0 if v is None or math.isinf(v) else float(v)


def _initializers(executor):
    """The initializer names of the executor's captured graph (cached per graph)."""
    onnx_bytes = getattr(executor, "_onnx", None)
    if onnx_bytes is None:
        return None
    cached = executor.__dict__.get("_ipuof_inits")
    if cached is not None and cached[0] is onnx_bytes:
        return cached[1]
    import onnx
    names = {i.name for i in onnx.load_from_string(onnx_bytes).graph.initializer}
    executor.__dict__["_ipuof_inits"] = (onnx_bytes, names)
    return names


class Plan:
    """What the package sends the daemon for an optimizer: its kind (IPUOF_OPTIMIZER_*),
    the whole optimizer's and the first group's parameters ({PARAM: value}, PARAM an
    IPUOF_OPT_PARAM_* without the prefix) and the other groups' ([({PARAM: value},
    [weight names])]). apply() sets it on a compile options handle, for a compile and
    for setOptimizer (ipuof_model_set_optimizer_with)."""

    def __init__(self, kind, top, groups):
        self.kind, self.top, self.groups = kind, top, groups

    def apply(self, set_):
        """Sets the plan through set_(setter, *args) (_device._CompileOpts.set): the
        library's optimizer setters, one parameter at a time."""
        set_("set_optimizer_kind", self.kind)
        sgd = self.kind == _lib.OPTIMIZER_SGD
        for k, v in self.top.items():
            if k != "VELOCITY_SCALING" or sgd:  # SGD's only (the struct carries it for all)
                set_("set_optimizer_param", 0, getattr(_lib, "OPT_PARAM_" + k), v)
        for i, (params, names) in enumerate(self.groups, 1):
            set_("add_optimizer_group")
            for k, v in params.items():
                set_("set_optimizer_param", i, getattr(_lib, "OPT_PARAM_" + k), v)
            for n in names:
                set_("add_optimizer_weight", i, n.encode())



def _whole(optimizer, kind, groups):
    """The whole optimizer's parameters ({PARAM: value}) of optimizer (of kind)."""
    top = {}
    if kind == _lib.OPTIMIZER_RMSPROP:
        _same(groups, "centered", "centered")
        top["CENTERED"] = int(bool(groups[0].get("centered", False)))
        top["TF_VARIANT"] = int(bool(getattr(optimizer, "use_tf_variant", False)))
    if kind == _lib.OPTIMIZER_LAMB:
        _same(groups, "max_weight_norm", "max_weight_norm")
        top["MAX_WEIGHT_NORM"] = _norm_limit(groups[0].get("max_weight_norm"))
    if kind in (_lib.OPTIMIZER_ADAM, _lib.OPTIMIZER_ADAMW, _lib.OPTIMIZER_LAMB):
        top["BIAS_CORRECTION"] = int(bool(getattr(optimizer, "bias_correction", True)))
    top["MAX_GRAD_NORM"] = _norm_limit(getattr(optimizer, "max_grad_norm", None))
    top["LOSS_SCALING"] = float(getattr(optimizer, "loss_scaling", 1.0) or 1.0)
    # The separate SGD variant (PopTorch's default) scales its velocity by loss_scaling.
    top["VELOCITY_SCALING"] = float(groups[0].get("velocity_scaling", 1.0)) \
        if _optim_log.combined(optimizer) else top["LOSS_SCALING"]
    # PopTorch plans a velocity when momentum is variable (given explicitly, or marked), so
    # setOptimizer may raise it later; torch.optim's optimizers: when non-zero (above).
    va = getattr(optimizer, "variable_attrs", None)
    if kind in (_lib.OPTIMIZER_SGD, _lib.OPTIMIZER_RMSPROP) and va is not None and \
            "momentum" in va._allowed_attributes:
        top["PLAN_MOMENTUM"] = int(not va.isConstant("momentum"))
    return top


def plan(optimizer, executor):
    """The Plan of optimizer (None: SGD with lr 0.01, PopTorch's default), its groups'
    weights named as executor's graph names them."""
    if optimizer is None:
        return Plan(_lib.OPTIMIZER_SGD, {"LR": 0.01}, [])
    kind = _kind(optimizer)
    groups = optimizer.param_groups
    top = _hyper(groups[0], kind)
    top.update(_whole(optimizer, kind, groups))
    ids = _names(executor)
    known = _initializers(executor)

    def trained(g):
        return [ids[id(p)] for p in g["params"]
                if id(p) in ids and p.requires_grad and (known is None or ids[id(p)] in known)]
    _optim_log.configured(optimizer, executor, [trained(g) for g in groups])
    # ipu_param values loaded (load_state_dict) and still in force: each weight they change
    # gets a group of its own, its group's hyper-parameters with theirs.
    ls, over = overrides(optimizer, [(p, ids[id(p)]) for g in groups for p in g["params"]
                                     if ids.get(id(p)) in trained(g)])
    if ls is not None:
        top["LOSS_SCALING"] = ls
        if not _optim_log.combined(optimizer):
            top["VELOCITY_SCALING"] = ls
    listed = [(g, [n for n in trained(g) if n not in over]) for g in groups[1:]]
    for g in groups:
        listed += [(dict(g, **over[n]), [n]) for n in trained(g) if n in over]
    if len(listed) > 32:
        raise Error(f"the optimizer has {len(groups)} parameter groups"
                    + (f" and loaded ipu_param values give {len(over)} weights their "
                       "own hyper-parameters" if over else "")
                    + f": {len(listed) + 1} groups; ipuofd takes at most 33")
    return Plan(kind, top, [(_hyper(g, kind), names) for g, names in listed])


def half_settings(optimizer, executor):
    """The float16 parameters ({PARAM: value}, PARAM an IPUOF_OPT_PARAM_* without the prefix)
    of optimizer's accumulator dtypes and the executor's automatic loss scaling, or None when every accumulator is float32 and
    automatic loss scaling is off (the defaults). Automatic loss scaling counts every
    trained gradient on the device; PopART counts the float16 ones, so a model with float32
    trained parameters is refused rather than scaled from gradients PopART would not
    count."""
    half = (torch.float16, torch.half)
    flags = [False, False, False]
    if optimizer is not None:
        first = "velocity_accum_type" if isinstance(optimizer, torch.optim.SGD) else \
            "first_order_momentum_accum_type"
        flags = [getattr(optimizer, k, None) in half
                 for k in ("accum_type", first, "second_order_momentum_accum_type")]
    als = auto_loss_scaling(executor)
    if als:
        wide = [n for n, p in executor._user_model.named_parameters()
                if p.requires_grad and p.dtype != torch.float16]
        if wide:
            raise Error("Options.Training.setAutomaticLossScaling(True): ipuofd counts every "
                        "trained gradient as a float16 value, and PopART counts only the "
                        "float16 ones, so a model with trained parameters that are not "
                        f"float16 ({', '.join(wide[:4])}{', ...' if len(wide) > 4 else ''}) "
                        "is refused: make the model half (model.half()) or set "
                        "loss_scaling by hand")
    if not any(flags) and not als:
        return None
    # PopART's AutomaticLossScalingSettings defaults for the period, bin edge and threshold
    return {"ACCUM_FLOAT16": int(flags[0]), "FIRST_ORDER_FLOAT16": int(flags[1]),
            "SECOND_ORDER_FLOAT16": int(flags[2]), "AUTO_LOSS_SCALING": int(als),
            "ALS_UPDATE_PERIOD": 1, "ALS_BIN_EDGE": 0.125, "ALS_THRESHOLD": 1e-7}


def key(optimizer):
    """Everything plan reads, to see whether it changed between calls: _base_key and
    the count of ipu_param loads (load_state_dict)."""
    if optimizer is None:
        return None
    return _base_key(optimizer) + (optimizer.__dict__.get("_ipuof_param_gen", 0),)



__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "LAMB", "LAMBNoBias",
           "VariableAttributes", "plan", "key", "bind", "attached", "pull"]
