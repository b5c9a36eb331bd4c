"""poptorch.Options and its groups (Training, Distributed, TensorLocations, Precision, Jit,
_Popart), with PopTorch's setters, defaults and printed representation.

Values live in a dict per group, readable as attributes (opts.device_iterations,
opts.Training.gradient_accumulation), as PopTorch exposes them. PopTorch calls that have
no meaning on ipuofd are accepted with a warning naming them; a name PopTorch does not
have is an AttributeError, so typos are not swallowed.
"""
import copy
import json
import os
import warnings

import torch

from . import _lib, enums
from ._logging import logger
from .errors import Error

# PopTorch option calls that change nothing here (the simulated IPU has no such knob);
# accepted with a warning so PopTorch programs run unchanged.
_IGNORED = {
    "Options": ("enableExecutableCaching", "useIpuModel", "enableSyntheticData",
                "enableStableNorm", "syncPattern", "useIpuId",
                "showCompilationProgressBar", "relaxOptimizerAttributesChecks",
                "setAvailableMemoryProportion", "maxRepeatLogs",
                "modelName", "disableModuleNamescope",
                "sourceLocationExcludes", "appendToLocationExcludes",
                "useOfflineIpuTarget", "loadFromFile"),
    "_TrainingOptions": ("setMeanAccumulationAndReplicationReductionStrategy",
                         "setAutomaticLossScaling", "setConvolutionDithering"),
    "_PopartOptions": ("setEngineOptions", "setPatterns"),
    "_PrecisionOptions": ("halfFloatCasting", "runningStatisticsAlwaysFloat",
                          "enableFloatingPointExceptions", "enableStochasticRounding",
                          "setPartialsType"),
    "_JitOptions": ("traceModel",),
    "_TensorLocationOptions": ("numIOTiles",),
    "TensorLocationSettings": ("minElementsForOffChip",
                               "minElementsForReplicatedTensorSharding",
                               "useReplicatedTensorSharding", "useIOTilesToLoad",
                               "useIOTilesToStore"),
}


class _OptionsDict:
    """A group of options: values in _values, printed as Name(key=value, ...)."""

    def __init__(self, **values):
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "_frozen", False)

    def __getattr__(self, name):
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        if name in _IGNORED.get(type(self).__name__, ()):
            return _ignored(self, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            self.set(**{name: value})

    def set(self, **kwargs):
        """Sets values by key (PopTorch's OptionsDict.set)."""
        self._check_frozen()
        self._values.update(kwargs)
        return self

    def _check_frozen(self):
        if self._frozen:
            raise Error("Can't modify frozen Options")

    def toDict(self):
        """The values as a plain dict (groups as nested dicts)."""
        return {k: v.toDict() if isinstance(v, _OptionsDict) else v
                for k, v in self._values.items()}

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(
            f"{k}={v!r}" for k, v in self._values.items()) + ")"


_warned = set()


def _ignored(group, name):
    """A setter that warns (once per name and process) that name has no effect on ipuofd
    and returns the group."""

    def setter(*args, **kwargs):
        if name not in _warned:
            _warned.add(name)
            warnings.warn(f"poptorch.Options: {name}() has no effect on ipuofd's simulated "
                          "IPUs; ignored (warned once)", stacklevel=2)
        return group
    return setter


class TensorLocationSettings(_OptionsDict):
    """Where one kind of tensor lives: on chip (the default) or in the host-side remote
    memory (useOnChipStorage(False))."""

    def __init__(self):
        super().__init__(onChip=True)

    def useOnChipStorage(self, use=True):
        if use is None:
            use = True
        if not isinstance(use, bool):
            raise ValueError("useOnChipStorage expects True, False or None")
        self._values["onChip"] = use
        return self


class _TensorLocationOptions(_OptionsDict):
    KINDS = ("weights", "activations", "accumulators", "optimizer")

    def __init__(self):
        super().__init__()

    def _set(self, kind, settings):
        self._check_frozen()
        if not isinstance(settings, TensorLocationSettings):
            raise ValueError(f"set{kind.capitalize()}Location expects a "
                             "poptorch.TensorLocationSettings")
        self._values[f"location_{kind}"] = dict(settings._values)
        return self

    def setActivationLocation(self, location):
        return self._set("activations", location)

    def setWeightLocation(self, location):
        return self._set("weights", location)

    def setAccumulatorLocation(self, location):
        return self._set("accumulators", location)

    def setOptimizerLocation(self, location):
        return self._set("optimizer", location)

    def off_chip(self):
        """The kinds placed off chip, in KINDS order."""
        return [k for k in self.KINDS
                if not self._values.get(f"location_{k}", {}).get("onChip", True)]


class _TrainingOptions(_OptionsDict):
    def __init__(self):
        super().__init__(gradient_accumulation=1,
                         accumulation_and_replication_reduction_type=enums.ReductionType.Mean)

    def gradientAccumulation(self, gradient_accumulation):
        """Micro-batches whose gradients are accumulated before each weight update."""
        n = gradient_accumulation
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"gradientAccumulation expects an integer >= 1, not {n!r}")
        return self.set(gradient_accumulation=n)

    def accumulationAndReplicationReductionType(self, reduction_type):
        """Mean (the default) or Sum of the gradients of accumulation steps and replicas."""
        reduction = reduction_type
        if reduction not in (enums.ReductionType.Mean, enums.ReductionType.Sum):
            raise ValueError("accumulationAndReplicationReductionType expects "
                             "poptorch.ReductionType.Mean or poptorch.ReductionType.Sum "
                             f"(NoReduction is not supported), not {reduction!r}")
        return self.set(accumulation_and_replication_reduction_type=reduction)


class _DistributedOptions(_OptionsDict):
    """Several processes sharing one partition. By default the process id and count come
    from the environment as libipuof-client reads it (ipuof_process_env):
    IPUOF_PROCESS_ID/IPUOF_NUM_PROCESSES, else Open MPI's OMPI_COMM_WORLD_RANK/SIZE (as
    PopTorch's do), else PopRun's POPDIST_* variables; none set: process 0 of 1."""

    def __init__(self):
        super().__init__(num_distributed_processes=1, distributed_process_id=0)
        if not _lib.JOBS:
            self.setEnvVarNames("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")
            return
        pid = _lib.ffi.new("unsigned *")
        num = _lib.ffi.new("unsigned *")
        err = _lib.ffi.new("char[256]")
        if _lib.lib.ipuof_process_env(pid, num, err, len(err)) != 0:
            raise Error("poptorch.Options: the process id/count in the environment: " +
                        _lib.string(err))
        self.configureProcessId(pid[0], num[0])

    def disable(self):
        return self.configureProcessId(0, 1)

    def setEnvVarNames(self, var_num_processes, var_process_id):
        n = int(os.environ.get(var_num_processes, "1"))
        i = int(os.environ.get(var_process_id, "0"))
        return self.configureProcessId(i, n)

    def configureProcessId(self, process_id, num_processes):
        """This process is process_id of num_processes sharing the partition."""
        if not (isinstance(num_processes, int) and num_processes >= 1 and
                isinstance(process_id, int) and 0 <= process_id < num_processes):
            raise ValueError("configureProcessId expects 0 <= process_id < num_processes, "
                             f"not ({process_id!r}, {num_processes!r})")
        return self.set(distributed_process_id=process_id,
                        num_distributed_processes=num_processes)

    @property
    def processId(self):
        return self._values["distributed_process_id"]

    @property
    def numProcesses(self):
        return self._values["num_distributed_processes"]


class _PrecisionOptions(_OptionsDict):
    pass


class _JitOptions(_OptionsDict):
    def __init__(self):
        super().__init__(trace_model=False)


class _PopartOptions(_OptionsDict):
    """PopART session options: none has a meaning on ipuofd."""

    def set(self, key, value):
        self._check_frozen()
        if ("_Popart.set", key) not in _warned:
            _warned.add(("_Popart.set", key))
            warnings.warn(f"poptorch.Options._Popart.set({key!r}, ...) has no effect on "
                          "ipuofd; ignored (warned once)", stacklevel=2)
        return self


class Options(_OptionsDict):
    """poptorch.Options: how a model is compiled and run."""

    def __init__(self):
        super().__init__(
            replication_factor=1, input_group_size=1,
            input_cgt=enums.CommGroupType.Consecutive, device_iterations=1, log_dir=".",
            auto_round_num_ipus=False, output_mode=enums.OutputMode.Default,
            output_return_period=1, connection_type=enums.ConnectionType.Always,
            random_seed=None, execution_strategy=None, broadcast_buffers=True)
        object.__setattr__(self, "Training", _TrainingOptions())
        object.__setattr__(self, "Distributed", _DistributedOptions())
        object.__setattr__(self, "TensorLocations", _TensorLocationOptions())
        object.__setattr__(self, "Precision", _PrecisionOptions())
        object.__setattr__(self, "Jit", _JitOptions())
        object.__setattr__(self, "_Popart", _PopartOptions())
        if os.environ.get("POPTORCH_DEFAULT_OPTIONS"):
            self.from_json(os.environ["POPTORCH_DEFAULT_OPTIONS"])

    _GROUPS = ("Training", "Distributed", "TensorLocations", "Precision", "Jit", "_Popart")

    def _freeze(self):
        """Called when a model compiles with these options: later changes raise."""
        self._frozen = True
        for g in self._GROUPS:
            getattr(self, g)._frozen = True

    def deviceIterations(self, device_iterations):
        """Iterations of the device loop per call (micro-batches, or optimizer steps when
        training)."""
        n = device_iterations
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"deviceIterations expects an integer >= 1, not {n!r}")
        return self.set(device_iterations=n)

    def replicationFactor(self, replication_factor):
        """Data-parallel replicas of the model (in this process)."""
        n = replication_factor
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"replicationFactor expects an integer >= 1, not {n!r}")
        return self.set(replication_factor=n)

    def inputReplicaGrouping(self, input_group_size, input_group_type):
        """Replicas of one group receive the same input (Consecutive: replicas
        g*k..g*k+g-1 form group k; Orthogonal: replicas k, k+G, k+2G...)."""
        if input_group_type == enums.CommGroupType.NoGrouping:
            input_group_size, input_group_type = 1, enums.CommGroupType.Consecutive
        if input_group_type == enums.CommGroupType.All:
            raise ValueError("input_group_type cannot be All")
        if input_group_size > self.replication_factor:
            raise ValueError("input_group_size cannot be larger than replication_factor")
        if self.replication_factor % input_group_size != 0:
            raise ValueError("input_group_size must be a factor of replication_factor")
        return self.set(input_group_size=input_group_size, input_cgt=input_group_type)

    def randomSeed(self, random_seed):
        """The seed of Dropout masks and of the DataLoader's shuffle; also torch's."""
        seed = random_seed
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"randomSeed expects an integer >= 0, not {seed!r}")
        self._check_frozen()
        torch.manual_seed(seed)
        return self.set(random_seed=seed)

    def outputMode(self, output_mode, output_return_period=None):
        """Which results come back per output: All, Final, Sum, EveryN(period), Default."""
        output_mode = enums.OutputMode(output_mode)
        if output_mode == enums.OutputMode.EveryN:
            if not isinstance(output_return_period, int) or output_return_period < 1:
                raise ValueError("OutputMode.EveryN needs output_return_period > 0")
        elif output_return_period is not None:
            # PopTorch ignores the period of the other modes (it logs that it does).
            logger.info("Anchor return period argument ignored with output_mode set to "
                        "%s", output_mode)
            output_return_period = None
        return self.set(output_mode=output_mode,
                        output_return_period=output_return_period or 1)

    @property
    def _execution_strategy(self):
        """The strategy as PopTorch's Options hold it: PipelinedExecution() by default."""
        s = self._values.get("execution_strategy")
        if s is None:
            from .blocks import PipelinedExecution
            return PipelinedExecution()
        return s

    def defaultOutputMode(self):
        return self.output_mode == enums.OutputMode.Default

    def setExecutionStrategy(self, strategy):
        """PipelinedExecution, ShardedExecution or SerialPhasedExecution over the model's
        blocks."""
        from .blocks import _Strategy
        if not isinstance(strategy, _Strategy):
            raise ValueError("setExecutionStrategy expects poptorch.PipelinedExecution, "
                             "ShardedExecution or SerialPhasedExecution")
        return self.set(execution_strategy=strategy)

    def autoRoundNumIPUs(self, auto_round_num_ipus=True):
        """Round the IPUs the model needs up to a power of two instead of failing."""
        return self.set(auto_round_num_ipus=bool(auto_round_num_ipus))

    def connectionType(self, connection_type):
        """Always (attach when compiling), OnDemand (at the first run) or Never (compile
        only; running raises)."""
        return self.set(connection_type=enums.ConnectionType(connection_type))

    def logDir(self, log_dir):
        """Where profiling reports and logs go (default ".")."""
        return self.set(log_dir=str(log_dir))

    def logCycleCount(self, log_cycle_count):
        """Counts each run's cycles on the simulated clock (PoplarExecutor.cycleCount())."""
        if not isinstance(log_cycle_count, bool):
            raise ValueError("logCycleCount expects True or False, not "
                             f"{log_cycle_count!r}")
        return self.set(log_cycle_count=log_cycle_count)

    def anchorTensor(self, short_name, long_name, output_mode=None, output_return_period=1):
        """Makes the graph's tensor long_name (a name of getTensorNames()) readable after
        each run as getAnchoredTensor(short_name); output_mode None takes the model's
        outputs' mode."""
        if not isinstance(short_name, str) or not isinstance(long_name, str):
            raise ValueError("anchorTensor expects two names (str): the short name to read "
                             "it by and the tensor's name in the graph")
        if output_mode is not None:
            output_mode = enums.OutputMode(output_mode)
        if output_mode != enums.OutputMode.EveryN:
            output_return_period = 1
        elif not isinstance(output_return_period, int) or output_return_period < 1:
            raise ValueError("OutputMode.EveryN needs output_return_period > 0")
        self._check_frozen()
        anchors = dict(self._values.get("anchored_tensors", {}))
        anchors[short_name] = [long_name, output_mode is None, output_mode,
                               output_return_period]
        self._values["anchored_tensors"] = anchors
        return self

    @property
    def anchored_tensors(self):
        """{short name: [long name, mode is the outputs', mode, period]}, PopTorch's."""
        return self._values.get("anchored_tensors", {})

    def broadcastBuffers(self, broadcast_buffers=True):
        """PopTorch's: with replicas, buffers forward() changes would be broadcast from
        replica 0 (refused, as by PopTorch); False lets each replica keep its own."""
        return self.set(broadcast_buffers=bool(broadcast_buffers))

    def updatableNamedBuffers(self, buffers):
        """The buffers copyNamedBuffersToDevice() copies to the device (by name)."""
        if isinstance(buffers, str) or not all(isinstance(b, str) for b in buffers):
            raise ValueError("updatableNamedBuffers expects a list of buffer names")
        return self.set(updatable_named_buffers=list(buffers))

    def enableProfiling(self, directory="."):
        """Profiling into directory, as POPLAR_ENGINE_OPTIONS' autoReport does."""
        return self.set(profiling_dir=str(directory))

    def from_json(self, text):
        """Applies {"Group.method": value} pairs (a list value is several arguments)."""
        for key, value in json.loads(text).items():
            target = self
            *groups, method = key.split(".")
            for g in groups:
                target = getattr(target, g)
            args = value if isinstance(value, list) else [value]
            getattr(target, method)(*args)
        return self

    def clone(self):
        """An independent copy, not frozen."""
        c = copy.deepcopy(self)
        c._frozen = False
        for g in self._GROUPS:
            getattr(c, g)._frozen = False
        return c

    def toDict(self):
        d = super().toDict()
        for g in self._GROUPS:
            d[g] = getattr(self, g).toDict()
        return d

    def __repr__(self):
        items = [f"{k}={v!r}" for k, v in self._values.items()]
        items += [f"{g}={getattr(self, g)!r}" for g in self._GROUPS]
        return "Options(" + ", ".join(items) + ")"
