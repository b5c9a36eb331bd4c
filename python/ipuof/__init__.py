"""ipuof: a PopTorch-compatible package over libipuof-client. `import poptorch` gives the
same module, so PopTorch programs run against ipuofd (IPUOF_SERVER, or 127.0.0.1:50052)
unchanged."""
import sys as _sys

from . import export, optim
from ._lib import path as library_path
from . import _impl, _logging, ops, poptorch_core
from ._logging import logger, setLogLevel
from .ops import (CPU, MultiConv, NameScope, cond, custom_op, for_loop, ipu_print_tensor,
                  nop, recomputationCheckpoint, serializedMatMul, set_available_memory)
from .capture import ICustomArgParser, identity_loss, registerCustomArgParser
from .blocks import (BeginBlock, Block, BlockFunction, ParallelPhasedExecution, Phase,
                     PipelinedExecution,
                     SerialPhasedExecution, ShardedExecution, Stage, module_repr,
                     removeBlocks)
from .data import AsynchronousDataAccessor, DataLoader
from .enums import (AutoStage, CommGroupType, ConnectionType, DataLoaderMode,
                    HalfFloatCastingBehavior, Liveness, MatMulSerializationMode,
                    MeanReductionStrategy, MultiConvPlanType, OutputMode, OverlapMode,
                    ReductionType, SharingStrategy, SyncPattern, VariableRetrievalMode)
from .errors import Error, RecoverableError, UnrecoverableError
from .executor import PoplarExecutor, inferenceModel, load, trainingModel
from .options import ConfigFileError, Options, TensorLocationSettings
from . import options as _options

__version__ = "0.1.0"
_options._package = _sys.modules[__name__]
export.register()


def ipuHardwareIsAvailable(num_ipus=1):
    """True when an ipuofd answers at IPUOF_SERVER (or 127.0.0.1:50052) and serves at
    least num_ipus IPUs: its simulated IPUs are the hardware PopTorch programs run on, so
    programs (and Lightning) that use the IPU only when this is True use them."""
    from .executor._introspect import hardware_available
    return hardware_available(num_ipus)


def ipuHardwareVersion():
    """2: ipuofd simulates Mk2 IPUs (GC200); Error when no daemon serves IPUs."""
    from .executor._introspect import hardware_available
    if not hardware_available(1):
        raise Error("ipuHardwareVersion: no ipuofd serving IPUs answers at IPUOF_SERVER")
    return 2


def isRunningOnIpu():
    """True while the model's forward() is being captured for the IPU (the graph that
    runs there is the one this branch takes), False on the host, as in PopTorch."""
    return poptorch_core._dispatcher_active[0]


__all__ = ["AsynchronousDataAccessor", "AutoStage", "BeginBlock", "Block", "BlockFunction",
           "CommGroupType", "ConfigFileError", "ConnectionType", "DataLoader",
           "DataLoaderMode", "Error",
           "Liveness", "MeanReductionStrategy", "Options", "OutputMode",
           "ParallelPhasedExecution", "Phase",
           "PipelinedExecution", "PoplarExecutor", "RecoverableError", "ReductionType",
           "SerialPhasedExecution", "ShardedExecution", "SharingStrategy", "Stage",
           "SyncPattern", "HalfFloatCastingBehavior", "ICustomArgParser",
           "MatMulSerializationMode", "MultiConvPlanType", "OverlapMode",
           "VariableRetrievalMode", "logger", "poptorch_core", "registerCustomArgParser",
           "setLogLevel", "CPU", "MultiConv", "NameScope", "cond", "custom_op", "for_loop",
           "ipu_print_tensor", "nop", "recomputationCheckpoint", "serializedMatMul",
           "set_available_memory", "ops", "TensorLocationSettings", "UnrecoverableError",
           "identity_loss", "inferenceModel", "load", "ipuHardwareIsAvailable", "ipuHardwareVersion", "isRunningOnIpu",
           "optim",
           "library_path", "module_repr", "removeBlocks", "trainingModel"]
