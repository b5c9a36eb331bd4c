#!/bin/sh
# Status latency of one client while another pipelines large trace requests (issue 17,
# defect 7): builds bench/trace_load.c against the libraries make built and runs it against
# a daemon of its own (BUILD/bin/ipuofd).
#
#   sh bench/trace_load.sh [BUILD [NODES [DI [TRACES]]]]   defaults: build 1 100000 20
#
# The defaults give the largest trace the simulator writes (2^18 events, about 34 MB).
# Figures are printed, never judged; exit 1 only when it cannot run.
set -eu
B=${1:-build}
HERE=$(dirname "$0")
[ $# -gt 0 ] && shift
mkdir -p "$B/bench"
INC=$(pkg-config --cflags libprotobuf-c 2>/dev/null || true)
# shellcheck disable=SC2086
${CC:-cc} -std=c11 -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Wshadow \
    -Wno-missing-field-initializers -Werror ${CFLAGS:--O2 -g} -pthread -D_GNU_SOURCE \
    -Iclient/include -Iproto -I"$B/gen" $(for d in sim sim/*/; do printf -- " -I%s" "${d%/}"; done) -Itests/util $INC \
    -o "$B/bench/trace_load" "$HERE/trace_load.c" \
    "$B/lib/libipuoftest.a" "$B/lib/libipuofsim.a" "$B/lib/libipuof-client.a" \
    -lprotobuf-c -lssl -lcrypto -lz -lopenblas -ldnnl -lgomp -lm -pthread
IPUOFD_BIN=${IPUOFD_BIN:-$B/bin/ipuofd} exec "$B/bench/trace_load" "$@"
