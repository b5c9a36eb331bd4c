"""The binding to libipuof-client: cffi in ABI mode over the declarations of
client/include/ipuof/client.h, generated from that header at build time (tools/py_cdef.sh,
the Makefile's build/lib/ipuof-client.cdef; installed next to this module), never copied by
hand. The protocol is never spoken here: every request goes through the C library.

The library is found, in order, at IPUOF_CLIENT_LIB (a path), in the build tree named by
IPUOF_BUILD or the one this checkout holds (build/lib/libipuof-client.so), then as the
system's: PREFIX/lib/libipuof-client.so.0 next to the installed package, then whatever the
dynamic linker finds for libipuof-client.so.0. The declarations are read from
ipuof-client.cdef beside the library found, else beside this module.

Every enum constant and integer #define of the header is a module attribute without its
IPUOF_ prefix (E_INVAL, DTYPE_FLOAT, OUTPUT_ALL, OPTIMIZER_SGD, MAX_BLOCKS, ...), except
TENSOR_KINDS, which is the kinds' names.
"""
import os

import cffi

CDEF_NAME = "ipuof-client.cdef"


def _candidates():
    """Paths to try for the library, most specific first."""
    env = os.environ.get("IPUOF_CLIENT_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    build = os.environ.get("IPUOF_BUILD")
    if build:
        out.append(os.path.join(os.path.abspath(build), "lib", "libipuof-client.so"))
    # python/ipuof/_lib.py in a checkout: the build tree is ../../build.
    out.append(os.path.normpath(os.path.join(here, "..", "..", "build", "lib",
                                             "libipuof-client.so")))
    # Installed: PREFIX/lib/python3*/dist-packages/ipuof/ next to PREFIX/lib/.
    out.append(os.path.normpath(os.path.join(here, "..", "..", "..", "libipuof-client.so.0")))
    out.append("libipuof-client.so.0")
    return out


def _find():
    """The path of the first library that loads; ImportError listing every attempt."""
    probe = cffi.FFI()
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path}: no such file")
            continue
        try:
            probe.dlopen(path)
        except OSError as exc:
            tried.append(f"{path}: {exc}")
            continue
        return path
    raise ImportError("cannot load libipuof-client (set IPUOF_CLIENT_LIB to its path, or "
                      "install the library): " + "; ".join(tried))


def cdef_path(library):
    """The generated declarations that go with the library at path library: beside it (a
    build tree), else beside this module (an installed package); ImportError naming both
    when neither exists."""
    places = []
    if os.sep in library:
        places.append(os.path.join(os.path.dirname(os.path.abspath(library)), CDEF_NAME))
    places.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), CDEF_NAME))
    for p in places:
        if os.path.exists(p):
            return p
    raise ImportError(f"no {CDEF_NAME} (the library's declarations, made by `make` from "
                      f"client/include/ipuof/client.h) at " + " or ".join(places))


path = _find()
CDEF_PATH = cdef_path(path)
ffi = cffi.FFI()
with open(CDEF_PATH, encoding="utf-8") as _f:
    ffi.cdef(_f.read())
lib = ffi.dlopen(path)
globals().update({_n[len("IPUOF_"):]: getattr(lib, _n) for _n in dir(lib)
                  if _n.startswith("IPUOF_") and isinstance(getattr(lib, _n), int)})
# enum ipuof_tensor_kind by name, in the order of struct ipuof_model_opts.locations (the
# header's IPUOF_TENSOR_KINDS, their count, is lib.IPUOF_TENSOR_KINDS).
TENSOR_KINDS = ("weights", "activations", "accumulators", "optimizer")
assert len(TENSOR_KINDS) == lib.IPUOF_TENSOR_KINDS


def string(p):
    """A C string (borrowed) as a Python str; "" for NULL."""
    return "" if p == ffi.NULL else ffi.string(p).decode("utf-8", "replace")


def has(name):
    """True when the loaded library exports the declared function name (a library older
    than its header's declarations lacks the newest calls)."""
    try:
        getattr(lib, name)
    except AttributeError:
        return False
    return True


# The placement options (strategy, blocks, tensor locations, profiling) and jobs of several
# processes, which a library older than this package may lack.
PLACEMENT = has("ipuof_model_opts_set_strategy")
JOBS = has("ipuof_process_env")
