"""PopTorch's save / compileAndExport / load / loadExecutable.

The file (torch.save, so torch.load reads it) holds what rebuilds the model without
capturing it again: the compiled ONNX graph, how calls are bound and flattened, the
output kinds and placement, the options, whether it trains, and (export_model=True) the
torch module and its optimizer. Loading compiles the same graph again, without a capture:
the daemon answers an inference graph from its executable cache when it still holds it
(a hit is the same graph bytes and options; training executables are never cached, their
weights change), and a training model gets the module's weights written to the device.
"""
import torch

from . import _hostsync
from ..errors import Error

FORMAT = "ipuof-poptorch-executable"
VERSION = 1

# What compile() sets and a load restores.
_STATE = ("_names", "_call", "_half", "_sample", "_record", "_onnx", "_placement_opts",
          "_out_names", "_loss", "_compile_args", "_ipus", "_anchors")


def save(ex, filename, export_model=True):
    """Writes executor ex (compiled) to filename."""
    if ex._onnx is None:
        raise Error("save: the model has not been compiled: call it, compile() it or use "
                    "compileAndExport()")
    _hostsync.sync()
    if not ex._training and ex._uploaded_generation != _hostsync.generation[0]:
        ex._recapture()  # an inference graph holds the weights: take the current ones
    model = ex._user_model if export_model else None
    d = {"format": FORMAT, "version": VERSION, "training": ex._training,
         "options": ex._options.clone(), "state": {k: getattr(ex, k) for k in _STATE},
         "model": model, "optimizer": ex._optimizer if export_model else None}
    torch.save(d, filename)  # hooked modules pickle as their own class (_hostsync)


def _read(filename):
    try:
        d = torch.load(filename)
    except Exception as exc:  # noqa: B902 - whatever torch.load raises
        raise Error(f"poptorch.load: {filename} cannot be read: {exc}") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise Error(f"poptorch.load: {filename} is not a model saved by this package's "
                    "PoplarExecutor.save() or compileAndExport()")
    if d.get("version") != VERSION:
        raise Error(f"poptorch.load: {filename} has format version {d.get('version')}; "
                    f"this package reads version {VERSION}")
    return d


def install(ex, d):
    """Gives executor ex the compiled state of d (from _read) and, with a connection
    type of Always, compiles it on the device with the module's weights."""
    from .. import enums
    if d["training"] != ex._training:
        kind = "training" if d["training"] else "inference"
        raise Error(f"loadExecutable: the file holds a {kind} model; load it into a "
                    f"poptorch.{kind}Model")
    for k, v in d["state"].items():
        setattr(ex, k, v)
    ex._weights = dict(torch.nn.Module.state_dict(ex._user_model, keep_vars=True))
    ex._check_buffer_names()
    ex._options._freeze()
    if ex._options.connection_type == enums.ConnectionType.Always and \
            ex._record.n_graph() > 0:
        ex._compile_on_device()
        if ex._training:
            ex.copyWeightsToDevice()
