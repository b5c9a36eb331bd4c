"""Host copies of weights a training model trains on the device.

A training model leaves the host module's weights stale after each call. Reading them
(an attribute, state_dict(), named_parameters(), named_buffers()) first copies every stale
training model's weights back, as PopTorch's implicit copyWeightsToHost does: the modules
of a training model get a subclass of their own class whose accessors call sync().
generation counts training calls, so inference models know when to take the weights again.
"""
import copyreg
import weakref

training_executors = weakref.WeakSet()
generation = [0]        # bumped by every training call: inference models re-upload
_hooked_classes = {}    # original module class -> its weight-syncing subclass


def sync():
    """Copies the weights of every training model whose host copy is stale."""
    for ex in list(training_executors):
        if ex._host_stale:
            ex.copyWeightsToHost()


def _hooked_class(cls):
    """A subclass of cls whose weight accessors first bring stale weights back from the
    device."""
    h = _hooked_classes.get(cls)
    if h is not None:
        return h

    def __getattr__(self, name):
        sync()
        return cls.__getattr__(self, name)

    def state_dict(self, *args, **kwargs):
        sync()
        return cls.state_dict(self, *args, **kwargs)

    def named_parameters(self, *args, **kwargs):
        sync()
        return cls.named_parameters(self, *args, **kwargs)

    def named_buffers(self, *args, **kwargs):
        sync()
        return cls.named_buffers(self, *args, **kwargs)

    def __reduce_ex__(self, protocol):
        # Pickled (torch.save, copy.deepcopy) as its own class, with current weights: the
        # subclass is made at run time and pickle could not name it.
        sync()
        self.__class__ = cls
        try:
            rv = cls.__reduce_ex__(self, protocol)
        finally:
            self.__class__ = h
        if isinstance(rv, tuple) and rv and rv[0] is copyreg.__newobj__:
            # pickle checks __newobj__'s class against the object's: build it with
            # copyreg's plain reconstructor instead (object.__new__(cls)).
            rv = (copyreg._reconstructor, (cls, object, None)) + tuple(rv[2:])
        return rv

    h = type(cls.__name__, (cls,), {
        "__getattr__": __getattr__, "state_dict": state_dict,
        "named_parameters": named_parameters, "named_buffers": named_buffers,
        "__reduce_ex__": __reduce_ex__,
        "_ipuof_original_class": cls, "__module__": cls.__module__,
        "__qualname__": cls.__qualname__})
    _hooked_classes[cls] = h
    return h


def hook(executor, model):
    """Registers a training executor and gives model's modules their syncing classes."""
    training_executors.add(executor)
    for m in model.modules():
        if not hasattr(type(m), "_ipuof_original_class"):
            m.__class__ = _hooked_class(type(m))


def unhook(executor, model):
    """Forgets executor; when no training model is left, model's modules get their own
    classes back."""
    training_executors.discard(executor)
    if any(True for _ in training_executors):
        return
    for m in model.modules():
        orig = getattr(type(m), "_ipuof_original_class", None)
        if orig is not None:
            m.__class__ = orig
