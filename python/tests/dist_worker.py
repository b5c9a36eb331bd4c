"""One process of the two-process job of test_distributed (launched by mpirun: Open MPI's
OMPI_COMM_WORLD_RANK/SIZE give configureProcessId). Trains one call of listing 5.2's model
on its share of the data and prints the weights as JSON (process 0 only)."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import poptorch  # noqa: E402
from models import ExampleDataset, ExampleModelWithLoss  # noqa: E402

opts = poptorch.Options()
opts.randomSeed(5)
opts.deviceIterations(2)
assert opts.Distributed.numProcesses == 2, "run me under mpirun -np 2"
loader = poptorch.DataLoader(opts, ExampleDataset([3, 2], 64), batch_size=4, shuffle=True)
torch.manual_seed(1)
model = ExampleModelWithLoss([3, 2], 2)
pm = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
data, labels = next(iter(loader))
pm(data, labels)
if opts.Distributed.processId == 0:
    print(json.dumps({"weight": model.fc.weight.tolist(), "bias": model.fc.bias.tolist()}))
pm.destroy()
