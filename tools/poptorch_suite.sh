#!/bin/sh
# PopTorch's own public tests (graphcore/poptorch tests/, fetched by the caller into a
# scratch directory, never committed here) against this package and a 16-IPU daemon of
# its own, file by file: docs/python.md "PopTorch's own test suite".
# Usage: sh tools/poptorch_suite.sh [-b BUILD] [-H] TESTS_DIR FILE_test.py...
#   -H runs the hardware-only tests (--hw-tests-only) instead of --no-hw-tests.
# Each file's JUnit report goes to TESTS_DIR/../junit/FILE.xml; one summary line per file
# ("FILE: pytest's last line"). IPUOF_SERVER, when set, points at a running daemon instead.
# A per-test time limit of SUITE_TIMEOUT seconds (120) is a small pytest plugin (Debian has
# no pytest-timeout); `expecttest`, which torch.testing._internal imports and Debian does
# not package, is a stand-in module. math_ops_test.py is collected with -p unittest.mock
# (it uses unittest.mock without importing it).
set -u
B=build
SEL=--no-hw-tests
while [ $# -gt 0 ]; do
    case $1 in
    -b) B=$2; shift 2 ;;
    -H) SEL=--hw-tests-only; shift ;;
    *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "usage: $0 [-b BUILD] [-H] TESTS_DIR FILE_test.py..." >&2; exit 2; }
T=$(cd "$1" && pwd) || exit 2
shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "$B" && pwd) || exit 2
S=$(mktemp -d /tmp/poptorch-suite-XXXXXX)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$S"; }
trap cleanup EXIT INT TERM
cat >"$S/expecttest.py" <<'EOF'
"""Stand-in for the expecttest package (imported by torch.testing._internal)."""
import unittest

ACCEPT = False  # expecttest's switch to rewrite expected strings: never here


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertEqual(actual, expect)
EOF
cat >"$S/suite_timeout.py" <<'EOF'
"""pytest plugin: each test is stopped after SUITE_TIMEOUT seconds (120 by default)."""
import os
import signal

import pytest

_LIMIT = int(os.environ.get("SUITE_TIMEOUT", "120"))


def _expired(signum, frame):
    raise TimeoutError(f"test exceeded {_LIMIT} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    old = signal.signal(signal.SIGALRM, _expired)
    signal.alarm(_LIMIT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
EOF
if [ -z "${IPUOF_SERVER:-}" ]; then
    "$B/bin/ipuofd" --foreground --ipus 16 --listen 127.0.0.1:0 --port-file "$S/port" \
        --log-level warn >"$S/daemon.log" 2>&1 &
    PID=$!
    i=0
    while [ ! -s "$S/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    [ -s "$S/port" ] || { echo "ipuofd did not start:"; cat "$S/daemon.log"; exit 1; }
    IPUOF_SERVER=127.0.0.1:$(cat "$S/port")
fi
export IPUOF_SERVER IPUOF_CLIENT_LIB="$B/lib/libipuof-client.so"
export PYTHONPATH="$ROOT/python:$S" PATH="/usr/bin:$PATH"
mkdir -p "$T/../junit"
rc=0
cd "$T" || exit 2
for f in "$@"; do
    extra=
    [ "$f" = math_ops_test.py ] && extra="-p unittest.mock"
    # shellcheck disable=SC2086
    /usr/bin/python3 -m pytest "$f" $SEL -q -p no:cacheprovider -p suite_timeout $extra \
        --junitxml="$T/../junit/${f%.py}.xml" >"$S/out" 2>&1 || rc=1
    echo "$f: $(tail -n 1 "$S/out")"
done
exit $rc
