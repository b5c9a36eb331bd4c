"""The torch.onnx side of the package: every symbolic it registers, symbolics.py's (the
helpers and the symbolics of PyTorch's own ops) and those of the modules built on its
helpers (extra.py, more.py, bag.py, maths.py). register() lives here, apart from
symbolics.py, so that the extensions import symbolics.py and it imports none of them (no
import circle: tools/py_cycles.py)."""
import torch

from . import bag, extra, maths, more, symbolics


def register():
    """Registers every symbolic for symbolics.OPSET (idempotent)."""
    symbolics.register()
    torch.onnx.register_custom_op_symbolic("aten::embedding_bag", bag.embedding_bag,
                                           symbolics.OPSET)
    for name, fn in extra.SYMBOLICS + more.SYMBOLICS + maths.SYMBOLICS:
        torch.onnx.register_custom_op_symbolic("aten::" + name, fn, symbolics.OPSET)
