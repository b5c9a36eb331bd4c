"""popdist: what an instance launched by poprun reads about its place in the job.

PopRun (tools/poprun.c) starts each instance under mpirun with the variables

    POPDIST_NUM_TOTAL_REPLICAS       replicas of all instances together
    POPDIST_NUM_IPUS_PER_REPLICA     IPUs one replica spans
    POPDIST_NUM_LOCAL_REPLICAS       replicas of this instance
    POPDIST_REPLICA_INDEX_OFFSET     the global index of this instance's first replica
    POPDIST_LOCAL_INSTANCE_INDEX     this instance's index among those on its host
    POPDIST_UNIFORM_REPLICAS_PER_INSTANCE   1: every instance has as many replicas

and Open MPI's OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE. The functions here read them by
the rule libipuof-client's ipuof_process_env() follows (IPUOF_PROCESS_ID /
IPUOF_NUM_PROCESSES first, then Open MPI's, then the instance PopRun's replica offset
implies), so Python and the library always agree on which instance this is
(python/tests/test_popdist.py checks them against each other). Without poprun every
function answers as for one instance with one replica of one IPU.

A variable that is set but is not a whole number, or numbers that contradict each other
(an offset beyond the total, local replicas that do not divide it), raise RuntimeError
naming the variable and what is wrong.
"""
import os

__all__ = ["isPopdistEnvSet", "getNumTotalReplicas", "getNumInstances", "getInstanceIndex",
           "getNumLocalReplicas", "getReplicaIndexOffset", "getNumIpusPerReplica",
           "getLocalInstanceIndex", "getDeviceId", "init", "isUniformReplicasPerInstance"]

_VARS = ("POPDIST_NUM_TOTAL_REPLICAS", "POPDIST_NUM_IPUS_PER_REPLICA",
         "POPDIST_NUM_LOCAL_REPLICAS", "POPDIST_REPLICA_INDEX_OFFSET")


def _num(name, default, minimum=0):
    v = os.environ.get(name, "")
    if v == "":
        return default
    if not v.isdigit() or int(v) > 1000000 or int(v) < minimum:
        raise RuntimeError(f"{name} is {v!r}; it must be a whole number {minimum} to 1000000 "
                           "(poprun sets it)")
    return int(v)


def isPopdistEnvSet():
    """True when the program was launched by poprun (its POPDIST_* variables are set)."""
    return all(os.environ.get(v, "") != "" for v in _VARS)


def getNumTotalReplicas():
    """Replicas of all instances together (poprun --num-replicas); 1 without poprun."""
    return _num("POPDIST_NUM_TOTAL_REPLICAS", 1, 1)


def getNumLocalReplicas():
    """Replicas of this instance; 1 without poprun."""
    n = _num("POPDIST_NUM_LOCAL_REPLICAS", 1, 1)
    total = getNumTotalReplicas()
    if total % n:
        raise RuntimeError(f"POPDIST_NUM_LOCAL_REPLICAS ({n}) must divide "
                           f"POPDIST_NUM_TOTAL_REPLICAS ({total})")
    return n


def getReplicaIndexOffset():
    """The global index of this instance's first replica; 0 without poprun."""
    off = _num("POPDIST_REPLICA_INDEX_OFFSET", 0)
    local, total = getNumLocalReplicas(), getNumTotalReplicas()
    if off % local or off >= total:
        raise RuntimeError(f"POPDIST_REPLICA_INDEX_OFFSET ({off}) must be a multiple of "
                           f"POPDIST_NUM_LOCAL_REPLICAS ({local}) below "
                           f"POPDIST_NUM_TOTAL_REPLICAS ({total})")
    return off


def getNumIpusPerReplica():
    """IPUs one replica spans (poprun --ipus-per-replica); 1 without poprun."""
    return _num("POPDIST_NUM_IPUS_PER_REPLICA", 1, 1)


def getLocalInstanceIndex():
    """This instance's index among the instances on its host; 0 without poprun."""
    return _num("POPDIST_LOCAL_INSTANCE_INDEX", 0)


def isUniformReplicasPerInstance():
    """True when every instance has the same number of replicas (poprun's only layout)."""
    return _num("POPDIST_UNIFORM_REPLICAS_PER_INSTANCE", 1) == 1


def _pair(id_var, count_var):
    a, b = os.environ.get(id_var, ""), os.environ.get(count_var, "")
    if a == "" and b == "":
        return None
    if a == "" or b == "":
        raise RuntimeError(f"{id_var if a else count_var} is set but "
                           f"{count_var if a else id_var} is not; set both")
    i, n = _num(id_var, 0), _num(count_var, 1, 1)
    if i >= n:
        raise RuntimeError(f"process id {i} is out of range for {n} processes (0..{n - 1})")
    return i, n


def _instance():
    """(index, count) by libipuof-client's rule (ipuof_process_env)."""
    for id_var, count_var in (("IPUOF_PROCESS_ID", "IPUOF_NUM_PROCESSES"),
                              ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")):
        got = _pair(id_var, count_var)
        if got is not None:
            return got
    if os.environ.get("POPDIST_REPLICA_INDEX_OFFSET", "") == "" and \
            os.environ.get("POPDIST_NUM_TOTAL_REPLICAS", "") == "":
        return 0, 1
    local = getNumLocalReplicas()
    return getReplicaIndexOffset() // local, getNumTotalReplicas() // local


def getNumInstances():
    """How many instances (host processes) the job has; 1 without poprun."""
    return _instance()[1]


def getInstanceIndex():
    """This instance's index, 0 .. getNumInstances() - 1; 0 without poprun."""
    return _instance()[0]


def getDeviceId(ipus_per_replica=None):
    """The id of the Multi-IPU device made of this instance's IPUs in the partition, numbered
    as gc-info numbers them: single IPUs 0 .. N-1, then the pairs, the quads, ... of an
    N-IPU partition (N the total replicas times IPUs per replica, rounded up to a power of
    two). ipuofd attaches a job's partition by its name, so PopTorch programs do not need
    it; it is kept for programs that print or check it."""
    ipr = getNumIpusPerReplica() if ipus_per_replica is None else int(ipus_per_replica)
    if ipr < 1:
        raise ValueError(f"ipus_per_replica must be at least 1, not {ipus_per_replica!r}")

    def pow2(n):
        p = 1
        while p < n:
            p <<= 1
        return p

    size = pow2(getNumLocalReplicas() * ipr)
    total = pow2(getNumTotalReplicas() * ipr)
    first = getReplicaIndexOffset() * ipr
    base, group = 0, 1
    while group < size:
        base += total // group
        group <<= 1
    return base + first // size


def init():
    """Checks the environment poprun set (every variable a whole number, and consistent);
    raises RuntimeError naming what is wrong. The instances need no other set-up here:
    ipuofd's job of several processes joins them when they attach."""
    getNumIpusPerReplica()
    getReplicaIndexOffset()
    getLocalInstanceIndex()
    _instance()


def __getattr__(name):
    # popdist.poptorch without `import popdist.poptorch`, as programs written for PopDist
    # use it; imported on first use so that popdist alone never imports torch.
    if name == "poptorch":
        import importlib
        return importlib.import_module(__name__ + ".poptorch")
    raise AttributeError(f"module 'popdist' has no attribute '{name}'")
