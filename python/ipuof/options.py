"""poptorch.Options and its groups (Training, Distributed, TensorLocations, Precision, Jit,
_Popart), with PopTorch's setters, defaults and printed representation.

Values live in a dict per group, readable as attributes (opts.device_iterations,
opts.Training.gradient_accumulation), as PopTorch exposes them. PopTorch calls that have
no meaning on ipuofd are accepted with a warning naming them; a name PopTorch does not
have is an AttributeError, so typos are not swallowed.
"""
import copy
import enum
import json
import os
import warnings

import torch

from . import _lib, enums
from ._logging import logger
from ._popart_options import _PopartOptions
from ._popart_options import _warned as _popart_warned
from .errors import Error

# PopTorch option calls that change nothing here (the simulated IPU has no such knob);
# accepted with a warning so PopTorch programs run unchanged. Those of _RECORDED below
# also keep their value where PopTorch keeps it (printed, copied, in toDict()). Both
# tables only declare: at import every entry becomes a real method of its class
# (_install_ignored, at the end of this file), so an option is always a method, found by
# ordinary attribute lookup, and __getattr__ reads values only.
_IGNORED = {
    "Options": ("showCompilationProgressBar", "sourceLocationExcludes",
                "appendToLocationExcludes"),
    "_PrecisionOptions": ("halfFloatCasting", "runningStatisticsAlwaysFloat"),
    "_JitOptions": ("traceModel",),
}

# name -> (group, how the arguments are recorded): "popart:key" into _Popart.options,
# "value:key" into the group's own values.
_RECORDED = {
    ("Options", "enableStableNorm"): "popart:enableStableNorm",
    ("Options", "useIpuModel"): "value:use_model",
    ("Options", "useIpuId"): "value:ipu_id",
    ("Options", "maxRepeatLogs"): "value:max_repeat_logs",
    ("_PrecisionOptions", "enableFloatingPointExceptions"):
        "popart:enableFloatingPointChecks",
    ("TensorLocationSettings", "minElementsForOffChip"): "value:minElementsForOffChip",
    ("TensorLocationSettings", "minElementsForReplicatedTensorSharding"):
        "value:minElementsForReplicatedTensorSharding",
    ("TensorLocationSettings", "useReplicatedTensorSharding"):
        "value:useReplicatedTensorSharding",
    ("TensorLocationSettings", "useIOTilesToLoad"): "value:useIOTilesToLoad",
    ("TensorLocationSettings", "useIOTilesToStore"): "value:useIOTilesToStore",
}


class ConfigFileError(Exception):
    """A line of an options file (Options.loadFromFile) that is not Python: its line,
    file name and the parser's message."""


class _OptionsDict:
    """A group of options: values in _values, printed as Name(key=value, ...)."""

    def __init__(self, **values):
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "_frozen", False)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __deepcopy__(self, memo):
        """PopTorch's rule: a copy is not frozen (copy.deepcopy, clone)."""
        c = type(self).__new__(type(self))
        memo[id(self)] = c
        for k, v in self.__dict__.items():
            object.__setattr__(c, k, False if k == "_frozen" else copy.deepcopy(v, memo))
        return c

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

    def _popart(self):
        """The _PopartOptions of the Options this group belongs to."""
        return self.__dict__["_popart_options"]

    def toDict(self):
        """The values as a plain dict (groups as nested dicts)."""
        return {k: v.toDict() if isinstance(v, _OptionsDict) else v
                for k, v in self._values.items()}

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(
            f"{k}={v!r}" for k, v in self._values.items()) + ")"


# The package (set by its __init__; options.py does not import it): the name `poptorch`
# in a file loadFromFile runs.
_package = None

# the names warned about once per process (shared with _popart_options, below this module)
_warned = _popart_warned


def _warn_ignored(name):
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"poptorch.Options: {name}() has no effect on ipuofd's simulated "
                      "IPUs; ignored (warned once)", stacklevel=3)


def _ignored_method(name, record=None):
    """The method name of an options class that warns (once per name and process) that it
    has no effect on ipuofd and returns its group; with record ("popart:key" or
    "value:key") it also keeps its argument (True when called without one) where PopTorch
    keeps it."""

    def method(self, *args, **kwargs):
        _warn_ignored(name)
        if record is not None:
            self._check_frozen()
            where, key = record.split(":", 1)
            value = args[0] if len(args) == 1 else (list(args) if args else True)
            if where == "popart":
                self._popart()._record(key, value)
            else:
                self._values[key] = value
        return self
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"PopTorch's {name}(): no effect on ipuofd's simulated IPUs (warned " \
        "once)" + ("; its value is kept" if record else "")
    return method


class TensorLocationSettings(_OptionsDict):
    """Where one kind of tensor lives: on chip (the default) or in the host-side remote
    memory (useOnChipStorage(False)). The other settings (minimum sizes, IO tiles,
    replicated tensor sharding) are kept and warned about once: ipuofd has no such knob."""

    def __init__(self):
        super().__init__(onChip=True)

    def useOnChipStorage(self, use=True):
        if use is None:
            use = True
        if not isinstance(use, bool):
            raise ValueError("useOnChipStorage expects True, False or None")
        self._check_frozen()
        self._values["onChip"] = use
        return self


class _TensorLocationOptions(_OptionsDict):
    # kind (as the placement names it) -> PopTorch's key
    KINDS = {"weights": "location_weight", "activations": "location_activation",
             "accumulators": "location_accumulator", "optimizer": "location_optimizer"}

    def __init__(self):
        super().__init__()

    def _set(self, kind, settings):
        self._check_frozen()
        if not isinstance(settings, TensorLocationSettings):
            raise ValueError(f"set{kind.capitalize()}Location expects a "
                             "poptorch.TensorLocationSettings")
        self._values[self.KINDS[kind]] = dict(settings._values)
        return self

    def setActivationLocation(self, location):
        return self._set("activations", location)

    def setWeightLocation(self, location):
        return self._set("weights", location)

    def setAccumulatorLocation(self, location):
        return self._set("accumulators", location)

    def setOptimizerLocation(self, location):
        return self._set("optimizer", location)

    def numIOTiles(self, num_tiles):
        """IO tiles per IPU (PopTorch's range: even, 32 to 192): their share of each IPU's
        memory is not for the model (docs/memory.md), and the simulated clock takes them from
        the compute tiles and overlaps host I/O with compute on them (docs/cost-model.md); the
        numbers computed do not change."""
        if not isinstance(num_tiles, int) or isinstance(num_tiles, bool) or \
                not 32 <= num_tiles <= 192 or num_tiles % 2:
            # AssertionError: the class PopTorch raises for it, which its users catch.
            raise AssertionError("numIOTiles must be an even number between 32 and 192. "
                                 f"(got {num_tiles!r})")
        self._check_frozen()
        self._values["numIOTiles"] = num_tiles
        return self

    def off_chip(self):
        """The kinds placed off chip, in KINDS order."""
        return [k for k, key in self.KINDS.items()
                if not self._values.get(key, {}).get("onChip", True)]


class _TrainingOptions(_OptionsDict):
    def __init__(self):
        super().__init__(gradient_accumulation=1,
                         accumulation_and_replication_reduction_type=enums.ReductionType.Mean,
                         meanAccumulationAndReplicationReductionStrategy=(
                             enums.MeanReductionStrategy.Post))
        object.__setattr__(self, "_strategy_given", False)

    def setAutomaticLossScaling(self, enabled):
        """PopTorch's automatic loss scaling, run by the daemon's optimizer step (PopART's
        definition and defaults: see poptorch.optim / docs/python.md)."""
        if not isinstance(enabled, bool):
            raise ValueError(f"setAutomaticLossScaling expects a bool, not {enabled!r}")
        self._check_frozen()
        self._auto_loss_scaling = enabled
        return self

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

    def setMeanAccumulationAndReplicationReductionStrategy(self, mean_reduction_strategy):
        """When a Mean reduction divides: Running (a running mean of the accumulated
        gradients) or Post (the sum, divided once at the end); PostAndLoss is PopTorch's
        deprecated third. Unset, a training model picks PopTorch's default when it
        compiles: Running when the optimizer's accum_type is float16 (and not
        use_combined_accum), else Post. ipuofd accumulates in float32, where the two
        differ only by rounding (docs/python.md)."""
        try:
            strategy = enums.MeanReductionStrategy(mean_reduction_strategy)
        except ValueError:
            raise ValueError("setMeanAccumulationAndReplicationReductionStrategy expects "
                             "poptorch.MeanReductionStrategy.Running, Post or PostAndLoss, "
                             f"not {mean_reduction_strategy!r}") from None
        self.set(meanAccumulationAndReplicationReductionStrategy=strategy)
        object.__setattr__(self, "_strategy_given", True)
        return self

    @staticmethod
    def _needs_running(optimizer):
        """Whether optimizer's gradient accumulator is float16 (accum_type, without
        use_combined_accum): PopTorch then takes the Running mean (a Post mean of a float16
        sum may overflow), whatever strategy was set."""
        return (getattr(optimizer, "accum_type", None) in (torch.float16, torch.half)
                and not getattr(optimizer, "use_combined_accum", None))

    def _default_strategy(self, optimizer):
        """PopTorch's choice for a training model with optimizer: Running for a float16
        accum_type without use_combined_accum (even over a strategy set, as PopTorch's
        trainingModel does), else the strategy set, else Post. Called at the compile."""
        running = self._needs_running(optimizer)
        if self._strategy_given and not running:
            return
        self._values["meanAccumulationAndReplicationReductionStrategy"] = \
            enums.MeanReductionStrategy.Running if running else \
            enums.MeanReductionStrategy.Post

    def setConvolutionDithering(self, enabled):
        """Kept (PopART's convolutionOptions enableConvDithering); no effect on ipuofd."""
        _warn_ignored("setConvolutionDithering")
        self._check_frozen()
        self._popart()._record("convolutionOptions", {"enableConvDithering": enabled},
                               merge=True)
        return self


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
    def __init__(self):
        super().__init__(stochastic_rounding=False, partials_type=torch.float32)

    def enableStochasticRounding(self, enabled):
        """float16 results (op outputs and weight updates) round up with probability equal
        to their fraction of a float16 step, from the random seed's generator
        (sim/README.md "Dtypes"); float32 models are unaffected."""
        if not isinstance(enabled, bool):
            raise ValueError(f"enableStochasticRounding expects a bool, not {enabled!r}")
        return self.set(stochastic_rounding=enabled)

    def setPartialsType(self, dtype):
        """The accumulators of float16 MatMul and Gemm (Linear): torch.float (default,
        exact float32 sums) or torch.half (float16, emulated in chunks of 16 products:
        sim/README.md "Dtypes"). Conv and reductions keep float32 partials. Kept as PopTorch
        keeps it too (partialsTypeMatMuls, convolutionOptions[partialsType])."""
        if dtype in (torch.float, torch.float32):
            type_str = "float"
        elif dtype in (torch.half, torch.float16):
            type_str = "half"
        else:
            raise ValueError(f"setPartialsType expects torch.float or torch.half, not "
                             f"{dtype!r}")
        self.set(partials_type=dtype)
        self._popart()._record("partialsTypeMatMuls", type_str)
        self._popart()._record("convolutionOptions", {"partialsType": type_str}, merge=True)
        return self


class _JitOptions(_OptionsDict):
    def __init__(self):
        super().__init__(trace_model=False)


class Options(_OptionsDict):
    """poptorch.Options: how a model is compiled and run."""

    def __init__(self):
        super().__init__(
            replication_factor=1, input_group_size=1,
            input_cgt=enums.CommGroupType.Consecutive, device_iterations=1, log_dir=".",
            auto_round_num_ipus=False, output_mode=enums.OutputMode.Default,
            output_return_period=1, connection_type=enums.ConnectionType.Always,
            random_seed=None, execution_strategy=None, broadcast_buffers=True,
            max_repeat_logs=4, sync_pattern=enums.SyncPattern.Full,
            available_memory_proportion={})
        popart = _PopartOptions()
        object.__setattr__(self, "_Popart", popart)
        object.__setattr__(self, "_popart_options", popart)
        object.__setattr__(self, "Training", _TrainingOptions())
        object.__setattr__(self, "Distributed", _DistributedOptions())
        object.__setattr__(self, "TensorLocations", _TensorLocationOptions())
        object.__setattr__(self, "Precision", _PrecisionOptions())
        object.__setattr__(self, "Jit", _JitOptions())
        for g in (self.Training, self.Precision):
            object.__setattr__(g, "_popart_options", popart)
        if os.environ.get("POPTORCH_DEFAULT_OPTIONS"):
            self.from_json(os.environ["POPTORCH_DEFAULT_OPTIONS"])

    _GROUPS = ("Training", "Distributed", "TensorLocations", "Precision", "Jit", "_Popart")

    def _freeze(self):
        """Called when a model compiles with these options: later changes raise."""
        self._frozen = True
        for g in self._GROUPS:
            getattr(self, g)._frozen = True

    def relaxOptimizerAttributesChecks(self, relaxed=True):
        """PopTorch's: attributes added to an optimizer after the model first took it are
        reported at DEBUG rather than WARN (poptorch.optim's log, optim/_log.py)."""
        self._check_frozen()
        self._relax_optimizer_checks = bool(relaxed)
        return self

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

    def syncPattern(self, sync_pattern):
        """Full, SinglePipeline or ReplicaAndLadder: kept (sync_pattern); ipuofd's IPUs
        synchronise as with Full whatever it is (warned once)."""
        if not isinstance(sync_pattern, enums.SyncPattern):
            raise ValueError("syncPattern expects a poptorch.SyncPattern, not "
                             f"{sync_pattern!r}")
        _warn_ignored("syncPattern")
        return self.set(sync_pattern=sync_pattern)

    def setAvailableMemoryProportion(self, available_memory_proportion):
        """{"IPU0": proportion, ...}: per IPU index (available_memory_proportion), the
        share of its memory a convolution or matmul may take for temporaries
        (docs/memory.md)."""
        if not isinstance(available_memory_proportion, dict):
            raise ValueError("setAvailableMemoryProportion expects a dict such as "
                             "{'IPU0': 0.6}")
        kept = {}
        for k, v in available_memory_proportion.items():
            if not (isinstance(k, str) and k.startswith("IPU") and k[3:].isdigit()):
                raise ValueError(f"setAvailableMemoryProportion: '{k}' is not an IPU name "
                                 "('IPU0', 'IPU1', ...)")
            if not isinstance(v, (int, float)) or not 0 < v <= 1:
                raise ValueError(f"setAvailableMemoryProportion: {k}'s proportion must be "
                                 f"in (0, 1], not {v!r}")
            kept[int(k[3:])] = float(v)
        return self.set(available_memory_proportion=kept)

    def modelName(self, name):
        """The model's name: the profiling report's subdirectory (default "inference" or
        "training")."""
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"modelName expects a non-empty name without '/', not {name!r}")
        return self.set(model_name=name)

    def enableExecutableCaching(self, path):
        """Kept as PopTorch keeps it (cachePath, enableEngineCaching); ipuofd's daemon
        caches executables itself, so it changes nothing (warned once)."""
        _warn_ignored("enableExecutableCaching")
        self._check_frozen()
        if path is None:
            self._Popart._record("enableEngineCaching", False)
        else:
            self._Popart._record("cachePath", str(path))
            self._Popart._record("enableEngineCaching", True)
        return self

    def enableSyntheticData(self, enabled):
        """Kept as PopTorch keeps it (syntheticDataMode 2 or 0); ipuofd always moves the
        real data (warned once), and its simulated clock charges no host I/O for it
        (docs/cost-model.md)."""
        if not isinstance(enabled, bool):
            raise ValueError(f"enableSyntheticData expects True or False, not {enabled!r}")
        _warn_ignored("enableSyntheticData")
        self._check_frozen()
        self._Popart._record("syntheticDataMode", 2 if enabled else 0)
        return self

    def disableModuleNamescope(self):
        """The compiled graph's names (the lowering's DEBUG lines, _debugGetPopartIR)
        without the module path ("Conv:0", not "layer1/0/Conv:0"), as PopTorch's."""
        return self.set(module_namescope_disabled=True)

    def useOfflineIpuTarget(self, ipu_version=2):
        """Compile only (ConnectionType.Never): running the model raises. ipu_version (1,
        2 or 21) is kept; the simulated IPUs are Mk2 whatever it is."""
        if ipu_version not in (1, 2, 21):
            raise ValueError("useOfflineIpuTarget expects ipu_version 1 (Mk1), 2 (Mk2) or "
                             f"21 (Mk2 with FP8), not {ipu_version!r}")
        self.connectionType(enums.ConnectionType.Never)
        return self.set(ipu_version=ipu_version)

    def loadFromFile(self, filepath):
        """Applies an options file: one call per line as it would follow "options." in
        Python (deviceIterations(4)); blank lines and # comments skipped. A line that is
        not Python raises ConfigFileError naming the line and file; the calls are made in
        order, so a later file overrides an earlier one's values only where it sets them."""
        with open(filepath) as f:
            lines = f.read().splitlines()
        cmds = ["options." + line.strip() for line in lines
                if line.strip() and not line.strip().startswith("#")]
        code = "\n".join(cmds)
        try:
            compiled = compile(code, os.path.basename(filepath), "exec")
        except SyntaxError as err:
            raise ConfigFileError(
                f"{type(err).__name__} at line {err.lineno} of "
                f"{os.path.basename(filepath)}: {err.msg}\n> {(err.text or '').rstrip()}") \
                from None
        exec(compiled, {"poptorch": _package, "options": self})  # noqa: S102 - the user's file
        return self

    def from_json(self, text):
        """Applies {"Group.method": value} pairs (a list value is several arguments; a
        string "EnumName.Member" naming one of poptorch.enums is that member)."""
        for key, value in json.loads(text).items():
            target = self
            *groups, method = key.split(".")
            for g in groups:
                target = getattr(target, g)
            args = value if isinstance(value, list) else [value]
            getattr(target, method)(*[_enum_from_string(a) for a in args])
        return self

    def clone(self):
        """An independent copy, not frozen."""
        c = copy.deepcopy(self)
        c._frozen = False
        for g in self._GROUPS:
            getattr(c, g)._frozen = False
        return c

    # execution_mode as PopTorch's backend numbers the strategies
    _EXECUTION_MODES = {"PipelinedExecution": 0, "ShardedExecution": 1,
                        "SerialPhasedExecution": 2, "ParallelPhasedExecution": 2}

    def toDict(self):
        """One flat dictionary, as PopTorch's: the strategy's execution_mode, the _Popart
        options, these options and those of Training, Distributed and TensorLocations
        (unset values, None, left out)."""
        strategy = self._execution_strategy
        d = {"execution_mode": self._EXECUTION_MODES.get(type(strategy).__name__, 0)}
        if d["execution_mode"] == 2:    # PopTorch's phased strategies' backendOptions
            d["separate_backward_phase"] = bool(getattr(strategy, "separate_backward",
                                                        False))
            d["tensors_liveness"] = int(getattr(strategy, "liveness",
                                                enums.Liveness.AlwaysLive).value)
            d["serial_phases_execution"] = type(strategy).__name__ == \
                "SerialPhasedExecution"
        d.update(self._Popart.options)
        for group in (self, self.Training, self.Distributed, self.TensorLocations):
            for k, v in group._values.items():
                if v is None or k == "execution_strategy":
                    continue
                if k == "profiling_dir":
                    d["engineOptions"] = {**d.get("engineOptions", {}),
                                          "autoReport.all": "true",
                                          "autoReport.directory": v}
                    continue
                d[self._BACKEND_NAMES.get(k, k)] = copy.deepcopy(v)
        return d

    # this package's keys -> the names PopTorch's backend has for them
    _BACKEND_NAMES = {"log_cycle_count": "instrumentWithHardwareCycleCounter",
                      "updatable_named_buffers": "updatableNamedBuffers"}

    def __repr__(self):
        """Options(values..., Distributed=..., Jit=..., Precision=..., TensorLocations=...,
        Training=..., _Popart=...): every value, so two Options print alike exactly when
        they hold the same settings."""
        items = [f"{k}={v!r}" for k, v in self._values.items()]
        items += [f"{g}={getattr(self, g)!r}" for g in sorted(self._GROUPS)]
        return "Options(" + ", ".join(items) + ")"


def _enum_from_string(value):
    """"ConnectionType.OnDemand" -> enums.ConnectionType.OnDemand; anything else as is."""
    if isinstance(value, str) and value.count(".") == 1:
        kind, member = value.split(".")
        cls = getattr(enums, kind, None)
        if isinstance(cls, type) and issubclass(cls, enum.Enum) and member in cls.__members__:
            return cls[member]
    return value


def _install_ignored():
    """Makes every entry of _IGNORED and _RECORDED a method of its class."""
    for cls_name, names in _IGNORED.items():
        for name in names:
            setattr(globals()[cls_name], name, _ignored_method(name))
    for (cls_name, name), record in _RECORDED.items():
        setattr(globals()[cls_name], name, _ignored_method(name, record))


_install_ignored()
