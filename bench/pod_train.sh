#!/bin/sh
# The Pod training benchmark (issue 20; "Pod benchmark" in bench/README.md): PopTorch's
# MNIST tutorial network on Fashion-MNIST by ipuof-mnist, as 1 daemon x 2 replicas (one
# process) and as 2 daemons x 1 replica (a partition across a Pod of two daemons on this
# machine, loopback, one process attached to each, IPUOF_POD_HOSTS), the same global batch
# and weights, side by side; and the time of the cross-daemon all-reduce per optimizer step
# (host-a's log: "N gradient all-reduces ... ms each") beside the step's time.
#
#   sh bench/pod_train.sh [BUILD]      BUILD defaults to build; make has built everything
#
# Environment:
#   POD_SAMPLES=8000  training samples per run (one epoch of --limit-train)
#   POD_PAIRS=3       runs of each, alternating; the median is reported
#   POD_ARGS="--batch-size 40 --device-iterations 10 --gradient-accumulation 1"
#   POD_DATA=/usr/share/datasets/fashion-mnist
# Throughput is training samples over the epoch's seconds as ipuof-mnist prints them (for
# two processes: both processes' samples over the slower one's seconds). Timings are
# reported, never judged: exit 0 when it ran, 1 when it cannot run.
# shellcheck disable=SC2086,SC2317
set -eu
B=${1:-build}
SAMPLES=${POD_SAMPLES:-8000}
PAIRS=${POD_PAIRS:-3}
ARGS=${POD_ARGS:---batch-size 40 --device-iterations 10 --gradient-accumulation 1}
DATA=${POD_DATA:-/usr/share/datasets/fashion-mnist}

NAME=pod_train
# shellcheck source=bench/pair_lib.sh
. "$(dirname "$0")/pair_lib.sh"
pair_check

D=$(mktemp -d /tmp/ipuof-pod-bench-XXXXXX)
PA="" PB=""
cleanup() {
    [ -n "$PA" ] && kill "$PA" 2>/dev/null
    [ -n "$PB" ] && kill "$PB" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT INT TERM
COMMON="--data $DATA --epochs 1 --limit-train $SAMPLES --limit-test 80 $ARGS"

# A free TCP port on loopback (bound and released).
port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
QA=$(port)
QB=$(port)
printf '[pod]\nname = host-a\nlisten = 127.0.0.1:%s\npeers = host-b=127.0.0.1:%s\n' "$QA" "$QB" \
    >"$D/a.conf"
printf '[pod]\nname = host-b\nlisten = 127.0.0.1:%s\npeers = host-a=127.0.0.1:%s\n' "$QB" "$QA" \
    >"$D/b.conf"
for h in a b; do
    pair_daemon "$D/$h.port" "$D/$h.log" --config "$D/$h.conf" --admin-socket "$D/$h.sock"
    if [ $h = a ]; then PA=$STARTED; else PB=$STARTED; fi
done
pair_port "$D/a.port" "$D/a.log" "ipuofd a"
SA=$ADDR
pair_port "$D/b.port" "$D/b.log" "ipuofd b"
SB=$ADDR

two_proc() { # process, run: process $1 of 2 daemons x 1 replica, attached to daemon a or b
    if [ "$1" = 0 ]; then s=$SA; else s=$SB; fi
    IPUOF_SERVER=$s IPUOF_POD_HOSTS=host-a,host-b IPUOF_JOB_KEY=pod-bench-$$-$2 \
        IPUOF_PROCESS_ID=$1 IPUOF_NUM_PROCESSES=2 "$B/bin/ipuof-mnist" $COMMON --replicas 1
}
one() { pair_one "$1" "1 daemon x 2 replicas" IPUOF_SERVER="$SA"; }   # run -> samples/s
two() { pair_two "$1" "2 daemons"; }

echo "Pod training benchmark: $SAMPLES samples per run, ipuof-mnist $ARGS, $(nproc) CPUs"
pair_rounds "1 daemon x 2 replicas" "2 daemons x 1 replica"
echo "median: 1 daemon x 2 replicas $ma samples/s, 2 daemons x 1 replica $mb samples/s"
awk -v a="$ma" -v b="$mb" 'BEGIN { printf "pod_train: two daemons / one daemon = %.2fx\n", b / a }'
# The all-reduce per step, from host-a's log (one line per job as it is freed).
sleep 0.5
grep "gradient all-reduces" "$D/a.log" | sed 's/.*: \([0-9]*\) gradient all-reduces.* \([0-9]*\) floats each, \([0-9.]*\) ms in all, \([0-9.]*\) ms each/\1 \2 \3 \4/' |
    awk -v mb="$mb" -v bs="$(echo "$ARGS" | sed -n 's/.*--batch-size \([0-9]*\).*/\1/p')" '
        { n += $1; ms += $3; floats = $2 }
        END {
            if (n == 0) { print "pod_train: no all-reduce was logged"; exit }
            step = 1000 * 2 * bs / mb   # ms per optimizer step at the median throughput
            printf "pod_train: %d all-reduces of %d floats (%.0f KB): %.3f ms each, " \
                   "a step %.2f ms at the median (%.1f%% of it)\n", n, floats,
                   floats * 4 / 1000, ms / n, step, 100 * (ms / n) / step
        }'
