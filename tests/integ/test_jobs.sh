#!/bin/sh
# Jobs of several processes on one partition against a real ipuofd, with ipuof-mnist on
# Fashion-MNIST (Debian's dataset-fashion-mnist) and the tutorial network:
#   - 2 processes x 1 local replica reach the weights of 1 process x 2 replicas and of
#     1 process x 1 replica with the micro-batch doubled (max abs difference <= 1e-5 after
#     10 optimizer steps), launched with IPUOF_PROCESS_ID / IPUOF_NUM_PROCESSES and a job
#     key of the launch (IPUOF_JOB_KEY), and with `mpirun --oversubscribe
#     --allow-run-as-root -np 2` (whose job id is the key);
#   - a job whose second process never comes ends after job_timeout with an error naming it;
#   - a job whose second process is killed mid-run ends at once for the first, naming it;
#   - different options or seeds between the processes are refused naming both values;
#   - afterwards every IPU is free and the daemon exits 0 on SIGTERM.
# Weights are compared with Debian's python3 and its onnx and numpy (test dependencies).
# Usage: sh tests/integ/test_jobs.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
DATA=${IPUOF_MNIST_DATA:-/usr/share/datasets/fashion-mnist}
PY=${IPUOF_PYTHON:-/usr/bin/python3}
testd_sh_init jobs-test
testd_sh_need_mnist "$DATA"

printf '[server]\njob_timeout = 2\n' >"$D/conf"
testd_sh_must_start "$B" "$D" --config "$D/conf"
MNIST="$B/bin/ipuof-mnist"
# 10 optimizer steps: 2 calls of 5 device iterations; 320 samples = 2 x (8 x 5 x 2 x 2).
ARGS="--data $DATA --epochs 1 --limit-train 320 --limit-test 80 --device-iterations 5
      --gradient-accumulation 2 --quiet"

# Max abs difference of the initializers of two saved models, printed; status 0 when
# <= 1e-5.
close() {
    "$PY" - "$1" "$2" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import numpy_helper

def load(path):
    return {t.name: numpy_helper.to_array(t).astype(np.float64)
            for t in onnx.load(path).graph.initializer}

a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys(), "different weights"
d = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
print("max abs difference %.3g over %d weights" % (d, len(a)))
sys.exit(0 if d <= 1e-5 else 1)
EOF
}

# References: one process with 2 replicas, one with 1 replica and the micro-batch doubled.
# shellcheck disable=SC2086
"$MNIST" $ARGS --batch-size 8 --replicas 2 --save "$D/r2.onnx" >"$D/r2.out" 2>&1
check "1 process x 2 replicas trains ($(tail -c 300 "$D/r2.out"))" [ -s "$D/r2.onnx" ]
# shellcheck disable=SC2086
"$MNIST" $ARGS --batch-size 16 --save "$D/b16.onnx" >"$D/b16.out" 2>&1
check "1 process x 1 replica, micro-batch 16, trains" [ -s "$D/b16.onnx" ]
m=$(close "$D/r2.onnx" "$D/b16.onnx")
check "micro-batch doubled = 2 replicas: $m" close "$D/r2.onnx" "$D/b16.onnx"

# Two processes with environment variables.
for p in 0 1; do
    # shellcheck disable=SC2086
    IPUOF_JOB_KEY=env-$$ IPUOF_PROCESS_ID=$p IPUOF_NUM_PROCESSES=2 "$MNIST" $ARGS \
        --batch-size 8 --save "$D/env.onnx" >"$D/env$p.out" 2>&1 &
    eval "k$p=\$!"
    KIDS="$KIDS $!"
done
# shellcheck disable=SC2154
wait "$k0"; rc0=$?
wait "$k1"; rc1=$?
KIDS=""
check "2 processes (IPUOF_PROCESS_ID/IPUOF_NUM_PROCESSES) exit 0 ($rc0, $rc1: \
$(tail -c 300 "$D/env1.out"))" [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ]
check "process 0 prints the test accuracy, process 1 does not" \
    sh -c "grep -q '^Accuracy on test set' '$D/env0.out' && ! grep -q Accuracy '$D/env1.out'"
m=$(close "$D/r2.onnx" "$D/env.onnx")
check "2 processes x 1 replica (env) = 1 process x 2 replicas: $m" \
    close "$D/r2.onnx" "$D/env.onnx"
m=$(close "$D/b16.onnx" "$D/env.onnx")
check "2 processes x 1 replica (env) = 1 process, micro-batch doubled: $m" \
    close "$D/b16.onnx" "$D/env.onnx"

# Two processes with mpirun (Open MPI's OMPI_COMM_WORLD_RANK / _SIZE).
if command -v mpirun >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    timeout 300 mpirun --oversubscribe --allow-run-as-root -np 2 -x IPUOF_SERVER "$MNIST" $ARGS \
        --batch-size 8 --save "$D/mpi.onnx" >"$D/mpi.out" 2>&1
    rc=$?
    check "mpirun -np 2 ipuof-mnist exits 0 ($rc: $(tail -c 300 "$D/mpi.out"))" [ "$rc" -eq 0 ]
    m=$(close "$D/r2.onnx" "$D/mpi.onnx")
    check "2 processes x 1 replica (mpirun) = 1 process x 2 replicas: $m" \
        close "$D/r2.onnx" "$D/mpi.onnx"
else
    not_ok "mpirun is missing (Debian package openmpi-bin, a test dependency)"
fi

# A second process that never comes: job_timeout (2 s), then an error naming it. Meanwhile
# ipuctl status shows the job's processes against its partition.
start=$(date +%s)
# shellcheck disable=SC2086
IPUOF_PROCESS_ID=0 IPUOF_NUM_PROCESSES=2 IPUOF_PARTITION=lonely "$MNIST" $ARGS \
    --batch-size 8 >"$D/alone.out" 2>&1 &
k0=$!
KIDS="$k0"
i=0
while ! grep -q "job 'lonely': 2 processes" "$D/log" && [ $i -lt 200 ]; do
    sleep 0.02; i=$((i + 1))
done
"$B/bin/ipuctl" status >"$D/jobstatus" 2>&1
"$B/bin/ipuctl" status --json >"$D/jobstatus.json" 2>&1
wait "$k0"
rc=$?
KIDS=""
secs=$(( $(date +%s) - start ))
check "ipuctl status shows the job's processes: pid, address, process id ($(cat "$D/jobstatus"))" \
    sh -c "grep -Eq '^\| lonely +\| +0 of 2 \| attaching \| ipuof-mnist\[$k0\]@127\.0\.0\.1:[0-9]+ \|' '$D/jobstatus' &&
           grep -Eq '^\| lonely +\| +1 of 2 \| absent +\| - ' '$D/jobstatus' &&
           grep -q '\"job_processes\":\[{\"partition\":\"lonely\",\"process_id\":0,\"num_processes\":2,\"state\":\"attaching\",\"holder\":{' '$D/jobstatus.json'"
check "a job whose process 1 never comes fails after job_timeout ($rc, ${secs} s: \
$(tail -c 300 "$D/alone.out"))" \
    sh -c "[ $rc -eq 1 ] && [ $secs -lt 30 ] && grep -q \"the job on partition 'lonely' waited 2 s (job_timeout) for process 1 of 2 to attach\" '$D/alone.out'"

# A second process killed mid-run: the first ends at once with an error naming it.
LONG="--data $DATA --epochs 1 --limit-train 20000 --limit-test 80 --batch-size 8
      --device-iterations 1 --gradient-accumulation 1 --quiet"
# shellcheck disable=SC2086
IPUOF_JOB_KEY=kill-$$ IPUOF_PROCESS_ID=0 IPUOF_NUM_PROCESSES=2 "$MNIST" $LONG >"$D/kill0.out" 2>&1 &
k0=$!
# shellcheck disable=SC2086
IPUOF_JOB_KEY=kill-$$ IPUOF_PROCESS_ID=1 IPUOF_NUM_PROCESSES=2 "$MNIST" $LONG >"$D/kill1.out" 2>&1 &
k1=$!
KIDS="$k0 $k1"
i=0
while ! grep -q "compiled for 2 processes" "$D/log" 2>/dev/null || \
      [ "$(grep -c "compiled for 2 processes" "$D/log")" -lt 3 ]; do
    [ $i -ge 600 ] && break
    sleep 0.05; i=$((i + 1))
done
sleep 0.5
kill -9 "$k1"
start=$(date +%s)
wait "$k0"; rc=$?
secs=$(( $(date +%s) - start ))
wait "$k1" 2>/dev/null
KIDS=""
check "process 1 killed mid-run: process 0 exits 1 at once naming it ($rc, ${secs} s: \
$(tail -c 400 "$D/kill0.out"))" \
    sh -c "[ $rc -eq 1 ] && [ $secs -lt 20 ] && grep -q 'process 1 of the job on partition .* disconnected' '$D/kill0.out'"

# Different options, different seeds: refused naming both values.
for p in 0 1; do
    # shellcheck disable=SC2086
    IPUOF_JOB_KEY=opt-$$ IPUOF_PROCESS_ID=$p IPUOF_NUM_PROCESSES=2 "$MNIST" $ARGS \
        --batch-size $((8 * (p + 1))) \
        >"$D/opt$p.out" 2>&1 &
    eval "k$p=\$!"
done
wait "$k0"; rc0=$?
wait "$k1"; rc1=$?
check "different micro-batches are refused naming both ($rc0, $rc1: $(tail -c 300 "$D/opt0.out"))" \
    sh -c "[ $rc0 -eq 1 ] && [ $rc1 -eq 1 ] && grep -q 'micro_batch is 8 in process 0 and 16 in process 1' '$D/opt0.out' && grep -q 'micro_batch is 8 in process 0 and 16 in process 1' '$D/opt1.out'"
for p in 0 1; do
    # shellcheck disable=SC2086
    IPUOF_JOB_KEY=seed-$$ IPUOF_PROCESS_ID=$p IPUOF_NUM_PROCESSES=2 "$MNIST" $ARGS \
        --batch-size 8 --load "$D/r2.onnx" --seed $((p + 1)) >"$D/seed$p.out" 2>&1 &
    eval "k$p=\$!"
done
wait "$k0"; rc0=$?
wait "$k1"; rc1=$?
check "different seeds are refused ($rc0, $rc1: $(tail -c 300 "$D/seed1.out"))" \
    sh -c "[ $rc0 -eq 1 ] && [ $rc1 -eq 1 ] && grep -q 'random seeds differ: process 0 has 1, process 1 has 2' '$D/seed1.out'"

"$B/bin/ipuctl" status >"$D/status" 2>&1
check "every IPU is free again with no memory used ($(cat "$D/status"))" \
    sh -c "[ \$(grep -c '| free  | -         | -      | 0 B / ' '$D/status') -eq 4 ]"

testd_sh_stop
testd_sh_end
