"""One process of the two-process jobs of test_distributed_*: under mpirun (no arguments)
the process id and count come from Open MPI's environment; with arguments "I N" the
program calls Distributed.configureProcessId(I, N) itself. Trains listing 5.2's model for
CALLS calls of 2 device iterations each on its share of the data and prints, as one JSON
line, the first value of each sample it was given (every call's batch) and, from process 0,
the weights."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import poptorch  # noqa: E402
from models import ExampleDataset, ExampleModelWithLoss  # noqa: E402

CALLS = 4
opts = poptorch.Options()
if len(sys.argv) == 3:
    opts.Distributed.configureProcessId(int(sys.argv[1]), int(sys.argv[2]))
opts.randomSeed(5)
opts.deviceIterations(2)
assert opts.Distributed.numProcesses == 2, "run me as two processes (mpirun -np 2, or I 2)"
loader = poptorch.DataLoader(opts, ExampleDataset([3, 2], 64), batch_size=4, shuffle=True)
torch.manual_seed(1)
model = ExampleModelWithLoss([3, 2], 2)
pm = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
rows = []
for i, (data, labels) in enumerate(loader):
    if i == CALLS:
        break
    pm(data, labels)
    rows.append(data[:, 0, 0].tolist())  # one value per sample: short lines under mpirun
out = {"process": opts.Distributed.processId, "rows": rows}
if opts.Distributed.processId == 0:
    out.update(weight=model.fc.weight.tolist(), bias=model.fc.bias.tolist())
print(json.dumps(out), flush=True)
pm.destroy()
