#!/bin/sh
# No import cycle inside daemon/, sim/ nor client/ (issue 18, What to build 2; issue 30, 4),
# and no more in the Python package than it has today (tools/py_cycles.py):
# tools/dep_cycles.sh finds no cycle by #include among each tree's sources (every part folder), nor by the
# symbols its objects use from each other ($B/obj/daemon, $B/obj/sim, $B/obj/client). The tool is first
# shown to find a cycle it is given (two files including each other), so this test cannot
# pass by the tool finding nothing.
# Usage: sh tests/integ/test_daemon_cycles.sh [BUILD]
set -u
B=${1:-build}
T=$(mktemp -d /tmp/ipuof-cycles-test-XXXXXX)
trap 'rm -rf "$T"' EXIT INT TERM
pass=0 fail=0
check() { # $1: what; $2: expected exit status; then the command
    what=$1 want=$2
    shift 2
    "$@" >"$T/out" 2>&1
    got=$?
    if [ "$got" -eq "$want" ]; then
        pass=$((pass + 1))
        echo "ok   $what"
    else
        fail=$((fail + 1))
        echo "FAIL $what (exit $got, expected $want):"
        sed 's/^/     /' "$T/out"
    fi
}

mkdir "$T/src"
printf '#include "b.h"\n' >"$T/src/a.c"
printf '#include "a.h"\n' >"$T/src/b.c"
: >"$T/src/a.h"
: >"$T/src/b.h"
check "the tool finds a cycle of two files including each other" 1 \
    sh tools/dep_cycles.sh "$T/src"
# Two part folders that use each other through files that make no cycle (lo/a -> hi/b,
# hi/c -> lo/d): the parts sense finds it, so a part calling upwards cannot pass.
mkdir -p "$T/parts/lo" "$T/parts/hi"
printf '#include "b.h"\n' >"$T/parts/lo/a.c"
printf '#include "d.h"\n' >"$T/parts/hi/c.c"
: >"$T/parts/hi/b.h"
: >"$T/parts/lo/d.h"
check "the tool finds a cycle between two folders whose files make none" 1 \
    sh tools/dep_cycles.sh "$T/parts"
# Each source tree (its part folders walked) with its objects: no cycle by #include, none by
# symbols, none between its parts.
for d in daemon sim client; do
    check "$d/: no cycle by #include" 0 sh tools/dep_cycles.sh "$d"
    if [ -d "$B/obj/$d" ] && find "$B/obj/$d" -name '*.o' | grep -q .; then
        check "$d/: no cycle by the symbols of $B/obj/$d" 0 \
            sh tools/dep_cycles.sh "$d" "$B/obj/$d"
    else
        fail=$((fail + 1))
        echo "FAIL no $d objects in $B/obj/$d: build first (make all)"
    fi
done

# The Python package (issue 30, 4): tools/py_cycles.py reads its imports with ast. It is
# first shown to find a circle held apart by an import inside a function, and one at module
# level. The package itself has none (docs/architecture.md, "Inside the Python package").
mkdir -p "$T/pkg/cyc"
printf 'from . import b\n' >"$T/pkg/cyc/a.py"
printf 'def f():\n    from .a import g\n' >"$T/pkg/cyc/b.py"
: >"$T/pkg/cyc/__init__.py"
check "py_cycles.py finds a circle made by an in-function import" 1 \
    python3 tools/py_cycles.py "$T/pkg/cyc" --max-all 0
check "py_cycles.py counts that circle apart from the module level" 0 \
    python3 tools/py_cycles.py "$T/pkg/cyc"
printf 'from .a import g\n' >"$T/pkg/cyc/b.py"
check "py_cycles.py finds a circle of module-level imports" 1 \
    python3 tools/py_cycles.py "$T/pkg/cyc"
check "python/ipuof: no import circle, at module level or through imports inside functions" 0 \
    python3 tools/py_cycles.py python/ipuof --max-top 0 --max-all 0
# No function over 120 lines (issue 30, Goals) in any C source git tracks (every one below
# the top but build*/ where git is missing, as in make test's fresh root), tests included:
# tools/long_functions.sh is first shown to find a body of 121 lines and to pass one of 120,
# so the check below cannot pass by the tool finding nothing.
mkdir "$T/long"
body() { # $1: name, $2: lines after the '{' up to and including the '}'
    printf 'static int\n%s(int a)\n{\n' "$1"
    i=2
    while [ "$i" -lt "$2" ]; do echo "    a += $i;"; i=$((i + 1)); done
    printf '    return a;\n}\n\n'
}
{ body fits 120; body too_long 121; } >"$T/long/f.c"
check "long_functions.sh finds a function of 121 lines" 1 sh tools/long_functions.sh "$T/long/f.c"
cp "$T/out" "$T/long/out"
check "long_functions.sh names too_long (121) and not fits (120)" 0 \
    sh -c 'grep -q "^121 .*f\.c too_long\$" "$1" && ! grep -q " fits\$" "$1"' sh "$T/long/out"
check "no function over 120 lines in the C sources" 0 sh tools/long_functions.sh
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
