"""POPLAR_ENGINE_OPTIONS as the Python package reads it agrees with libipuof-client: the
cases of tests/data/engine_options.tsv, which the C library's test
(tests/unit/test_client_engine_opts.c) reads too (issue 17, defect 8: on main the package
took "True" for true and decoded \\u escapes while the library did neither).

Each value is read where the package reads it: executor._profiling_dir (before a compile)
and profiling.trace_path (where the timeline is drawn from)."""
import os

import pytest

import poptorch
from ipuof import executor, profiling

TABLE = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data",
                     "engine_options.tsv")


def _cases():
    out = []
    with open(TABLE, encoding="utf-8", newline="\n") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            expect, value = line.split("\t", 1)
            out.append(pytest.param(expect, value, id=f"line{n}"))
    return out


@pytest.mark.parametrize("expect,value", _cases())
def test_engine_options_table(monkeypatch, expect, value):
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", value)
    opts = poptorch.Options()
    if expect.startswith("error "):
        with pytest.raises(poptorch.Error) as exc:
            executor._profiling_dir(opts)
        assert expect[6:] in str(exc.value)
        assert profiling.trace_path("m") is None
    elif expect == "off":
        assert executor._profiling_dir(opts) is None
        assert profiling.trace_path("m") is None
    else:
        assert expect.startswith("on ")
        directory = expect[3:]
        assert executor._profiling_dir(opts) == directory
        assert profiling.trace_path("a/m") == os.path.join(directory, "a_m.trace.json")


def test_table_is_read():
    assert len(_cases()) >= 40


def test_limits(monkeypatch):
    head = '{"autoReport.all":"true","x":"'
    value = head + "a" * (4096 - len(head) - 2) + '"}'
    assert len(value) == 4096
    assert profiling.engine_options(value) == (True, ".")
    with pytest.raises(poptorch.Error, match="4096 bytes"):
        profiling.engine_options(value[:-2] + 'a"}')
    assert profiling.engine_options('{"autoReport.all' + "x" * 300 + '":"true"}') == \
        (False, ".")
    with pytest.raises(poptorch.Error, match="not valid UTF-8"):
        profiling.engine_options(b'{"autoReport.directory":"\xff"}')
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    assert profiling.engine_options() == (False, ".")
