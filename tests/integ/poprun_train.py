"""A PopTorch program written for PopRun, as Graphcore's examples are (reference 000's
listing: device iterations, replicas, gradient accumulation, one seed for every process,
a shuffled DataLoader): under poprun, popdist.poptorch.Options gives the replicas and the
instance; alone, it runs with REPLICAS replicas. It trains listing 5.2's model for CALLS
calls and prints, from instance 0 only, one JSON line with the weights. The same file runs
both ways unchanged; test_poprun.sh compares the weights.
Usage: python3 poprun_train.py [REPLICAS]"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python", "tests"))
import popdist  # noqa: E402
import popdist.poptorch  # noqa: E402
import poptorch  # noqa: E402
from models import ExampleDataset, ExampleModelWithLoss  # noqa: E402

CALLS = 3
if popdist.isPopdistEnvSet():
    opts = popdist.poptorch.Options()
else:
    opts = poptorch.Options()
    opts.replicationFactor(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
opts.deviceIterations(2)
opts.Training.gradientAccumulation(2)
opts.randomSeed(42)
loader = poptorch.DataLoader(opts, ExampleDataset(shape=[3, 2], length=1000), batch_size=2,
                             shuffle=True, drop_last=True)
torch.manual_seed(7)
model = ExampleModelWithLoss([3, 2], 2)
training = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.05))
for i, (data, labels) in enumerate(loader):
    if i == CALLS:
        break
    output, loss = training(data, labels)
if popdist.getInstanceIndex() == 0:
    print(json.dumps({"instances": popdist.getNumInstances(),
                      "replicas": opts.replication_factor * opts.Distributed.numProcesses,
                      "weight": model.fc.weight.tolist(), "bias": model.fc.bias.tolist()}),
          flush=True)
training.destroy()
