"""Every symbolic the package registers with torch.onnx: export/symbolics.py's and those of the
extension modules built on its helpers (symbolics_extra, symbolics_ops, symbolics_bag,
symbolics_math). Apart from export/symbolics.py so that the extensions import it and it imports
none of them (no import circle: tools/py_cycles.py)."""
import torch

from . import (symbolics, bag as symbolics_bag, extra as symbolics_extra,
               maths as symbolics_math, more as symbolics_ops)


def register():
    """Registers every symbolic for symbolics.OPSET (idempotent)."""
    symbolics.register()
    torch.onnx.register_custom_op_symbolic("aten::embedding_bag", symbolics_bag.embedding_bag,
                                           symbolics.OPSET)
    for name, fn in symbolics_extra.SYMBOLICS + symbolics_ops.SYMBOLICS + symbolics_math.SYMBOLICS:
        torch.onnx.register_custom_op_symbolic("aten::" + name, fn, symbolics.OPSET)
