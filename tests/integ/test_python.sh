#!/bin/sh
# The Python package (python/: ipuof, importable as poptorch) against the build in $1: its
# pytest suite under python/tests, with Debian's python3, each session starting a real
# ipuofd on an ephemeral loopback port. Prints pytest's output, then its counts as
# "N passed, M failed, K skipped" for tests/run.sh.
# A sanitizer build's client library is loaded with the sanitizer runtimes preloaded (leak
# checks off: the interpreter itself keeps memory until exit), and the DataLoader's workers
# start from a fork server (gcc 12's ASan allocator is not fork-safe).
# Usage: sh tests/integ/test_python.sh [BUILD]
set -u
B=${1:-build}
PY=/usr/bin/python3
D=$(mktemp -d /tmp/ipuof-pytest-XXXXXX)
trap 'rm -rf "$D"' EXIT INT TERM
if ! "$PY" -c 'import torch, onnx, cffi, pytest, torchvision' 2>"$D/err"; then
    echo "Debian's python3 lacks a test dependency (make deps installs them): $(tail -n 1 "$D/err")"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
export IPUOF_BUILD="$B"
export IPUOF_CLIENT_LIB="$B/lib/libipuof-client.so"
unset IPUOF_SERVER
if nm -D "$IPUOF_CLIENT_LIB" 2>/dev/null | grep -q __asan_init; then
    export LD_PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
    export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1"
    export IPUOF_TEST_START_METHOD=forkserver # DataLoader workers: see python/tests/conftest.py
fi
"$PY" -m pytest -q -p no:cacheprovider python/tests >"$D/out" 2>&1
rc=$?
cat "$D/out"
summary=$(grep -E '^[0-9]+ (passed|failed|skipped|error)|^(=+ )?[0-9]+ (passed|failed)' "$D/out" | tail -n 1)
count() { echo "$summary" | sed -n "s/.*\b\([0-9][0-9]*\) $1.*/\1/p" | head -n 1; }
p=$(count passed) f=$(count failed) s=$(count skipped) e=$(count error)
p=${p:-0} f=$(( ${f:-0} + ${e:-0} )) s=${s:-0}
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
echo "$p passed, $f failed, $s skipped"
[ "$rc" -eq 0 ]
