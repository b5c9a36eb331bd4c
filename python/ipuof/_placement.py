"""Where a model goes: the IPUs of its blocks and strategy, the off-chip tensor kinds,
and the partition attached for it."""
import os
import warnings

from . import _device, _lib, blocks
from .errors import Error


def placement(o, training, rec):
    """(IPUs per replica, placement dict or None) from the strategy, the recorded
    blocks and the tensor locations; Error when they need options the library does
    not have."""
    strategy = o.execution_strategy
    off_chip = o.TensorLocations.off_chip()
    if not training:
        # Inference has no optimizer state or accumulators: PopTorch ignores these
        # locations there (the tutorial clones its training options).
        off_chip = [k for k in off_chip if k not in ("optimizer", "accumulators")]
    blocks_list = []
    if strategy is not None:
        blocks_list = strategy.placement(rec.blocks, rec.order)
    elif rec.order and all(rec.blocks[b]["ipu"] is not None for b in rec.order):
        # Blocks with IPUs and no strategy: PopTorch pipelines them, a stage per IPU.
        blocks_list = blocks.PipelinedExecution().placement(rec.blocks, rec.order)
    defaults = getattr(rec, "defaults", [])
    if blocks_list and defaults and (strategy is None or (
            isinstance(strategy, blocks.PipelinedExecution) or
            isinstance(strategy, blocks.ShardedExecution)) and not strategy.stages):
        # The modules run before the first block: PopTorch's default block, IPU 0 and
        # stage 0 (not the first block's IPU, where the daemon puts a node no block
        # holds and no producer places).
        blocks_list = [(p, 0, 0) for p in defaults] + blocks_list
    ipus = max(p[2] for p in blocks_list) + 1 if blocks_list else 1
    if strategy is None or isinstance(strategy, blocks.PipelinedExecution):
        _check_pipeline_depth(o, training, len({p[1] for p in blocks_list}))
    if not (strategy or blocks_list or off_chip):
        return 1, None
    if _lib.PLACEMENT:
        return ipus, {"strategy": strategy.code if strategy else 0,
                      "blocks": blocks_list, "off_chip": off_chip}
    needs = []
    if ipus > 1:
        needs.append(f"placing blocks on {ipus} IPUs")
    if off_chip:
        needs.append("off-chip tensor locations (" + ", ".join(off_chip) + ")")
    if needs:
        raise Error(", ".join(needs) + " is not supported by this libipuof-client yet "
                    f"({_lib.path}): the multi-IPU placement options are not in its API")
    warnings.warn(f"{type(strategy).__name__ if strategy else 'Blocks'}: every block "
                  "is on IPU 0, so the model runs as one stage on one IPU (this "
                  "libipuof-client has no placement options yet)", stacklevel=4)
    return 1, None


def _check_pipeline_depth(o, training, n_stages):
    """PopTorch's (PopART's) refusal of a pipeline too short to fill: training needs
    gradientAccumulation >= the 2N-1 stages of N forward stages (N-1 backward ones are
    added), inference deviceIterations >= N; Error with PopTorch's text."""
    if n_stages < 2:
        return
    if training:
        total = 2 * n_stages - 1
        if o.Training.gradient_accumulation < total:
            raise Error("poptorch.Options().Training.gradientAccumulation must be greater "
                        f"than or equal to the number of pipeline stages ({total}) when "
                        "using poptorch.PipelinedExecution. Please note that a model with "
                        f"{n_stages} pipeline stages in PopTorch will have an additional "
                        f"{n_stages - 1} stages when training. (It is "
                        f"{o.Training.gradient_accumulation}.)")
    elif o.device_iterations < n_stages:
        raise Error("poptorch.Options().deviceIterations must be greater than or equal to "
                    f"the number of pipeline stages ({n_stages}) when using "
                    f"PopTorch.PipelinedExecution. (It is {o.device_iterations}.)")


def attach(o, ipus_per_replica):
    nproc = o.Distributed.numProcesses
    # A job of several processes attaches its whole partition from each process.
    n = o.replication_factor * ipus_per_replica * nproc
    if n & (n - 1) and not o.auto_round_num_ipus:
        p = 1
        while p < n:
            p <<= 1
        raise Error(f"The model specifies the use of {n} IPUs, however PopTorch must "
                    f"reserve a minimum of {p} in order to allow the model to run, "
                    "because PopTorch must reserve a power of 2 or maximum of 64 IPUs "
                    "per process. Please reconfigure your model to use a different "
                    "number of IPUs or set poptorch.Options().autoRoundNumIPUs(True).")
    conn = _device.Connection(_device.program_name())
    wait = bool(os.environ.get("POPTORCH_WAIT_FOR_IPU"))
    conn.attach(n, o.auto_round_num_ipus, wait, 0, o.Distributed.processId, nproc)
    return conn
