"""poptorch.Options has one mechanism: every option, the calls ipuofd ignores included, is
a method of its class found by ordinary attribute lookup (none is conjured by __getattr__
from a name table); an ignored one warns once naming itself, returns its group, and the
recorded ones keep their value where PopTorch keeps it, refused once frozen."""
import copy
import warnings

import pytest

import poptorch
from ipuof import options as options_mod


def _groups():
    o = poptorch.Options()
    return o, {"Options": o, "_PrecisionOptions": o.Precision, "_JitOptions": o.Jit,
               "TensorLocationSettings": poptorch.TensorLocationSettings()}


def _every_ignored():
    out = [(c, n, None) for c, names in options_mod._IGNORED.items() for n in names]
    out += [(c, n, r) for (c, n), r in options_mod._RECORDED.items()]
    return out


@pytest.mark.parametrize("cls,name,record", _every_ignored())
def test_every_ignored_option_is_a_method_of_its_class(cls, name, record):
    _, groups = _groups()
    group = groups[cls]
    assert callable(vars(getattr(options_mod, cls)).get(name))  # defined on the class
    assert name in dir(group)  # found by lookup, listed by dir(), unlike a __getattr__ name
    options_mod._warned.discard(name)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert getattr(group, name)(7) is group
        assert getattr(group, name)(7) is group
    said = [str(x.message) for x in w if name in str(x.message)]
    assert len(said) == 1 and "no effect on ipuofd" in said[0], said
    if record is not None and record.startswith("value:"):
        assert group.toDict()[record.split(":", 1)[1]] == 7


def test_recorded_values_are_kept_copied_and_refused_when_frozen():
    o = poptorch.Options()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        o.enableStableNorm(True).useIpuModel(True).maxRepeatLogs(3)
        o.Precision.enableFloatingPointExceptions(True)
        c = copy.deepcopy(o)
        assert o._Popart.options["enableStableNorm"] is True
        assert o._Popart.options["enableFloatingPointChecks"] is True
        assert (o.toDict()["use_model"], o.toDict()["max_repeat_logs"]) == (True, 3)
        assert repr(c) == repr(o)
        o._freeze()
        with pytest.raises(poptorch.Error, match="Can't modify frozen Options"):
            o.maxRepeatLogs(4)
        o.showCompilationProgressBar(False)  # records nothing: allowed, as before
        c.maxRepeatLogs(5)  # a copy is not frozen
    assert c.toDict()["max_repeat_logs"] == 5


def test_an_unknown_name_is_an_attribute_error():
    o = poptorch.Options()
    with pytest.raises(AttributeError, match="'Options' object has no attribute 'noSuchOpt'"):
        o.noSuchOpt(1)
    with pytest.raises(AttributeError):
        o.Precision.traceModel  # another group's ignored call is not this one's
