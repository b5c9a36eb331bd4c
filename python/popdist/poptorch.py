"""popdist.poptorch.Options: poptorch.Options set from poprun's variables.

The local replicas (POPDIST_NUM_LOCAL_REPLICAS) become the replication factor and the
instance index and count become Distributed.configureProcessId, so the replicas of all
instances form one data-parallel model (reference 004). Calls that would contradict poprun
are refused, as PopDist's are: useIpuId, replicationFactor and every Distributed setter.
"""
import poptorch as _poptorch
from ipuof import options as _options

import popdist as _popdist


def _refused(name, why):
    def refuse(*args, **kwargs):
        raise RuntimeError(f"Cannot call `{name}` with popdist.poptorch.Options: {why}")
    return refuse


class _PopdistDistributed(_options._DistributedOptions):
    """The Distributed group of popdist.poptorch.Options: readable, never set by hand."""

    def __init__(self, process_id, num_processes):
        _options._OptionsDict.__init__(self, num_distributed_processes=num_processes,
                                       distributed_process_id=process_id)

    _why = "the instance index and count come from poprun (--num-instances)"
    configureProcessId = _refused("Distributed.configureProcessId", _why)
    setEnvVarNames = _refused("Distributed.setEnvVarNames", _why)
    disable = _refused("Distributed.disable", _why)

    def set(self, **kwargs):
        raise RuntimeError("Cannot set `Distributed` options with popdist.poptorch.Options: "
                           + self._why)


class Options(_poptorch.Options):
    """poptorch.Options for an instance launched by poprun. ipus_per_replica, when given,
    must be poprun's --ipus-per-replica (POPDIST_NUM_IPUS_PER_REPLICA): the partition
    poprun checked holds that many IPUs per replica."""

    def __init__(self, ipus_per_replica=None):
        super().__init__()
        _popdist.init()
        ipr = _popdist.getNumIpusPerReplica()
        if ipus_per_replica is not None and int(ipus_per_replica) != ipr:
            raise RuntimeError(f"popdist.poptorch.Options(ipus_per_replica={ipus_per_replica})"
                               f" differs from poprun's --ipus-per-replica {ipr} "
                               "(POPDIST_NUM_IPUS_PER_REPLICA): launch with "
                               f"--ipus-per-replica {ipus_per_replica}")
        object.__setattr__(self, "_ipus_per_replica", ipr)
        _poptorch.Options.replicationFactor(self, _popdist.getNumLocalReplicas())
        object.__setattr__(self, "Distributed", _PopdistDistributed(
            _popdist.getInstanceIndex(), _popdist.getNumInstances()))

    useIpuId = _refused("useIpuId", "the instance's IPUs are the partition poprun names")
    replicationFactor = _refused(
        "replicationFactor", "the local replicas come from poprun (--num-replicas / "
        "--num-instances: POPDIST_NUM_LOCAL_REPLICAS)")
