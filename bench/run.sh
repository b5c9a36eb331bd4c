#!/bin/sh
# make bench: the inference benchmark (see bench/README.md).
#   sh bench/run.sh [BUILD]      BUILD defaults to build; make has built everything in it
# Installs nothing. Needs Debian's python3-torch and python3-numpy (sh tools/deps.sh bench).
# Environment: BENCH_THREADS, BENCH_REPS, BENCH_REP_SECONDS (see bench/bench.py);
# BENCH_UNSET_CORETYPE=1 runs with OPENBLAS_CORETYPE removed from the environment, and says
# so in every heading (by default the environment is left as it is).
set -eu
B=${1:-build}
HERE=$(dirname "$0")

for f in "$B/bin/ipuofd" "$B/lib/libipuof-client.a" "$B/lib/libipuofsim.a"; do
    if [ ! -e "$f" ]; then
        echo "bench: $f is missing; build first (make bench builds everything)" >&2
        exit 1
    fi
done

# Debian's python3-torch is installed for /usr/bin/python3; a python3 earlier in PATH
# (a virtualenv, pyenv) usually cannot import it.
PY=""
for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch, numpy' >/dev/null 2>&1; then
        PY=$p
        break
    fi
done
if [ -z "$PY" ]; then
    echo "bench: PyTorch is missing: no python3 here can import torch and numpy." >&2
    echo "bench: install Debian's python3-torch with: sh tools/deps.sh bench" >&2
    exit 1
fi

# The C driver, compiled with the Makefile's flags against the libraries it built.
mkdir -p "$B/bench"
INC=$(pkg-config --cflags libprotobuf-c 2>/dev/null || true)
# shellcheck disable=SC2086
${CC:-cc} -std=c11 -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Wshadow \
    -Wno-missing-field-initializers -Werror ${CFLAGS:--O2 -g} -pthread -D_GNU_SOURCE \
    -Iclient/include -Iproto -I"$B/gen" $(for d in sim sim/*/; do printf -- " -I%s" "${d%/}"; done) $INC \
    -o "$B/bench/ipuof-bench" "$HERE/ipuof-bench.c" \
    "$B/lib/libipuof-client.a" "$B/lib/libipuofsim.a" -lprotobuf-c -lssl -lcrypto -lopenblas -ldnnl -lgomp -lm -pthread

label=""
if [ "${BENCH_UNSET_CORETYPE:-0}" = 1 ]; then
    label="OPENBLAS_CORETYPE unset (was: ${OPENBLAS_CORETYPE-unset})"
    unset OPENBLAS_CORETYPE
fi
exec "$PY" "$HERE/bench.py" --build "$B" --label "$label"
