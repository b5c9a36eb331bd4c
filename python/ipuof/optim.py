"""poptorch.optim: torch.optim's SGD, Adam and AdamW taking PopTorch's extra arguments.

The IPU-specific arguments (loss scaling, velocity scaling, accumulator types, ...) have no
meaning on ipuofd's float32 simulator: non-default values are accepted with a warning.
"""
import warnings

import torch

_EXTRA = {"loss_scaling": 1.0, "velocity_scaling": 1.0, "use_combined_accum": None,
          "accum_type": None, "velocity_accum_type": None,
          "first_order_momentum_accum_type": None, "second_order_momentum_accum_type": None,
          "max_grad_norm": None, "bias_correction": True, "max_weight_norm": None}


def _pop_extra(kwargs, name):
    for k, default in _EXTRA.items():
        if k in kwargs:
            v = kwargs.pop(k)
            if v is not None and v != default and not (k == "accum_type" and
                                                       v == torch.float32):
                warnings.warn(f"poptorch.optim.{name}: {k}={v!r} has no effect on ipuofd",
                              stacklevel=3)


class SGD(torch.optim.SGD):
    def __init__(self, params, lr=0.01, *args, **kwargs):
        _pop_extra(kwargs, "SGD")
        super().__init__(params, lr, *args, **kwargs)


class Adam(torch.optim.Adam):
    def __init__(self, params, *args, **kwargs):
        _pop_extra(kwargs, "Adam")
        super().__init__(params, *args, **kwargs)


class AdamW(torch.optim.AdamW):
    def __init__(self, params, *args, **kwargs):
        _pop_extra(kwargs, "AdamW")
        super().__init__(params, *args, **kwargs)
