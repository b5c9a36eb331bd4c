"""A PopTorch program with BatchNormalization, for a partition spanning a Pod
(tests/integ/test_pod_netns.sh): under popdist's variables (POPDIST_*, IPUOF_PROCESS_ID /
IPUOF_NUM_PROCESSES, and IPUOF_POD_HOSTS naming the daemons) it runs as one instance of
the job; alone, with REPLICAS replicas. It trains Conv2d -> BatchNorm2d -> ReLU -> Linear
for 10 optimizer steps (5 calls of 2 device iterations) on one seeded shuffled DataLoader
and prints, from every instance, one JSON line with its instance index and every parameter
and buffer it reads back (copyWeightsToHost), so a test compares each process's whole state.
POD_TRAIN_GROUP="SIZE TYPE" sets inputReplicaGrouping(SIZE, CommGroupType.TYPE).
POD_TRAIN_LOAD=1: after the second call instance 0 (the only writer) loads the optimizer's
state back with its momentum buffers halved (optimizer.load_state_dict), which every
daemon's replicas must then use.
POD_TRAIN_CALLS=N makes it N calls over an endless loader (for a daemon killed mid-run):
a poptorch.RecoverableError is then printed as "RecoverableError <action>: <message>" and
the program exits 3.
Usage: python3 pod_train.py [REPLICAS]"""
import json
import os
import sys

import torch

import popdist  # noqa: E402
import popdist.poptorch  # noqa: E402
import poptorch  # noqa: E402


CALLS = int(os.environ.get("POD_TRAIN_CALLS", "5"))


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 400 if CALLS == 5 else 8 * CALLS * 4

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.rand(2, 4, 4, generator=g), int(i % 3)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 4 * 4, 3)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, labels):
        y = self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))
        return y, self.loss(y, labels)


if popdist.isPopdistEnvSet():
    opts = popdist.poptorch.Options()
else:
    opts = poptorch.Options()
    opts.replicationFactor(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
if os.environ.get("POD_TRAIN_GROUP"):  # "2 Consecutive": inputReplicaGrouping(2, ...)
    size, kind = os.environ["POD_TRAIN_GROUP"].split()
    opts.inputReplicaGrouping(int(size), getattr(poptorch.CommGroupType, kind))
opts.deviceIterations(2)
opts.randomSeed(42)
loader = poptorch.DataLoader(opts, Data(), batch_size=2, shuffle=True, drop_last=True)
torch.manual_seed(7)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
training = poptorch.trainingModel(model, opts, optimizer)
try:
    for i, (data, labels) in enumerate(loader):
        if i == CALLS:
            break
        training(data, labels)
        print(f"call {i} done", flush=True)
        if i == 1 and os.environ.get("POD_TRAIN_LOAD") and popdist.getInstanceIndex() == 0:
            sd = optimizer.state_dict()
            del sd["ipu_state"], sd["ipu_param"]  # the device's names would win
            for s in sd["state"].values():
                s["momentum_buffer"] = s["momentum_buffer"] * 0.5
            optimizer.load_state_dict(sd)
except poptorch.RecoverableError as e:
    print(f"RecoverableError {e.recovery_action}: {e.message}", flush=True)
    sys.exit(3)
training.copyWeightsToHost()
state = {k: v.flatten().tolist() for k, v in model.state_dict().items()
         if v.dtype == torch.float32}
print(json.dumps({"instance": popdist.getInstanceIndex(),
                  "instances": popdist.getNumInstances(),
                  "replicas": opts.replication_factor * opts.Distributed.numProcesses,
                  "state": state}), flush=True)
training.destroy()
