#!/bin/sh
# The identity harness of a refactor (issue 30): runs the same configurations (tools/identity.py
# list: 151 of them) against OLD_BUILD and NEW_BUILD, each build's tools against an ipuofd of
# the same build on an ephemeral loopback port, and compares the hashes of each
# configuration's outputs, weights, cost report and trace line by line.
#   sh tools/identity.sh OLD_BUILD NEW_BUILD [REGEX]
# OLD_BUILD and NEW_BUILD are the build folders of two checkouts (their parents hold the
# sources: the driver tools/identity_drv.c is compiled against each one's client/include).
# REGEX keeps the configurations whose name it matches. IPUOF_SIM_THREADS is 2 in both
# daemons; IPUOF_SIM_ISA is passed through as set. Exit status: 0 when every configuration
# gives the same four hashes in both builds (and none failed), 1 otherwise (each differing
# configuration is printed with the parts that differ), 64 for bad usage.
set -u
[ $# -ge 2 ] && [ -x "$1/bin/ipuofd" ] && [ -x "$2/bin/ipuofd" ] || {
    echo "usage: sh tools/identity.sh OLD_BUILD NEW_BUILD [REGEX] (each with bin/ipuofd)" >&2
    exit 64
}
HERE=$(dirname "$0")
PY=/usr/bin/python3
W=$(mktemp -d /tmp/ipuof-identity-XXXXXX)
echo "identity: IPUOF_SIM_THREADS=2 IPUOF_SIM_ISA=${IPUOF_SIM_ISA:-(the CPU's)}; work in $W"
"$PY" "$HERE/identity.py" run "$1" "$W/old.txt" "$W/old" ${3:+"$3"} >/dev/null || exit 1
"$PY" "$HERE/identity.py" run "$2" "$W/new.txt" "$W/new" ${3:+"$3"} >/dev/null || exit 1
if "$PY" "$HERE/identity.py" compare "$W/old.txt" "$W/new.txt"; then
    rm -rf "$W"
    exit 0
fi
echo "identity: the two runs' lines and each configuration's files are in $W"
exit 1
