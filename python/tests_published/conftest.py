"""The fixtures of python/tests (a real ipuofd on an ephemeral loopback port, the package
from this checkout), shared by the published-configuration tests, which `make
test-published` runs apart from `make test` (each compiles a full-size model)."""
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "ipuof_tests_conftest", os.path.join(_HERE, "..", "tests", "conftest.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)
daemon = _base.daemon
sys.path.insert(0, os.path.join(_HERE, "..", "..", "bench"))
