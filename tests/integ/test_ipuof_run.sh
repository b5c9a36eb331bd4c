#!/bin/sh
# ipuof-run over the ONNX node tests of every claimed op (tests/conformance/claimed.txt),
# against a real ipuofd: each test's model, its inputs, and --expect on its outputs.
# Usage: sh tests/integ/test_ipuof_run.sh [BUILD]
set -u
B=${1:-build}
NODE=/usr/share/libonnx-testdata/data/node
D=$(mktemp -d /tmp/ipuof-run-test-XXXXXX)
PID=""
cleanup() {
    [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT INT TERM
[ -d "$NODE" ] || { echo "skip: $NODE missing (libonnx-testdata)"; exit 77; }

"$B/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$D/port" --foreground 2>"$D/log" &
PID=$!
i=0
while [ ! -s "$D/port" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
export IPUOF_SERVER="127.0.0.1:$(cat "$D/port")"

pass=0 fail=0
while read -r t _; do
    case "$t" in ''|'#'*) continue ;; esac
    set -- --model "$NODE/$t/model.onnx" --quiet --output-dir "$D/out"
    for f in "$NODE/$t"/test_data_set_0/input_*.pb; do
        [ -e "$f" ] && set -- "$@" --input "$f"
    done
    for f in "$NODE/$t"/test_data_set_0/output_*.pb; do
        set -- "$@" --expect "$f"
    done
    if "$B/bin/ipuof-run" "$@" 2>"$D/err"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "not ok - $t: $(head -c 300 "$D/err")"
    fi
done < tests/conformance/claimed.txt
# The written files are TensorProtos of the graph outputs.
[ -s "$D/out/y.pb" ] || [ -n "$(ls "$D/out")" ] || { fail=$((fail + 1)); echo "not ok - no output files"; }

kill -TERM "$PID"; wait "$PID"; rc=$?; PID=""
[ "$rc" -eq 0 ] || { fail=$((fail + 1)); echo "not ok - ipuofd exited with $rc"; }
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
