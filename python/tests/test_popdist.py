"""popdist (python/popdist): the getters read poprun's variables by the rule
libipuof-client's ipuof_process_env() follows, popdist.poptorch.Options sets the local
replicas and the instance from them and refuses what PopDist refuses."""
import pytest

import popdist
import popdist.poptorch
from ipuof import _lib

ALL = ("POPDIST_NUM_TOTAL_REPLICAS", "POPDIST_NUM_IPUS_PER_REPLICA", "POPDIST_NUM_LOCAL_REPLICAS",
       "POPDIST_REPLICA_INDEX_OFFSET", "POPDIST_LOCAL_INSTANCE_INDEX",
       "POPDIST_UNIFORM_REPLICAS_PER_INSTANCE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "IPUOF_PROCESS_ID", "IPUOF_NUM_PROCESSES", "POPTORCH_DEFAULT_OPTIONS")


@pytest.fixture
def env(monkeypatch):
    for v in ALL:
        monkeypatch.delenv(v, raising=False)

    def put(**kv):
        for k, v in kv.items():
            monkeypatch.setenv(k, str(v))
    return put


def poprun(put, total, local, offset, ipr=1):
    put(POPDIST_NUM_TOTAL_REPLICAS=total, POPDIST_NUM_LOCAL_REPLICAS=local,
        POPDIST_REPLICA_INDEX_OFFSET=offset, POPDIST_NUM_IPUS_PER_REPLICA=ipr,
        POPDIST_LOCAL_INSTANCE_INDEX=offset // local, POPDIST_UNIFORM_REPLICAS_PER_INSTANCE=1)


def c_process_env():
    pid, num = _lib.ffi.new("unsigned *"), _lib.ffi.new("unsigned *")
    err = _lib.ffi.new("char[512]")
    rc = _lib.lib.ipuof_process_env(pid, num, err, len(err))
    return (pid[0], num[0]) if rc == 0 else _lib.string(err)


def test_without_poprun(env):
    assert not popdist.isPopdistEnvSet()
    assert (popdist.getNumTotalReplicas(), popdist.getNumInstances(), popdist.getInstanceIndex(),
            popdist.getNumLocalReplicas(), popdist.getReplicaIndexOffset(),
            popdist.getNumIpusPerReplica(), popdist.getDeviceId()) == (1, 1, 0, 1, 0, 1, 0)
    popdist.init()


def test_getters_under_poprun(env):
    # poprun --num-instances 2 --num-replicas 4 --ipus-per-replica 2: instance 1.
    poprun(env, 4, 2, 2, 2)
    env(OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=2)
    assert popdist.isPopdistEnvSet()
    assert popdist.getNumTotalReplicas() == 4
    assert popdist.getNumLocalReplicas() == 2
    assert popdist.getReplicaIndexOffset() == 2
    assert popdist.getNumIpusPerReplica() == 2
    assert popdist.getNumInstances() == 2 and popdist.getInstanceIndex() == 1
    assert popdist.getLocalInstanceIndex() == 1 and popdist.isUniformReplicasPerInstance()
    popdist.init()


@pytest.mark.parametrize("total,local,offset,ipr,want", [
    # An 8-IPU partition numbered as gc-info does: 0-7 single, 8-11 pairs, 12-13 quads, 14.
    (8, 1, 0, 1, 0), (8, 1, 5, 1, 5), (8, 2, 2, 1, 9), (8, 4, 4, 1, 13), (8, 8, 0, 1, 14),
    (4, 1, 3, 2, 11), (4, 2, 2, 2, 13), (2, 1, 1, 1, 1), (4, 2, 0, 1, 4)])
def test_device_id(env, total, local, offset, ipr, want):
    poprun(env, total, local, offset, ipr)
    assert popdist.getDeviceId() == want


@pytest.mark.parametrize("kv,want", [
    ({"POPDIST_NUM_TOTAL_REPLICAS": "four"}, "POPDIST_NUM_TOTAL_REPLICAS is 'four'; it must be a "
     "whole number 1 to 1000000"),
    ({"POPDIST_NUM_TOTAL_REPLICAS": "4", "POPDIST_NUM_LOCAL_REPLICAS": "3"},
     "POPDIST_NUM_LOCAL_REPLICAS (3) must divide POPDIST_NUM_TOTAL_REPLICAS (4)"),
    ({"POPDIST_NUM_TOTAL_REPLICAS": "4", "POPDIST_NUM_LOCAL_REPLICAS": "2",
      "POPDIST_REPLICA_INDEX_OFFSET": "4"}, "POPDIST_REPLICA_INDEX_OFFSET (4) must be a multiple"),
    ({"POPDIST_NUM_IPUS_PER_REPLICA": "0"}, "POPDIST_NUM_IPUS_PER_REPLICA is '0'"),
    ({"OMPI_COMM_WORLD_RANK": "1"}, "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"),
])
def test_bad_environment(env, kv, want):
    env(**kv)
    with pytest.raises(RuntimeError, match=None) as e:
        popdist.init()
    assert want in str(e.value)


@pytest.mark.parametrize("kv", [
    {}, {"POPDIST_NUM_TOTAL_REPLICAS": 8, "POPDIST_NUM_LOCAL_REPLICAS": 2,
         "POPDIST_REPLICA_INDEX_OFFSET": 6},
    {"POPDIST_NUM_TOTAL_REPLICAS": 8, "POPDIST_NUM_LOCAL_REPLICAS": 8,
     "POPDIST_REPLICA_INDEX_OFFSET": 0},
    {"POPDIST_NUM_TOTAL_REPLICAS": 4, "POPDIST_NUM_LOCAL_REPLICAS": 2,
     "POPDIST_REPLICA_INDEX_OFFSET": 2, "OMPI_COMM_WORLD_RANK": 1, "OMPI_COMM_WORLD_SIZE": 2},
    {"OMPI_COMM_WORLD_RANK": 2, "OMPI_COMM_WORLD_SIZE": 3},
    {"IPUOF_PROCESS_ID": 1, "IPUOF_NUM_PROCESSES": 4, "OMPI_COMM_WORLD_RANK": 0,
     "OMPI_COMM_WORLD_SIZE": 1},
])
def test_same_instance_as_the_c_library(env, kv):
    env(**kv)
    assert c_process_env() == (popdist.getInstanceIndex(), popdist.getNumInstances())


def test_options(env):
    poprun(env, 4, 2, 2)
    env(OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=2)
    o = popdist.poptorch.Options()
    assert o.replication_factor == 2
    assert (o.Distributed.processId, o.Distributed.numProcesses) == (1, 2)
    o.deviceIterations(3)  # the rest of poptorch.Options is untouched
    assert o.device_iterations == 3
    for call, name in ((lambda: o.useIpuId(1), "useIpuId"),
                       (lambda: o.replicationFactor(4), "replicationFactor"),
                       (lambda: o.Distributed.configureProcessId(0, 1),
                        "Distributed.configureProcessId"),
                       (lambda: o.Distributed.setEnvVarNames("A", "B"),
                        "Distributed.setEnvVarNames"),
                       (lambda: o.Distributed.disable(), "Distributed.disable")):
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value).startswith(f"Cannot call `{name}` with popdist.poptorch.Options")
    c = o.clone()
    assert type(c) is popdist.poptorch.Options and c.replication_factor == 2
    with pytest.raises(RuntimeError, match=r"ipus_per_replica=4\) differs from poprun's "
                       "--ipus-per-replica 1"):
        popdist.poptorch.Options(ipus_per_replica=4)
    assert popdist.poptorch.Options(ipus_per_replica=1).replication_factor == 2
