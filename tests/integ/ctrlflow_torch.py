#!/usr/bin/python3
"""Control flow and issue 19's scatter / max-reduction ops against PyTorch: one small model
per case, exported and stepped with SGD as layers_torch.py does (its export_case), for
build/tests/integ/drv_interop_layers to run on a real ipuofd:

- scripted_loop: a TorchScript loop (traced around it, the export keeps an ONNX Loop with a
  Constant trip count; the daemon unrolls it), 3 SGD steps;
- scripted_if: a TorchScript if on data (an ONNX If; the daemon computes both branches and
  selects with Where), taken both ways, 3 SGD steps;
- scatter (ScatterElements), scatter_add (opset 16's reduction add, duplicate indices),
  amax_amin (ReduceMax / ReduceMin and their gradients), one SGD step each.

A file of its own: TorchScript compiling at import changes the eager numerics of other
cases enough to move layers_torch.py's near-zero checks.
Usage: ctrlflow_torch.py OUTDIR
"""
import os
import sys

import torch

from layers_torch import Head, export_case


@torch.jit.script
def scripted_loop(h, n: int):
    for _ in range(n):
        h = torch.tanh(h) * 0.9 + 0.1
    return h


@torch.jit.script
def scripted_if(h):
    if bool(h.sum() > 0):
        y = h * 2.0
    else:
        y = h - 1.0
    return y


SCATTER_IDX = torch.tensor([[0, 5, 2], [1, 3, 7], [6, 0, 4], [2, 2, 2]])    # duplicates
SCATTER_IDX_DISTINCT = torch.tensor([[0, 5], [1, 3], [6, 0], [2, 7]])


def cases():
    """(name, opset, module, x shape, train steps)"""
    return [
        ("scripted_loop", 14, Head(lambda h: scripted_loop(h, 3)), (4, 6), 3),
        ("scripted_if", 14, Head(lambda h: scripted_if(h) + scripted_if(-h)), (4, 6), 3),
        ("scatter", 14, Head(lambda h: torch.scatter(h, 1, SCATTER_IDX_DISTINCT,
                                                     h[:, 4:6] * 2.0)), (4, 6), 1),
        ("scatter_add", 16, Head(lambda h: torch.scatter_add(h, 1, SCATTER_IDX, h[:, :3])),
         (4, 6), 1),
        ("amax_amin", 14, Head(lambda h: torch.amax(h, dim=1) + torch.amin(h, dim=0).sum()),
         (4, 6), 1),
    ]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    lines = []
    for name, opset, model, xshape, steps in cases():
        export_case(out, name, opset, model, xshape, steps)
        lines.append("%s train %d\n" % (name, steps))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("".join(lines))
    print("exported %d cases" % len(lines))


if __name__ == "__main__":
    main()
