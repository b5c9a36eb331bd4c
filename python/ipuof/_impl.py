"""PopTorch's private `poptorch._impl` names that its published programs and tests reach
for (helpers such as `outputDevice()` in PopTorch's own test suite)."""


def isDispatchTracing():
    """False: PopTorch's dispatcher traces a model on its "ipu" device, so tensors made
    inside forward() then need `device="ipu"`; this package captures on the CPU with
    torch.onnx.export, where a tensor made inside forward() belongs on the default
    device."""
    return False
