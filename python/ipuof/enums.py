"""PopTorch's enums, with PopTorch's values (python/enums.py of PopTorch)."""
import enum


class OutputMode(enum.IntEnum):
    """Which results of a call come back to the host, per output."""
    Final = 0
    EveryN = 1
    All = 2
    Sum = 3
    Default = 4


class ConnectionType(enum.IntEnum):
    """When the IPUs are attached: at compile (Always), at the first run (OnDemand) or
    never (offline compilation: running raises)."""
    Always = 0
    OnDemand = 1
    Never = 2


class ReductionType(enum.IntEnum):
    """How gradients of accumulation steps and replicas are reduced."""
    Sum = 0
    Mean = 1
    NoReduction = 2


class MeanReductionStrategy(enum.IntEnum):
    Running = 0
    Post = 1
    PostAndLoss = 2


class DataLoaderMode(enum.IntEnum):
    """poptorch.DataLoader's loading: in the caller's thread, in a background accessor, or
    in a background accessor that rebatches single samples."""
    Sync = 0
    Async = 1
    AsyncRebatched = 2


class SyncPattern(enum.IntEnum):
    Full = 0
    SinglePipeline = 1
    ReplicaAndLadder = 2


class CommGroupType(enum.IntEnum):
    All = 0
    Consecutive = 1
    Orthogonal = 2
    NoGrouping = 3


class AutoStage(enum.IntEnum):
    """How stages are numbered when blocks are not given stages explicitly."""
    SameAsIpu = 0
    AutoIncrement = 1


class Liveness(enum.IntEnum):
    AlwaysLive = 0
    OffChipAfterFwd = 1
    OffChipAfterFwdNoOverlap = 2
    OffChipAfterEachPhase = 3


class SharingStrategy(enum.IntEnum):
    SharedMemory = 0
    FileSystem = 1
    Fork = 2
    ForkServer = 3


class HalfFloatCastingBehavior(enum.IntEnum):
    """(PopTorch: deprecated, tracing only.) Kept for programs that name it."""
    FloatDowncastToHalf = 0
    HalfUpcastToFloat = 1
    Default = 2


class MatMulSerializationMode(enum.Enum):
    """Which dimension poptorch.serializedMatMul splits the product along."""
    InputChannels = "input_channels"
    ReducingDim = "reducing_dim"
    OutputChannels = "output_channels"
    Disabled = "none"


class OverlapMode(enum.Enum):
    """Whether host transfers overlap compute (IO tiles): no meaning on simulated IPUs,
    whose inputs arrive with the run."""
    NoOverlap = "no_overlap"
    OverlapAccumulationLoop = "overlap_accumulation_loop"
    OverlapDeviceIterationLoop = "overlap_device_iteration_loop"


class MultiConvPlanType(enum.IntEnum):
    """How poptorch.MultiConv plans its convolutions."""
    Parallel = 0
    Serial = 1


class VariableRetrievalMode(enum.IntEnum):
    """Which replica's value of a replica-grouped variable is read back."""
    OnePerGroup = 0
    AllReplicas = 2
