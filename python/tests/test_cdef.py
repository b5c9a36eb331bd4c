"""The package's cffi declarations are generated from the public header (tools/py_cdef.sh,
build/lib/ipuof-client.cdef): the file the package loaded is what the script makes from
this checkout's header now; every function the header declares is declared and exported
by the library; and every struct's size and field offsets, and every enum constant, are
what the C compiler makes of the same header."""
import os
import re
import subprocess

import pytest

from conftest import BUILD, ROOT
from ipuof import _lib

INCLUDE = os.path.join(ROOT, "client", "include")
HEADER = os.path.join(INCLUDE, "ipuof", "client.h")


def test_loaded_declarations_are_the_headers():
    made = subprocess.run(["sh", os.path.join(ROOT, "tools", "py_cdef.sh"), INCLUDE],
                          check=True, capture_output=True, text=True).stdout
    assert _lib.CDEF_PATH == os.path.join(BUILD, "lib", "ipuof-client.cdef")
    with open(_lib.CDEF_PATH, encoding="utf-8") as f:
        assert f.read() == made, "build/lib/ipuof-client.cdef is stale: run make"


def test_every_public_function_is_declared_and_exported():
    with open(HEADER, encoding="utf-8") as f:
        text = f.read()
    with open(os.path.join(INCLUDE, "ipuof", "status.h"), encoding="utf-8") as f:
        text += f.read()
    names = sorted(set(re.findall(r"IPUOF_API\b[^;(]*?\b(ipuof_\w+)\s*\(", text, re.S)))
    with open(os.path.join(ROOT, "client", "libipuof-client.sym"), encoding="utf-8") as f:
        exported = sorted(set(re.findall(r"^\s+(ipuof_\w+);", f.read(), re.M)))
    assert names == exported  # the header's functions are the library's exports
    assert "ipuof_compile_opts_new" in names and "ipuof_model_compile_with" in names
    missing = [n for n in names if not _lib.has(n)]
    assert not missing, f"declared in the header but not callable through cffi: {missing}"


def _c_layouts(tmp_path, structs, consts):
    """sizeof, offsetof of every field, and every constant as the C compiler sees them."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <ipuof/client.h>",
             "int main(void) {"]
    for s, fields in structs.items():
        lines.append(f'printf("%s %zu\\n", "{s}", sizeof(struct {s}));')
        for f in fields:
            lines.append(f'printf("%s.%s %zu\\n", "{s}", "{f}", offsetof(struct {s}, {f}));')
    for c in consts:
        lines.append(f'printf("%s %lld\\n", "{c}", (long long)({c}));')
    lines.append("return 0; }")
    src = tmp_path / "layouts.c"
    exe = tmp_path / "layouts"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", "-I", INCLUDE, "-o", str(exe),
                    str(src)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return dict(line.rsplit(" ", 1) for line in out.splitlines())


def test_structs_and_constants_match_the_compiler(tmp_path):
    ffi, lib = _lib.ffi, _lib.lib
    structs = {}
    for name in ffi.list_types()[1]:  # (typedefs, structs, unions)
        t = ffi.typeof(f"struct {name}")
        if t.fields is not None:  # complete (an opaque handle has none)
            structs[name] = [f for f, _ in t.fields]
    consts = [n for n in dir(lib) if n.startswith("IPUOF_") and isinstance(getattr(lib, n), int)]
    assert "ipuof_model_opts" in structs and "ipuof_compile_opts" not in structs
    assert len(consts) > 80
    c = _c_layouts(tmp_path, structs, consts)
    wrong = []
    for s, fields in structs.items():
        if int(c[s]) != ffi.sizeof(f"struct {s}"):
            wrong.append(f"sizeof(struct {s}): C {c[s]}, cffi {ffi.sizeof(f'struct {s}')}")
        for f in fields:
            if int(c[f"{s}.{f}"]) != ffi.offsetof(f"struct {s}", f):
                wrong.append(f"offsetof(struct {s}, {f})")
    wrong += [f"{n}: C {c[n]}, cffi {getattr(lib, n)}" for n in consts
              if int(c[n]) != getattr(lib, n)]
    print(f"{len(structs)} structs, {sum(map(len, structs.values()))} fields, "
          f"{len(consts)} constants compared with cc")
    assert not wrong, wrong


def test_module_constants_come_from_the_header():
    assert (_lib.E_INVAL, _lib.DTYPE_FLOAT16, _lib.OUTPUT_EVERYN) == (1, 10, 4)
    assert _lib.STAGE_AUTO == -1 and _lib.MAX_BLOCKS == 256
    assert _lib.TENSOR_KINDS[_lib.TENSORS_OPTIMIZER] == "optimizer"
    assert len(_lib.TENSOR_KINDS) == _lib.lib.IPUOF_TENSOR_KINDS


@pytest.mark.parametrize("bad", ["#include <stdio.h>\n"])
def test_script_refuses_an_unknown_include(tmp_path, bad):
    inc = tmp_path / "ipuof"
    inc.mkdir()
    for h in ("client.h", "status.h"):
        with open(os.path.join(INCLUDE, "ipuof", h), encoding="utf-8") as f:
            text = f.read()
        (inc / h).write_text(bad + text if h == "client.h" else text)
    r = subprocess.run(["sh", os.path.join(ROOT, "tools", "py_cdef.sh"), str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "<stdio.h>" in r.stderr and "only <stddef.h>" in r.stderr
