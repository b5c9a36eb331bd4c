"""The PopART session options PopTorch's Options pass to its backend, by name and kind, and
the check PopTorch's poptorch_core._validateOptions makes of an Options.toDict().

ipuofd has no PopART: Options._Popart.set(name, value) records the value (toDict, repr,
copies), warns once that it changes nothing, and _validateOptions refuses what PopTorch's
backend refuses (a name it does not know, a value of a type it cannot take) with its texts.
The debug lines _validateOptions logs ("poptorch.Options set X to value Y", "added V to X",
"set X[K] to V"), which a compile logs too (log_options), report what the dictionary holds,
as PopTorch's backend logs them; they do not claim an effect (the one-time warning of _Popart.set says there is none).
"""
import copy
import warnings

from ._logging import logger
from .errors import Error

# The names an options call warned about, once per process (options.py shares the set).
_warned = set()

_BOOL = """auto_round_num_ipus use_model serial_phases_execution separate_backward_phase
broadcast_buffers enableExplicitIR enableInplaceAmbiguityChecking
enableLoadAndOffloadRNGState batchSerializationSettings.concatOnVirtualGraphChange
batchSerializationSettings.concatOnExecutionPhaseChange
batchSerializationSettings.concatOnPipelineStageChange strictOpVersions opxAliasChecking
opxModifyChecking dotOpNames exportPoplarComputationGraph exportPoplarVertexGraph
separateCallOpPdfs enableOutlining enableOutliningCopyCostPruning rearrangeAnchorsOnHost
rearrangeStreamsOnHost enablePrefetchDatastreams enableNonStableSoftmax
enableReplicatedGraphs enableGradientAccumulation instrumentWithHardwareCycleCounter
enablePipelining disableGradAccumulationTensorStreams disableOptimizerStateTensorStreams
compileEngine constantWeights enableEngineCaching enableMergeExchange
enableFloatingPointChecks enableStochasticRounding ensureFp32LossScaleTensor
explicitRecomputation enableExplicitMainLoops useHostCopyOps aliasZeroCopy delayVarUpdates
enableFullyConnectedPass enableSerializedMatmuls enableStableNorm decomposeGradSum
enableDistributedReplicatedGraphs groupHostSync automaticLossScalingSettings.enabled
enableSupportedDataTypeCasting groupNormStridedChannelGrouping
scheduleNonWeightUpdateGradientConsumersEarly
replicatedCollectivesSettings.prepareScheduleForMergingCollectives
replicatedCollectivesSettings.mergeAllReduceCollectives""".split()

_UINT64 = """device_iterations num_distributed_processes distributed_process_id ipu_version
ipu_id gradient_accumulation output_return_period replication_factor input_group_size
input_cgt execution_mode tensors_liveness output_mode connection_type
accumulateOuterFragmentSettings.schedule max_repeat_logs
accumulation_and_replication_reduction_type sync_pattern random_seed
autodiffSettings.stitchStrategy batchSerializationSettings.transformContext
batchSerializationSettings.method batchSerializationSettings.batchSchedule
autoRecomputation mergeVarUpdate virtualGraphMode syntheticDataMode
subgraphCopyingStrategy accumulationAndReplicationReductionType
meanAccumulationAndReplicationReductionStrategy
automaticLossScalingSettings.gradientTensorTrackingMethod executionPhaseSettings.phases
executionPhaseSettings.stages batchSerializationSettings.factor firstDotOp finalDotOp
numIOTiles mergeVarUpdateMemThreshold looseThresholdAtPeak accumulationFactor
swapLimitScheduler globalReplicationFactor globalReplicaOffset defaultBufferingDepth
defaultPrefetchBufferingDepth compilationProgressTotal
transitiveClosureOptimizationThreshold automaticLossScalingSettings.updatePeriod
patterns_level""".split()

_DOUBLE = """outlineSequenceBreakCost outlineThreshold timeLimitScheduler
automaticLossScalingSettings.thresholdUpperCountProportion
automaticLossScalingSettings.binEdgeLocation""".split()

_STRING = """log_dir saveInitializersToFile logDir model_name cachePath partialsTypeMatMuls
customCodeletCompileFlags serializedPoprithmsShiftGraphsDir kahnTieBreaker""".split()

_CONTAINER = """accumulateOuterFragmentSettings.excludedVirtualGraphs dotChecks
hardwareInstrumentations customCodelets engineOptions reportOptions convolutionOptions
matmulOptions lstmOptions gclOptions updatableNamedBuffers""".split()

# Dictionaries the backend reads by their own rules (not "name[key] = value" pairs).
# Options the daemon uses (not warned about as having no effect): docs/memory.md.
_USED = ("autoRecomputation", "explicitRecomputation",
         "groupNormStridedChannelGrouping")  # symbolics_extra.strided_group_norm

_SPECIAL_DICTS = ("available_memory_proportion", "patterns", "location_activation",
                  "location_weight", "location_optimizer", "location_accumulator")

# Keys handled in Python only (PopTorch skips them too).
_SKIPPED = ("anchored_tensors", "compilation_progress_bar_fn", "patterns_level",
            "module_namescope_disabled")

KNOWN = set(_BOOL) | set(_UINT64) | set(_DOUBLE) | set(_STRING) | set(_CONTAINER)


def _text(v):
    """A value as PopTorch's C++ logging prints it (bools as true/false)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def validate(options_dict):
    """Checks a flat dictionary made by Options.toDict(), as PopTorch's backend does when it
    reads one: Error "Unknown value type T for option N" for a value that is not a bool,
    number, string, list/tuple/set or dict; Error "Unknown <kind> option N" for a name the
    backend has no option of that kind for. Logs each value at debug level."""
    if not isinstance(options_dict, dict):
        raise Error(f"_validateOptions takes Options.toDict(), not a "
                    f"{type(options_dict).__name__}")
    _read(options_dict, _check)


def log_options(options_dict):
    """The debug lines PopTorch's backend logs as a compile reads the options (validate's
    lines, without its checks: a compile of this package does not refuse the _Popart
    names it keeps and ignores)."""
    _read(options_dict, lambda name, kind, names: None)


def _read(options_dict, check):
    """Each option of options_dict checked by check(name, kind, names), then logged."""
    for name, value in options_dict.items():
        if name in _SKIPPED or callable(value):
            continue
        if isinstance(value, bool):
            check(name, "bool", _BOOL)
            logger.debug("poptorch.Options set %s to value %s", name, _text(value))
        elif isinstance(value, float):
            check(name, "floating point", _DOUBLE)
            logger.debug("poptorch.Options set %s to value %s", name, value)
        elif isinstance(value, int):
            check(name, "uint64", _UINT64)
            logger.debug("poptorch.Options set %s to value %s", name, int(value))
        elif isinstance(value, str):
            check(name, "string", _STRING)
            logger.debug("poptorch.Options set %s to value %s", name, value)
        elif isinstance(value, (list, tuple, set, frozenset)):
            check(name, "set / vector", _CONTAINER)
            for v in value:
                logger.debug("poptorch.Options added %s to %s", _text(v), name)
        elif isinstance(value, dict):
            if name in _SPECIAL_DICTS:
                continue
            check(name, "map", _CONTAINER)
            for k, v in value.items():
                logger.debug("poptorch.Options set %s[%s] to %s", name, k, _text(v))
        elif check is _check:
            raise Error(f"Unknown value type {type(value).__name__} for option {name}: "
                        "an option takes a bool, an int, a float, a str, a list/set of "
                        "str or a dict of str")


def _check(name, kind, names):
    if name not in names:
        raise Error(f"Unknown {kind} option {name}" +
                    (f" (PopART has {name} as another kind of option)" if name in KNOWN
                     else ""))


class _PopartOptions:
    """PopART session options (poptorch.Options._Popart): ipuofd has no PopART, so
    set(key, value) keeps the value in .options (printed, copied, in toDict(), checked by
    poptorch_core._validateOptions) and warns once per key that it changes nothing."""

    def __init__(self):
        self._frozen = False
        self.options = {}

    def __deepcopy__(self, memo):
        c = _PopartOptions()
        memo[id(self)] = c
        c.options = copy.deepcopy(self.options, memo)
        return c

    def _check_frozen(self):
        if self._frozen:
            raise Error("Can't modify frozen Options")

    def _record(self, key, value, merge=False):
        """Keeps value under key (merge: a dict updates the one kept)."""
        self._check_frozen()
        if merge and isinstance(self.options.get(key), dict):
            self.options[key] = {**self.options[key], **value}
        else:
            self.options[key] = value
        return self

    def set(self, key, value):
        if not isinstance(key, str):
            raise ValueError(f"_Popart.set expects the option's name as a str, not {key!r}")
        self._check_frozen()
        if ("_Popart.set", key) not in _warned and key not in _USED:
            _warned.add(("_Popart.set", key))
            warnings.warn(f"poptorch.Options._Popart.set({key!r}, ...) has no effect on "
                          "ipuofd; kept, not used (warned once)", stacklevel=2)
        return self._record(key, value)

    def setEngineOptions(self, engine_options):
        return self.set("engineOptions", engine_options)

    def setPatterns(self, patterns, level=2):
        if not isinstance(level, int) or not isinstance(patterns, dict):
            raise ValueError("setPatterns expects a dict of pattern names to bool and an "
                             "integer level")
        self.set("patterns_level", level)
        return self.set("patterns", patterns)

    def toDict(self):
        return dict(self.options)

    def __repr__(self):
        return "_PopartOptions(" + ", ".join(
            f"{k}={v!r}" for k, v in self.options.items()) + ")"
