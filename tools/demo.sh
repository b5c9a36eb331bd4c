#!/bin/sh
# make demo: start ipuofd on an ephemeral loopback port, run the demo job against it, stop it.
set -eu
B=${1:-build}
D=$(mktemp -d /tmp/ipuofd-demo-XXXXXX)
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT INT TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "starting ipuofd (4 simulated IPUs, 900 MiB each) on 127.0.0.1, ephemeral port"
"$B/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$D/port" --ipus 4 \
    --admin-socket "$D/admin.sock" --foreground 2>"$D/ipuofd.log" &
PID=$!
i=0
while [ ! -s "$D/port" ]; do
    sleep 0.05; i=$((i + 1))
    if [ $i -gt 200 ]; then echo "ipuofd did not start:"; cat "$D/ipuofd.log"; exit 1; fi
done
S="127.0.0.1:$(cat "$D/port")"
export IPUOF_SERVER="$S"
echo "listening on $S"

step "ipuctl status"
"$B/bin/ipuctl" status

step "two applications attach partitions (ipuof-hello --ipus 2, --ipus 1)"
"$B/bin/ipuof-hello" --ipus 2 --partition train --hold 1500 &
A=$!
sleep 0.3
"$B/bin/ipuof-hello" --ipus 1 --partition infer --hold 1000 &
C=$!
sleep 0.3

step "ipuctl status while they hold their IPUs"
"$B/bin/ipuctl" status

step "a third asks for 4 IPUs and waits in the queue until they are free"
"$B/bin/ipuof-hello" --ipus 4 --wait 10000
wait "$A" "$C"

NODE=/usr/share/libonnx-testdata/data/node
if [ -d "$NODE/test_conv_with_strides_padding" ]; then
    T="$NODE/test_conv_with_strides_padding"
    step "ipuof-run: an ONNX convolution checked against its reference output"
    "$B/bin/ipuof-run" --model "$T/model.onnx" --input "$T/test_data_set_0/input_0.pb" --input "$T/test_data_set_0/input_1.pb" \
        --expect "$T/test_data_set_0/output_0.pb"
    step "the same model, 100 device iterations x 2 replicas per call (inputs tiled)"
    "$B/bin/ipuof-run" --model "$T/model.onnx" --input "$T/test_data_set_0/input_0.pb" --input "$T/test_data_set_0/input_1.pb" \
        --device-iterations 100 --replicas 2 --output-dir "$D/out"
    ls -l "$D/out"
fi

if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    P="$B/demo-profile"
    step "the tutorial: ipuof-mnist trains the MNIST network pipelined over 4 IPUs (1 epoch)"
    echo "(blocks B1..B4 one per IPU; batch 40 x 10 device iterations x 10 gradient"
    echo " accumulation, AdamW lr 1e-3; 'make demo EPOCHS=3' runs the tutorial's 3 epochs;"
    echo " the trace of the last training call and its timeline go to $P)"
    "$B/bin/ipuof-mnist" --epochs "${EPOCHS:-1}" --strategy pipelined --profile "$P" \
        --save "$D/mnist.onnx" &
    M=$!
    sleep 3
    step "ipuctl status while it trains (memory per IPU, with the pipeline stashes)"
    "$B/bin/ipuctl" status
    wait "$M"
    step "the pipeline timeline of one optimizer step (open it in a browser)"
    echo "$(cd "$P" && pwd)/timeline.svg  (trace: $(cd "$P" && pwd)/trace.json, for Perfetto)"
    step "the trained model was saved as ONNX, weights included"
    ls -l "$D/mnist.onnx"
    "$B/bin/ipuof-mnist" --epochs 0 --load "$D/mnist.onnx" --limit-test 2000
fi

step "ipuctl status --json"
"$B/bin/ipuctl" status --json
echo

step "stopping ipuofd (SIGTERM)"
kill -TERM "$PID"
wait "$PID"
echo "ipuofd exited with status $?"
PID=""
