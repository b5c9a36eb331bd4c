#!/bin/sh
# The same training gives the same bits whatever the size of the simulator's host pool
# (issue 29 item 2: kernels split over the pool must cut their work, and sum their partial
# results, the same way on 1, 2 or 3 threads). For each pool size a daemon of its own
# (IPUOF_SIM_THREADS=N) trains the tutorial with ipuof-mnist on the first 800 Fashion-MNIST
# samples (micro-batch 40 x 2 accumulated x 2 device iterations: 5 calls, 10 AdamW steps,
# one IPU; then 2 replicas), saves the model, and the saved files must be byte for byte
# the same, as must the loss and accuracy it prints. A few seconds per run.
# Usage: sh tests/integ/test_train_pool_bits.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
DATA=${IPUOF_MNIST_DATA:-/usr/share/datasets/fashion-mnist}
testd_sh_init poolbits
testd_sh_need_mnist "$DATA"

# train THREADS NAME [ipuof-mnist args...]: one daemon with a pool of THREADS, one run
# saved to $D/NAME-THREADS.onnx, its epoch and test lines (timings cut) in .../NAME-THREADS.txt
train() {
    t=$1 name=$2
    shift 2
    mkdir -p "$D/d$t-$name"
    if ! IPUOF_SIM_THREADS=$t testd_sh_start "$B" "$D/d$t-$name" --ipus 2; then
        not_ok "ipuofd with IPUOF_SIM_THREADS=$t starts ($(head -c 300 "$D/d$t-$name/log"))"
        return
    fi
    "$B/bin/ipuof-mnist" --data "$DATA" --epochs 1 --limit-train 800 --limit-test 200 \
        --batch-size 40 --gradient-accumulation 2 --device-iterations 2 --seed 5 "$@" \
        --save "$D/$name-$t.onnx" >"$D/$name-$t.out" 2>"$D/$name-$t.err"
    rc=$?
    check "$name, pool of $t: ipuof-mnist exits 0 (got $rc: $(head -c 300 "$D/$name-$t.err"))" \
        [ "$rc" -eq 0 ]
    sed -n -e 's/^Epoch 1\/1: .* in [0-9.]* s, \(loss=.*\)$/\1/p' \
        -e 's/^tested .* per call): \(loss=.*\)$/\1/p' "$D/$name-$t.out" >"$D/$name-$t.txt"
    kill -TERM "$PID"
    wait "$PID"
    PID=""
}

for case in single replicas; do
    args=""
    [ "$case" = replicas ] && args="--replicas 2"
    for t in 1 2 3; do
        # shellcheck disable=SC2086
        train "$t" "$case" $args
    done
    check "$case: the loss and accuracy lines are there ($(tr '\n' ' ' <"$D/$case-1.txt"))" \
        [ "$(wc -l <"$D/$case-1.txt")" -eq 2 ]
    for t in 2 3; do
        check "$case: pool of $t prints what a pool of 1 prints ($(tr '\n' ' ' <"$D/$case-$t.txt"))" \
            cmp -s "$D/$case-1.txt" "$D/$case-$t.txt"
        check "$case: pool of $t saves the same bytes as a pool of 1" \
            cmp -s "$D/$case-1.onnx" "$D/$case-$t.onnx"
    done
done
testd_sh_end
