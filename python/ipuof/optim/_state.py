"""The optimizer state of a training model seen from Python: optimizer.state_dict() reads
the device's state (torch.optim's "state" entries, and PopTorch's "ipu_state" and
"ipu_param" views), load_state_dict() writes it, at once or at the next compile, and
detachFromDevice keeps it on the host. The device names the state "optimizer:step" and
"optimizer:<slot>:<weight>" (sim/exec/optim_state.c); ipuof_model_read_state /
ipuof_model_write_state carry it."""
import math
import types
import weakref

import torch

from .. import _lib
from . import _log as _optim_log
from .._logging import logger
from ..errors import Error
from ._kind import auto_loss_scaling, base_key as _base_key, is_poptorch
from ._kind import kind as _kind, names as _names

ffi = _lib.ffi


# torch.optim's state names per kind, with the name PopTorch's "ipu_state" gives each.
_SLOTS = {_lib.OPTIMIZER_SGD: (("momentum_buffer", "Accl___"),),
          _lib.OPTIMIZER_ADAM: (("exp_avg", "Accl1___"), ("exp_avg_sq", "Accl2___")),
          _lib.OPTIMIZER_ADAMW: (("exp_avg", "Accl1___"), ("exp_avg_sq", "Accl2___")),
          _lib.OPTIMIZER_LAMB: (("exp_avg", "Accl1___"), ("exp_avg_sq", "Accl2___")),
          _lib.OPTIMIZER_RMSPROP: (("square_avg", "Accl1___"), ("grad_avg", "Accl2___"),
                                   ("momentum_buffer", "Accl3___"))}


def _executor(optimizer):
    ref = optimizer.__dict__.get("_ipuof_executor")
    ex = ref() if ref is not None else None
    return ex if ex is not None and getattr(ex, "_exe", None) is not None else None


def _trained(optimizer, executor):
    """(parameter, weight name) of every parameter of optimizer the device trains."""
    ids = _names(executor)
    known = {n for n, _d, _s, kind in executor._exe.weights() if kind == 1}
    return [(p, ids[id(p)]) for g in optimizer.param_groups for p in g["params"]
            if id(p) in ids and ids[id(p)] in known]


def _read(exe, name, t):
    rc = _lib.lib.ipuof_model_read_state(exe.ptr, name.encode(),
                                         ffi.cast("void *", t.data_ptr()),
                                         t.numel() * t.element_size())
    if rc == _lib.E_NOTFOUND:
        return False
    if rc != 0:
        raise exe.conn.fail(f"optimizer.state_dict() ({name})", rc)
    return True


def _write(exe, name, t):
    t = t.detach().contiguous()
    rc = _lib.lib.ipuof_model_write_state(exe.ptr, name.encode(),
                                          ffi.cast("const void *", t.data_ptr()),
                                          t.numel() * t.element_size())
    if rc != 0:
        raise exe.conn.fail(f"optimizer.load_state_dict() ({name})", rc)


def read_scalar(exe, name):
    """The float32 scalar state tensor name (optimizer:final_loss_scale,
    optimizer:loss_scale_update_factor) of the model on the device."""
    t = torch.zeros((), dtype=torch.float32)
    if not _read(exe, name, t):
        raise Error(f"the daemon keeps no optimizer state '{name}' (an older ipuofd?)")
    return t


def _step_value(optimizer, n):
    """A step count as torch's optimizer of this class keeps it."""
    if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        return torch.tensor(float(n))
    return int(n)


def pull(executor):
    """Copies the device's optimizer state into executor's optimizer.state (torch's
    names); returns PopTorch's (ipu_state) view of it."""
    optimizer = executor._optimizer
    exe = executor._exe
    if optimizer is None or exe is None:
        return None
    kind = _kind(optimizer)
    logger.info("Writing optimiser state tensors from IPU to host.")
    step = torch.zeros((), dtype=torch.int64)
    _read(exe, "optimizer:step", step)
    ipu = {}
    for p, name in _trained(optimizer, executor):
        st = {}
        for slot, popname in _SLOTS[kind]:
            t = torch.empty(p.shape, dtype=torch.float32)
            if _read(exe, f"optimizer:{slot}:{name}", t):
                st[slot] = t.to(p.dtype)
                ipu[popname + name] = t
        if kind != _lib.OPTIMIZER_SGD:
            ipu["Step___" + name] = step.to(torch.float32)   # PopART keeps it in float
        if int(step) > 0:
            if kind == _lib.OPTIMIZER_SGD:
                group = next(g for g in optimizer.param_groups
                             if any(q is p for q in g["params"]))
                if not group.get("momentum"):
                    st.pop("momentum_buffer", None)
            else:
                st["step"] = _step_value(optimizer, int(step))
            optimizer.state[p] = st
        else:
            optimizer.state.pop(p, None)
    if _optim_log_als(executor):
        # PopART's automatic loss scaling state (a float32 scalar)
        ipu["lossScaleUpdateFactor"] = read_scalar(exe, "optimizer:loss_scale_update_factor")
    optimizer.__dict__["_ipuof_state_cache"] = (_cache_key(executor), dict(ipu))
    return ipu


def _optim_log_als(executor):
    return auto_loss_scaling(executor)


def _cache_key(ex):
    """What the device's state depends on: the compiled model, its runs and writes."""
    return (id(ex._exe), ex._steps_run, ex.__dict__.get("_ipuof_state_gen", 0))


def _push(executor, ipu_state=None):
    """Writes executor's optimizer.state (and any PopTorch-named ipu_state tensors, which
    win) to the device."""
    optimizer = executor._optimizer
    exe = executor._exe
    kind = _kind(optimizer)
    ipu_state = ipu_state or {}
    logger.info("Writing optimiser state tensors from host to IPU memory.")
    executor.__dict__["_ipuof_state_gen"] = executor.__dict__.get("_ipuof_state_gen", 0) + 1
    step = None
    for p, name in _trained(optimizer, executor):
        st = optimizer.state.get(p, {})
        for slot, popname in _SLOTS[kind]:
            v = ipu_state.get(popname + name, st.get(slot))
            if not isinstance(v, torch.Tensor):
                continue
            if tuple(v.shape) != tuple(p.shape):
                raise Error(f"optimizer state {slot} of '{name}' ({popname + name}) has shape "
                            f"{list(v.shape)}; the weight is {list(p.shape)}, and its state "
                            "must be too")
            _write(exe, f"optimizer:{slot}:{name}", v.to(torch.float32))
        s = ipu_state.get("Step___" + name, st.get("step"))
        if s is not None and step is None:
            step = int(s)
    if step is not None:
        _write(exe, "optimizer:step", torch.tensor(step, dtype=torch.int64))
    f = ipu_state.get("lossScaleUpdateFactor")
    if f is not None:
        _write(exe, "optimizer:loss_scale_update_factor",
               torch.as_tensor(f, dtype=torch.float32).reshape(()))


_SGD_KEYS = ("scaledLearningRate0___specific___", "weightDecayScaleFactor0___specific___")
_KEYS = ("learningRate___specific___", "weightDecay___specific___")
_LS = "lossScaling_FLOAT"


def _group_of(optimizer, p):
    return next(g for g in optimizer.param_groups if any(q is p for q in g["params"]))


def _loss_scaling(optimizer):
    return float(getattr(optimizer, "loss_scaling", 1.0) or 1.0)


def _ipu_param(optimizer, executor):
    """PopTorch's "ipu_param" view: each trained weight's hyper-parameters as PopART's
    tensors hold them, from param_groups, with the values a load_state_dict() gave that
    are still in force (overrides())."""
    out = {}
    kind = _kind(optimizer)
    for p, name in _trained(optimizer, executor):
        g = _group_of(optimizer, p)
        lr, wd = float(g["lr"]), float(g.get("weight_decay", 0.0) or 0.0)
        if kind == _lib.OPTIMIZER_SGD:
            dm = float(g.get("dampening", 0.0) or 0.0)
            out[_SGD_KEYS[0] + name] = torch.tensor(lr * (1 - dm) / _loss_scaling(optimizer))
            out[_SGD_KEYS[1] + name] = torch.tensor(1 - lr * (1 - dm) * wd)
        else:
            out[_KEYS[0] + name] = torch.tensor(lr)
            out[_KEYS[1] + name] = torch.tensor(wd)
    out[_LS] = torch.tensor(_loss_scaling(optimizer))
    loaded = _loaded_param(optimizer)
    if loaded:
        out.update({k: v.clone() for k, v in loaded.items() if k in out})
    return out


def _loaded_param(optimizer):
    """The ipu_param values load_state_dict() gave, while param_groups and the optimizer's
    other hyper-parameters are still those it loaded (a later change, given by a call or
    setOptimizer, wins, as PopTorch's setOptimizer overwrites PopART's optimizer tensors);
    else None."""
    loaded = optimizer.__dict__.get("_ipuof_param")
    if loaded is None or loaded[0] != _base_key(optimizer):
        return None
    return loaded[1]


def _scalar(v, key):
    try:
        t = torch.as_tensor(v, dtype=torch.float32)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise Error(f"optimizer.load_state_dict(): ipu_param['{key}'] is {v!r}; a float or "
                    "a one-element tensor was expected") from exc
    if t.numel() != 1:
        raise Error(f"optimizer.load_state_dict(): ipu_param['{key}'] has shape "
                    f"{list(t.shape)}; a hyper-parameter is one value")
    return float(t.reshape(()))


def overrides(optimizer, trained):
    """What the loaded ipu_param values in force (_loaded_param) make the device use:
    (loss_scaling or None, {weight name: {"lr": ..., "weight_decay": ...}}), checked
    against what the device takes (a clear Error otherwise). SGD's PopART tensors are
    folded back into torch's terms: scaledLearningRate0 = lr (1 - dampening) / lossScaling
    and weightDecayScaleFactor0 = 1 - lr (1 - dampening) weight_decay, the gradient being
    scaled by lossScaling, so lr (1 - dampening) = scaledLearningRate0 x lossScaling.
    Elsewhere the loss scaling cancels in float32 and only decides float16 accumulators'
    scale. trained: the (parameter, weight name) pairs the device trains."""
    loaded = _loaded_param(optimizer)
    if not loaded:
        return None, {}
    kind = _kind(optimizer)
    keys = _SGD_KEYS if kind == _lib.OPTIMIZER_SGD else _KEYS
    unknown = sorted(set(loaded) - {k + n for _p, n in trained for k in keys} - {_LS})
    if unknown:
        raise Error(f"optimizer.load_state_dict(): ipu_param holds {', '.join(unknown[:4])}"
                    f"{', ...' if len(unknown) > 4 else ''}, which name no hyper-parameter "
                    f"of this model's {type(optimizer).__name__} (its keys are "
                    f"{keys[0]}<weight>, {keys[1]}<weight> and {_LS}, for the weights "
                    "it trains)")
    ls = _scalar(loaded[_LS], _LS) if _LS in loaded else None
    ls_eff = ls if ls is not None else _loss_scaling(optimizer)
    out = {}
    for p, name in trained:
        g = _group_of(optimizer, p)
        lr, wd = float(g["lr"]), float(g.get("weight_decay", 0.0) or 0.0)
        if kind == _lib.OPTIMIZER_SGD:
            k_lr, k_wd = _SGD_KEYS[0] + name, _SGD_KEYS[1] + name
            if k_lr not in loaded and k_wd not in loaded and ls is None:
                continue
            dm = float(g.get("dampening", 0.0) or 0.0)
            slr0, wdsf0 = lr * (1 - dm) / _loss_scaling(optimizer), 1 - lr * (1 - dm) * wd
            slr = _scalar(loaded[k_lr], k_lr) if k_lr in loaded else slr0
            wdsf = _scalar(loaded[k_wd], k_wd) if k_wd in loaded else wdsf0
            if _as_read(slr, slr0) and _as_read(wdsf, wdsf0) and \
                    (ls is None or _as_read(ls, _loss_scaling(optimizer))):
                continue          # what state_dict() gave: param_groups' exact values
            step = slr * ls_eff                  # lr (1 - dampening)
            if dm == 1.0 or step == 0.0:
                if step != 0.0 or wdsf != 1.0:
                    raise Error(f"optimizer.load_state_dict(): ipu_param {k_lr}={slr:g} and "
                                f"{k_wd}={wdsf:g} with dampening {dm:g} and loss scaling "
                                f"{ls_eff:g} are no SGD step ipuofd can take (lr (1 - "
                                "dampening) is 0, so the weight decay scale factor must be 1)")
                continue
            lr, wd = step / (1 - dm), (1 - wdsf) / step
            what = f"{k_lr}={slr:g}, {k_wd}={wdsf:g}, {_LS}={ls_eff:g}"
        else:
            k_lr, k_wd = _KEYS[0] + name, _KEYS[1] + name
            if k_lr not in loaded and k_wd not in loaded:
                continue
            lr1 = _scalar(loaded[k_lr], k_lr) if k_lr in loaded else lr
            wd1 = _scalar(loaded[k_wd], k_wd) if k_wd in loaded else wd
            if _as_read(lr1, lr) and _as_read(wd1, wd):
                continue          # what state_dict() gave: param_groups' exact values
            lr, wd = lr1, wd1
            what = f"{k_lr}={lr:g}, {k_wd}={wd:g}"
        if not (lr >= 0 and math.isfinite(lr)) or not (wd >= 0 and math.isfinite(wd)):
            raise Error(f"optimizer.load_state_dict(): ipu_param {what} give '{name}' the "
                        f"learning rate {lr:g} and weight decay {wd:g}; ipuofd's optimizers "
                        "take a learning rate and weight decay >= 0 and finite")
        out[name] = {"lr": lr, "weight_decay": wd}
    if ls is not None and not (ls > 0 and math.isfinite(ls)):
        if kind != _lib.OPTIMIZER_SGD and _half_accum(optimizer):
            raise Error(f"optimizer.load_state_dict(): ipu_param {_LS}={ls:g}; with float16 "
                        "accumulators the loss scaling must be > 0 and finite")
        ls = None            # cancels in float32 (SGD's is folded into lr above)
    return ls, out


def _as_read(v, base):
    """Whether v is base as state_dict() gives it (a float32 tensor)."""
    return v == float(torch.tensor(base, dtype=torch.float32))


def _half_accum(optimizer):
    return any(getattr(optimizer, k, None) in (torch.float16, torch.half)
               for k in ("accum_type", "velocity_accum_type",
                         "first_order_momentum_accum_type",
                         "second_order_momentum_accum_type"))


def _bound(optimizer):
    """The executor optimizer is bound to and compiled by, or None."""
    ex = _executor(optimizer)
    return ex if ex is not None and ex._optimizer is optimizer else None


def _state_dict(self):
    ex = _bound(self)
    if ex is not None:
        # The device's state changes only by a run, a write or a new compile.
        cached = self.__dict__.get("_ipuof_state_cache")
        if cached is not None and cached[0] == _cache_key(ex):
            logger.debug("Using cached optimiser state dict")
            ipu = dict(cached[1])
        else:
            ipu = pull(ex)      # first: torch's "state" then holds the device's
        sd = torch.optim.Optimizer.state_dict(self)
        sd["ipu_state"] = ipu
        sd["ipu_param"] = _ipu_param(self, ex)
        view = self.__dict__.get("_ipuof_loaded_view")
        if view is not None and view[0] == _cache_key(ex):
            # Until the next run, what load_state_dict() gave, as PopTorch keeps it: keys
            # left out of it are not there yet.
            if view[1] is not None:
                sd["ipu_state"] = dict(view[1])
            if view[2] is not None:
                sd["ipu_param"] = dict(view[2])
    else:
        sd = torch.optim.Optimizer.state_dict(self)
        pending = self.__dict__.get("_ipuof_pending")
        cached = self.__dict__.get("_ipuof_state_cache")
        if pending is None and cached is not None:
            # Detached: the state pulled at detachFromDevice.
            logger.debug("Using cached optimiser state dict")
            pending = (dict(cached[1]), None)
        sd["ipu_state"], sd["ipu_param"] = pending or (None, None)
    return sd


def _load_state_dict(self, state_dict):
    """torch's load_state_dict, plus PopTorch's two views: "ipu_state" is written to the
    device (at once, or at the compile), "ipu_param" values become the hyper-parameters the
    device uses (from the next run; keys left out keep theirs) until param_groups or the
    optimizer's settings change. A value the device cannot take is an Error here, or at
    the compile when the model is not compiled yet."""
    sd = dict(state_dict)
    ipu_state = sd.pop("ipu_state", None)
    ipu_param = sd.pop("ipu_param", None)
    if is_poptorch(self) and "ipu_state" not in state_dict and sd.get("state"):
        raise RuntimeError("Only IPU optimizer states can be loaded onto the IPU.")
    if ipu_param is not None and not isinstance(ipu_param, dict):
        raise Error(f"optimizer.load_state_dict(): ipu_param is a {type(ipu_param).__name__}; "
                    "a dict of PopTorch's hyper-parameter names to tensors (as state_dict() "
                    "gives) was expected")
    old = {k: self.__dict__.get(k) for k in ("_ipuof_param", "_ipuof_param_gen")}
    ex = _bound(self)
    torch.optim.Optimizer.load_state_dict(self, sd)
    if ipu_param is not None:
        self.__dict__["_ipuof_param"] = (_base_key(self), dict(ipu_param))
        self.__dict__["_ipuof_param_gen"] = (old["_ipuof_param_gen"] or 0) + 1
        if ex is not None:
            try:
                overrides(self, _trained(self, ex))      # checked where it enters
            except Error:
                self.__dict__.update(old)
                raise
    if ex is not None:
        _push(ex, ipu_state)
        self.__dict__["_ipuof_loaded_view"] = (_cache_key(ex), ipu_state, ipu_param)
    elif ipu_state is not None or ipu_param is not None:
        self.__dict__["_ipuof_pending"] = (ipu_state, ipu_param)


def bind(optimizer, executor):
    """Makes optimizer's state_dict() / load_state_dict() reach executor's device (torch's
    optimizers get the two methods on the instance; poptorch.optim's have them)."""
    if optimizer is None:
        return
    _optim_log.given(optimizer, executor)
    optimizer.__dict__["_ipuof_executor"] = weakref.ref(executor)
    if not is_poptorch(optimizer):
        optimizer.state_dict = types.MethodType(_state_dict, optimizer)
        optimizer.load_state_dict = types.MethodType(_load_state_dict, optimizer)


def attached(executor):
    """After a training model's compile: the host's optimizer state (loaded or kept at a
    detach) goes to the device, so training resumes from it."""
    optimizer = executor._optimizer
    if optimizer is None or executor._exe is None:
        return
    pending = optimizer.__dict__.pop("_ipuof_pending", None)
    if optimizer.state or pending:
        _push(executor, pending[0] if pending else None)
    if pending:
        optimizer.__dict__["_ipuof_loaded_view"] = (_cache_key(executor),) + tuple(pending)
