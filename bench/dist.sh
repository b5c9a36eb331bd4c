#!/bin/sh
# The distributed benchmark (see "Distributed benchmark" in bench/README.md): the same
# training of PopTorch's MNIST tutorial network on Fashion-MNIST by ipuof-mnist through a
# daemon of its own, as 1 process x 2 replicas and as 2 processes x 1 replica (one job on
# one partition: the same global batch, the same weights), side by side.
#
#   sh bench/dist.sh [BUILD]           BUILD defaults to build; make has built everything
#
# Environment:
#   DIST_SAMPLES=16000  training samples per run (one epoch of --limit-train)
#   DIST_PAIRS=3        runs of each, alternating; the median is reported
#   DIST_ARGS="--batch-size 40 --device-iterations 10 --gradient-accumulation 1"
#   DIST_DATA=/usr/share/datasets/fashion-mnist
#   DIST_CALLGRIND=1    instead: instruction counts (valgrind --tool=callgrind, repeatable
#                       under load) of the daemon and of the clients for one run of each
#                       (DIST_SAMPLES defaults to 1600 then)
# Throughput is training samples over the epoch's seconds as ipuof-mnist prints them (for
# two processes: both processes' samples over the slower one's seconds), so compiling and
# testing are left out. Timings are reported, never judged: the exit status is 0 whether
# the goal (two processes >= 0.9x one) is met or not ("MISSED" marks it), and 1 only when
# the benchmark cannot run.
# shellcheck disable=SC2086,SC2317
# (SC2086: argument lists are split on purpose; SC2317: cleanup runs from a trap)
set -eu
B=${1:-build}
CALLGRIND=${DIST_CALLGRIND:-0}
if [ "$CALLGRIND" = 1 ]; then SAMPLES=${DIST_SAMPLES:-1600}; else SAMPLES=${DIST_SAMPLES:-16000}; fi
PAIRS=${DIST_PAIRS:-3}
ARGS=${DIST_ARGS:---batch-size 40 --device-iterations 10 --gradient-accumulation 1}
DATA=${DIST_DATA:-/usr/share/datasets/fashion-mnist}

NAME=dist
# shellcheck source=bench/pair_lib.sh
. "$(dirname "$0")/pair_lib.sh"
pair_check

D=$(mktemp -d /tmp/ipuof-dist-bench-XXXXXX)
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT INT TERM
COMMON="--data $DATA --epochs 1 --limit-train $SAMPLES --limit-test 80 $ARGS"

# Instruction counts: one daemon under callgrind per configuration, clients under callgrind.
if [ "$CALLGRIND" = 1 ]; then
    command -v valgrind >/dev/null 2>&1 || die "valgrind is missing"
    ir() { sed -n 's/^summary: //p' "$1"; }
    for mode in one two; do
        valgrind --tool=callgrind --callgrind-out-file="$D/d.$mode" "$B/bin/ipuofd" \
            --listen 127.0.0.1:0 --port-file "$D/port.$mode" --foreground \
            --admin-socket "$D/adm.$mode" >"$D/log.$mode" 2>&1 &
        V=$!
        PID=$V
        i=0
        while [ ! -s "$D/port.$mode" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
        [ -s "$D/port.$mode" ] || die "ipuofd did not start under valgrind"
        export IPUOF_SERVER="127.0.0.1:$(cat "$D/port.$mode")"
        if [ $mode = one ]; then
            valgrind --tool=callgrind --callgrind-out-file="$D/c0.$mode" "$B/bin/ipuof-mnist" \
                $COMMON --replicas 2 --quiet >/dev/null 2>"$D/e.$mode" || die "1 x 2 failed"
        else
            for p in 0 1; do
                IPUOF_JOB_KEY=dist-$$ IPUOF_PROCESS_ID=$p IPUOF_NUM_PROCESSES=2 valgrind \
                    --tool=callgrind \
                    --callgrind-out-file="$D/c$p.$mode" "$B/bin/ipuof-mnist" $COMMON --quiet \
                    >/dev/null 2>"$D/e$p.$mode" &
                eval "k$p=\$!"
            done
            # shellcheck disable=SC2154
            wait "$k0" || die "2 x 1: process 0 failed"
            # shellcheck disable=SC2154
            wait "$k1" || die "2 x 1: process 1 failed"
        fi
        kill -TERM "$V"
        wait "$V" || true
        PID=""
    done
    echo "instructions (callgrind), $SAMPLES training samples, ipuof-mnist $ARGS;" \
        "$("$B/bin/ipuofd" --version | sed -n 2p):"
    echo "  1 process x 2 replicas:  daemon $(ir "$D/d.one"), client $(ir "$D/c0.one")"
    echo "  2 processes x 1 replica: daemon $(ir "$D/d.two"), clients $(ir "$D/c0.two") + $(ir "$D/c1.two")"
    awk -v a="$(ir "$D/d.one")" -v b="$(ir "$D/d.two")" \
        'BEGIN { printf "dist: daemon instructions, two processes / one = %.4f\n", b / a }'
    exit 0
fi
pair_daemon "$D/port" "$D/log"
PID=$STARTED
pair_port "$D/port" "$D/log" ipuofd
export IPUOF_SERVER="$ADDR"

two_proc() { # process, run: process $1 of 2 processes x 1 replica
    IPUOF_PROCESS_ID=$1 IPUOF_NUM_PROCESSES=2 IPUOF_PARTITION=bench \
        "$B/bin/ipuof-mnist" $COMMON --replicas 1
}
one() { pair_one "$1" "1 process x 2 replicas"; }   # run number -> samples/s
two() { pair_two "$1" "2 processes"; }

echo "distributed training benchmark: $SAMPLES samples per run, ipuof-mnist $ARGS"
pair_rounds "1 process x 2 replicas" "2 processes x 1 replica"
ratio=$(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.2f", b / a }')
verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.9) ? "met" : "MISSED" }')
echo "median: 1 process x 2 replicas $ma samples/s, 2 processes x 1 replica $mb samples/s"
echo "dist: two processes / one process = ${ratio}x (goal >= 0.9x: $verdict)"
