"""poptorch.optim: torch.optim's SGD, Adam and AdamW taking PopTorch's extra arguments.

The IPU-specific arguments that only change precision (loss scaling, velocity scaling,
accumulator types, ...) have no meaning on ipuofd's float32 simulator: non-default values
are accepted with a warning. Those that change the update (max_grad_norm,
bias_correction=False, max_weight_norm) are refused until the daemon's optimizers have
them.
"""
import warnings

import torch

from .errors import Error

_EXTRA = {"loss_scaling": 1.0, "velocity_scaling": 1.0, "use_combined_accum": None,
          "accum_type": None, "velocity_accum_type": None,
          "first_order_momentum_accum_type": None, "second_order_momentum_accum_type": None,
          "max_grad_norm": None, "bias_correction": True, "max_weight_norm": None}


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


def _attach_attrs(opt, given, extra):
    """Gives optimizer opt its variable_attrs: given (the arguments passed explicitly) are
    variable; the allowed ones are its defaults' keys plus extra."""
    allowed = [k for k in opt.defaults if k not in ("foreach", "maximize", "capturable",
                                                    "differentiable", "fused")] + extra
    opt.variable_attrs = VariableAttributes([k for k in given if k in allowed], allowed)
    for k in extra:
        if not hasattr(opt, k):
            setattr(opt, k, 1.0)


# Arguments that change the arithmetic of the update: ignoring them would train other
# weights than PopTorch does, so a value other than the default is refused, not warned.
_CHANGES_THE_UPDATE = ("max_grad_norm", "bias_correction", "max_weight_norm")


def _pop_extra(kwargs, name):
    for k, default in _EXTRA.items():
        if k in kwargs:
            v = kwargs.pop(k)
            if v is None or v == default or (k == "accum_type" and v == torch.float32):
                continue
            if k in _CHANGES_THE_UPDATE:
                raise Error(f"poptorch.optim.{name}: {k}={v!r} is not supported by ipuofd "
                            "yet: its optimizers (sim/optim.c) have no gradient clipping, "
                            "Adam without bias correction or weight-norm clipping, and "
                            "ignoring it would train other weights")
            warnings.warn(f"poptorch.optim.{name}: {k}={v!r} has no effect on ipuofd (its "
                          "arithmetic is float32 throughout)", stacklevel=3)


class SGD(torch.optim.SGD):
    def __init__(self, params, lr=0.01, *args, **kwargs):
        given = ["lr"] + list(kwargs)
        _pop_extra(kwargs, "SGD")
        super().__init__(params, lr, *args, **kwargs)
        _attach_attrs(self, given, ["loss_scaling", "velocity_scaling"])


class Adam(torch.optim.Adam):
    def __init__(self, params, *args, **kwargs):
        given = list(kwargs)
        _pop_extra(kwargs, "Adam")
        super().__init__(params, *args, **kwargs)
        _attach_attrs(self, given, ["loss_scaling"])


class AdamW(torch.optim.AdamW):
    def __init__(self, params, *args, **kwargs):
        given = list(kwargs)
        _pop_extra(kwargs, "AdamW")
        super().__init__(params, *args, **kwargs)
        _attach_attrs(self, given, ["loss_scaling"])


class RMSprop(torch.optim.RMSprop):
    """torch.optim.RMSprop taking PopTorch's extra arguments. On the host it is torch's
    RMSprop; a training model cannot use it yet (the daemon's optimizer set, sim/optim.c,
    has SGD, Adam and AdamW): trainingModel says so."""

    def __init__(self, params, lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, **kwargs):
        given = ["lr"] + list(kwargs)
        _pop_extra(kwargs, "RMSprop")
        super().__init__(params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                         momentum=momentum, centered=centered, **kwargs)
        _attach_attrs(self, given, ["loss_scaling"])


class LAMB(torch.optim.Optimizer):
    """PopTorch's LAMB (You et al., "Large Batch Optimization for Deep Learning", 2019),
    biased unless bias_correction: per weight w with gradient g at step t,
        m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2
        u = (m / c1) / (sqrt(v / c2) + eps) + weight_decay w   (c = 1 - b^t, or 1)
        r1 = min(|w|, max_weight_norm),  r2 = |u|
        w -= lr * (r1 / r2 if r1 > 0 and r2 > 0 else 1) * u
    step() applies it on the host; a training model cannot use it yet (the daemon's
    optimizer set, sim/optim.c, has SGD, Adam and AdamW): trainingModel says so."""

    def __init__(self, params, lr=None, betas=None, eps=None, weight_decay=None,
                 bias_correction=None, loss_scaling=None, max_weight_norm=None,
                 accum_type=None, first_order_momentum_accum_type=None,
                 second_order_momentum_accum_type=None):
        for name, t in (("accum_type", accum_type),
                        ("first_order_momentum_accum_type", first_order_momentum_accum_type),
                        ("second_order_momentum_accum_type",
                         second_order_momentum_accum_type)):
            if t not in (None, torch.float32, torch.float16):
                raise ValueError(f"LAMB: {name} must be torch.float32 or torch.float16, "
                                 f"not {t}")
        defaults = dict(lr=1e-3 if lr is None else lr,
                        betas=(0.9, 0.999) if betas is None else tuple(betas),
                        eps=1e-8 if eps is None else eps,
                        weight_decay=1e-2 if weight_decay is None else weight_decay,
                        max_weight_norm=65500.0 if max_weight_norm is None
                        else max_weight_norm)
        super().__init__(params, defaults)
        self.bias_correction = True if bias_correction is None else bool(bias_correction)
        self.loss_scaling = 1.0 if loss_scaling is None else loss_scaling
        self.max_weight_norm = defaults["max_weight_norm"]
        self.accum_type = accum_type or torch.float32
        self.first_order_momentum_accum_type = first_order_momentum_accum_type or \
            torch.float32
        self.second_order_momentum_accum_type = second_order_momentum_accum_type or \
            torch.float32
        given = [k for k, v in (("lr", lr), ("betas", betas), ("eps", eps),
                                ("weight_decay", weight_decay),
                                ("max_weight_norm", max_weight_norm),
                                ("loss_scaling", loss_scaling)) if v is not None]
        _attach_attrs(self, given, ["loss_scaling"])

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            b1, b2 = group["betas"]
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
                r1 = p.norm().clamp(max=group["max_weight_norm"])
                r2 = u.norm()
                trust = r1 / r2 if float(r1) > 0 and float(r2) > 0 else 1.0
                p.sub_(group["lr"] * trust * u)
        return loss


class LAMBNoBias(LAMB):
    """LAMB without bias correction (PopTorch's LAMBNoBias)."""

    def __init__(self, params, *args, **kwargs):
        kwargs["bias_correction"] = False
        super().__init__(params, *args, **kwargs)
