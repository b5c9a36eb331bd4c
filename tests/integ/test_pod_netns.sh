#!/bin/sh
# A partition spanning two ipuofd hosts (issue 20): two network namespaces joined by a veth
# pair (ip netns; root), one daemon in each with a [pod] section (its Pod port on the
# veth address, a token), and the client processes in the namespace of their daemon:
#   - each daemon sees the other reachable with its IPUs (ipuctl status --json);
#   - the tutorial network (ipuof-mnist): 2 daemons x 2 replicas (process 0 on host-a,
#     process 1 on host-b, IPUOF_POD_HOSTS=host-a,host-b) reach the weights of 1 daemon x 4
#     replicas after 10 optimizer steps;
#   - a BatchNorm network through PopTorch (tests/integ/pod_train.py, popdist's variables):
#     2 instances x 2 replicas over the two daemons, and on one daemon, against one process
#     of 4 replicas: every process's whole state (parameters and running statistics) equal;
#   - pipelined replicas across hosts: one replica pipelined over 4 IPUs on each daemon
#     reaches the weights of one daemon of 8 IPUs holding both replicas;
#   - PopTorch's inputReplicaGrouping(2, Consecutive) over the two daemons = the same job
#     on one;
#   - processes whose models differ between the daemons are refused at the first call;
#   - with tc netem delaying the link (20 ms each way; where the kernel has sch_netem,
#     else a listed skip) and over a link limited to 20 Mbit/s by tbf, the tutorial still
#     matches;
#   - the same through IPUoF config files (one per GCD, attributes."Pod hosts") on a V-IPU
#     partition of each daemon;
#   - with [pod] sum = daemons (each daemon's sum, then gloo's ring) within 1e-5 of them;
#   - a fault --at collective armed on host-b: both processes get PARTITION_RESET naming
#     host-b after 2 calls, and every IPU is back in the pool;
#   - link faults armed on host-a (issue 22): link:partition:host-b shows host-b unreachable
#     and fails a Pod job's first call with PARTITION_RESET naming host-b's link, the IPUs
#     come back; link:latency=150:host-b delays each collective run and the weights match;
#   - host-b's daemon killed (SIGKILL) mid-run: the process on host-a gets PopTorch's
#     RecoverableError with PARTITION_RESET naming host-b within [pod] timeout_ms (+ the
#     time to notice a closed connection), host-a's IPUs are back in the pool, and with
#     host-b started again a new partition forms and trains.
# Exactly (max abs difference 0, printed): the daemons sum every replica's gradient
# left to right in rank-major order ([pod] sum = replicas, the default), ((g0 + g1) + g2) + g3 as
# one daemon with the 4 replicas does.
# The namespaces are removed on every exit (trap). Not root: exit 77 (tests/skips.txt).
# Commands enter a namespace with nsenter --net (util-linux), not `ip netns exec` / `ip -n`:
# those remount / (make-rslave) in a mount namespace of their own, which fails in a chroot
# ("mount --make-rslave / failed: Invalid argument"), where the fresh-root check runs make test.
# Usage: sh tests/integ/test_pod_netns.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
DATA=${IPUOF_MNIST_DATA:-/usr/share/datasets/fashion-mnist}
PY=${IPUOF_PYTHON:-/usr/bin/python3}
if [ "$(id -u)" -ne 0 ]; then
    echo "skip: network namespaces need root (CI runs as root)"
    exit 77
fi
command -v ip >/dev/null || { echo "not ok - ip is missing (Debian package iproute2)"; exit 1; }
testd_sh_init pod-test
N=$$
NA=ipuof-pa-$N NB=ipuof-pb-$N
NET=10.$((200 + N % 50)).$((N / 50 % 250)).
PA="" PB=""
NETNS_MOUNTED=no
mountpoint -q /run/netns 2>/dev/null && NETNS_MOUNTED=yes
# testd.sh's trap: this, then KIDS killed and D removed
testd_sh_undo() {
    [ -n "$PA" ] && kill -9 "$PA" 2>/dev/null
    [ -n "$PB" ] && kill -9 "$PB" 2>/dev/null
    ip netns del "$NA" 2>/dev/null
    ip netns del "$NB" 2>/dev/null
    # `ip netns add` bind-mounts /run/netns on itself; in a chroot (make test in a fresh
    # root) that mount would pin the root's directory after the test. Leave it as found:
    # unmounted again when the test made it and no namespace is left there.
    if [ "$NETNS_MOUNTED" = no ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
        umount /run/netns 2>/dev/null
    fi
}

# all_zero RC...: every exit status given is 0 (one command, so `check` sees all of them:
# `check W [ a ] && [ b ]` would check only a)
all_zero() {
    for rc in "$@"; do [ "$rc" -eq 0 ] || return 1; done
}

ip netns add "$NA" && ip netns add "$NB" &&
    ip link add "pva$N" type veth peer name "pvb$N" &&
    ip link set "pva$N" netns "$NA" && ip link set "pvb$N" netns "$NB" &&
    nsenter --net=/run/netns/"$NA" -- ip addr add "${NET}1/24" dev "pva$N" && nsenter --net=/run/netns/"$NB" -- ip addr add "${NET}2/24" dev "pvb$N" &&
    nsenter --net=/run/netns/"$NA" -- ip link set "pva$N" up && nsenter --net=/run/netns/"$NB" -- ip link set "pvb$N" up &&
    nsenter --net=/run/netns/"$NA" -- ip link set lo up && nsenter --net=/run/netns/"$NB" -- ip link set lo up ||
    { echo "not ok - cannot make the namespaces"; exit 1; }

# conf NAME ADDR PEER PEERADDR
conf() {
    printf '[server]\njob_timeout = 30\n[pod]\nname = %s\nlisten = %s:50053\n' "$1" "$2"
    printf 'peers = %s=%s:50053\ntoken = pod-%s\nhello_interval = 1\ntimeout_ms = 4000\n' \
        "$3" "$4" "$N"
}
conf host-a "${NET}1" host-b "${NET}2" >"$D/a.conf"
conf host-b "${NET}2" host-a "${NET}1" >"$D/b.conf"

# start NS NAME: the daemon of host NAME in namespace NS; sets its pid and port
start() {
    rm -f "$D/$2.port"
    nsenter --net=/run/netns/"$1" -- "$B/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$D/$2.port" \
        --foreground --config "$D/$2.conf" --admin-socket "$D/$2.sock" >>"$D/$2.log" 2>&1 &
    pid=$!
    i=0
    while [ ! -s "$D/$2.port" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
    [ -s "$D/$2.port" ] || { echo "not ok - ipuofd $2 did not start: $(cat "$D/$2.log")"; exit 1; }
    if [ "$2" = a ]; then PA=$pid; else PB=$pid; fi
}
start "$NA" a
start "$NB" b
SA="127.0.0.1:$(cat "$D/a.port")" SB="127.0.0.1:$(cat "$D/b.port")"

# state NS SERVER HOST: host HOST's state in the status of the daemon at SERVER
state() {
    IPUOF_SERVER=$2 nsenter --net=/run/netns/"$1" -- "$B/bin/ipuctl" status --json 2>/dev/null |
        "$PY" -c 'import json,sys
for h in json.load(sys.stdin)["pod_hosts"]:
    if h["name"] == sys.argv[1]: print(h["state"], h["ipus"])' "$3"
}
i=0
while [ "$(state "$NA" "$SA" host-b)" != "reachable 4" ] && [ $i -lt 100 ]; do
    sleep 0.1; i=$((i + 1)); done
check "host-a sees host-b reachable with 4 IPUs ($(state "$NA" "$SA" host-b))" \
    [ "$(state "$NA" "$SA" host-b)" = "reachable 4" ]
check "host-b sees host-a reachable with 4 IPUs ($(state "$NB" "$SB" host-a))" \
    [ "$(state "$NB" "$SB" host-a)" = "reachable 4" ]

# Max abs difference of the initializers of two saved models; 0 when it is 0 (the daemons
# sum every replica's gradient left to right, as one daemon does: the same bits).
close() {
    "$PY" - "$1" "$2" <<'EOF2'
import os
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
sys.exit(0 if d <= float(os.environ.get("TOL", "0")) else 1)
EOF2
}

MNIST="$B/bin/ipuof-mnist"
# 10 optimizer steps: 2 calls of 5 device iterations, 8 x 5 x 1 x 4 samples each.
ARGS="--data $DATA --epochs 1 --limit-train 320 --limit-test 80 --device-iterations 5
      --gradient-accumulation 1 --batch-size 8 --optimizer sgd --quiet"
# shellcheck disable=SC2086
IPUOF_SERVER=$SA nsenter --net=/run/netns/"$NA" -- "$MNIST" $ARGS --replicas 4 --save "$D/r4.onnx" \
    >"$D/r4.out" 2>&1
check "1 daemon x 4 replicas trains ($(tail -c 200 "$D/r4.out"))" [ -s "$D/r4.onnx" ]

# pod_mnist OUT: process 0 on host-a, 1 on host-b, 2 replicas each (or the arguments of
# $PODARGS); rc0 and rc1 are their exit statuses
pod_mnist() {
    for p in 0 1; do
        if [ $p = 0 ]; then ns=$NA srv=$SA; else ns=$NB srv=$SB; fi
        # shellcheck disable=SC2086
        IPUOF_SERVER=$srv IPUOF_POD_HOSTS=host-a,host-b IPUOF_JOB_KEY=pod-$N-$1 \
            IPUOF_PROCESS_ID=$p IPUOF_NUM_PROCESSES=2 timeout 300 nsenter --net=/run/netns/"$ns" -- \
            "$MNIST" ${PODARGS:-$ARGS --replicas 2} --save "$D/$1.onnx" >"$D/$1.$p.out" 2>&1 &
        eval "k$p=\$!"
        KIDS="$KIDS $!"
    done
    # shellcheck disable=SC2154
    wait "$k0"; rc0=$?
    wait "$k1"; rc1=$?
    KIDS=""
}
pod_mnist pod
check "tutorial, 2 daemons x 2 replicas: both processes exit 0 ($rc0, $rc1: $(tail -c 200 \
"$D/pod.1.out"))" all_zero "$rc0" "$rc1"
m=$(close "$D/r4.onnx" "$D/pod.onnx")
check "tutorial, 2 daemons x 2 replicas = 1 daemon x 4 replicas: $m" close "$D/r4.onnx" "$D/pod.onnx"

# The BatchNorm network through PopTorch and popdist's variables.
export IPUOF_CLIENT_LIB="$PWD/$B/lib/libipuof-client.so" PYTHONPATH="$PWD/python"
# A sanitizer build's library in Python needs the runtimes preloaded (as test_poprun.sh).
PRELOAD=""
if nm -D "$IPUOF_CLIENT_LIB" 2>/dev/null | grep -q __asan_init; then
    PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
fi
IPUOF_SERVER=$SA timeout 300 nsenter --net=/run/netns/"$NA" -- env LD_PRELOAD="$PRELOAD" ASAN_OPTIONS=detect_leaks=0 \
    "$PY" tests/integ/pod_train.py 4 \
    >"$D/bn1.out" 2>&1
# same_state REF OUT...: the whole state (parameters and buffers, as each process read it
# back) of every instance whose output is one of the files OUT equals the state in REF (of
# 4 replicas in all), bit for bit; prints the largest difference per instance.
same_state() {
    "$PY" - "$@" <<'EOF2'
import json, sys
def state(path):
    for line in open(path):
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit("no state in " + path)
ref = state(sys.argv[1])
assert ref["replicas"] == 4, ref
said, ok = [], True
for path in sys.argv[2:]:
    b = state(path)
    assert (b["instances"], b["replicas"]) == (2, 4), b
    assert ref["state"].keys() == b["state"].keys()
    d, worst = 0.0, ""
    for k in ref["state"]:
        dk = max(abs(x - y) for x, y in zip(ref["state"][k], b["state"][k]))
        if dk > d:
            d, worst = dk, k
    ok = ok and d == 0
    said.append("instance %d: %.3g%s" % (b["instance"], d, " (%s)" % worst if worst else ""))
print("max abs difference over %d tensors (running statistics included): %s"
      % (len(ref["state"]), ", ".join(said)))
sys.exit(0 if ok else 1)
EOF2
}
# bn_pair TAG POD: pod_train.py as 2 instances x 2 replicas under popdist's variables,
# process 1 on host-b's daemon when POD is 1 (IPUOF_POD_HOSTS), else both on host-a's.
bn_pair() {
    for p in 0 1; do
        ns=$NA srv=$SA hosts=""
        if [ "$2" = 1 ]; then
            hosts=host-a,host-b
            [ $p = 1 ] && ns=$NB srv=$SB
        fi
        IPUOF_SERVER=$srv IPUOF_POD_HOSTS=$hosts IPUOF_JOB_KEY=$1-$N IPUOF_PROCESS_ID=$p \
            IPUOF_NUM_PROCESSES=2 POPDIST_NUM_TOTAL_REPLICAS=4 POPDIST_NUM_IPUS_PER_REPLICA=1 \
            POPDIST_NUM_LOCAL_REPLICAS=2 POPDIST_REPLICA_INDEX_OFFSET=$((2 * p)) \
            timeout 300 nsenter --net=/run/netns/"$ns" -- env LD_PRELOAD="$PRELOAD" ASAN_OPTIONS=detect_leaks=0 \
            "$PY" tests/integ/pod_train.py >"$D/$1.$p.out" 2>&1 &
        eval "k$p=\$!"
        KIDS="$KIDS $!"
    done
    wait "$k0"; rc0=$?
    wait "$k1"; rc1=$?
    KIDS=""
}
bn_pair bn2 1
check "BatchNorm, 2 instances x 2 replicas over 2 daemons exit 0 ($rc0, $rc1: \
$(grep -v "^{" "$D/bn2.1.out" | tail -c 300))" all_zero "$rc0" "$rc1"
m=$(same_state "$D/bn1.out" "$D/bn2.0.out" "$D/bn2.1.out")
check "BatchNorm, 2 daemons x 2 replicas = 1 x 4 for every process: $m" [ $? -eq 0 ]
bn_pair bn3 0
check "BatchNorm, 2 instances x 2 replicas on one daemon exit 0 ($rc0, $rc1: \
$(grep -v "^{" "$D/bn3.1.out" | tail -c 300))" all_zero "$rc0" "$rc1"
m=$(same_state "$D/bn1.out" "$D/bn3.0.out" "$D/bn3.1.out")
check "BatchNorm, 2 instances x 2 replicas on one daemon = 1 x 4 for every process: $m" [ $? -eq 0 ]
# Instance 0 loads the optimizer's state (momentum halved) after the second call: written
# on host-a's daemon, it reaches host-b's at the next call, as on one daemon.
export POD_TRAIN_LOAD=1
IPUOF_SERVER=$SA timeout 300 nsenter --net=/run/netns/"$NA" -- env LD_PRELOAD="$PRELOAD" ASAN_OPTIONS=detect_leaks=0 \
    "$PY" tests/integ/pod_train.py 4 >"$D/bnl1.out" 2>&1
bn_pair bnl2 1
unset POD_TRAIN_LOAD
check "optimizer state loaded by instance 0, 2 instances x 2 replicas over 2 daemons exit 0 \
($rc0, $rc1: $(grep -v "^{" "$D/bnl2.1.out" | tail -c 300))" all_zero "$rc0" "$rc1"
m=$(same_state "$D/bnl1.out" "$D/bnl2.0.out" "$D/bnl2.1.out")
check "optimizer state loaded by instance 0: 2 daemons x 2 replicas = 1 x 4 for every process: \
$m" [ $? -eq 0 ]

# inputReplicaGrouping (CommGroup of input replicas) across a Pod: a group is a process's
# own replicas, wherever the process runs, so 2 processes x 2 replicas in groups of 2 over
# the two daemons reach the weights of the same 2 processes on host-a's daemon alone.
# (The Python package expands a group's input to its replicas itself; the daemon's own
# input groups across a Pod are tests/integ/test_input_groups.c's.)
# group_pair OUT POD: the two instances, on both daemons when POD is 1
group_pair() {
    for p in 0 1; do
        ns=$NA srv=$SA hosts=""
        if [ "$2" = 1 ]; then
            hosts=host-a,host-b
            [ $p = 1 ] && ns=$NB srv=$SB
        fi
        IPUOF_SERVER=$srv IPUOF_POD_HOSTS=$hosts IPUOF_JOB_KEY=$1-$N IPUOF_PROCESS_ID=$p \
            IPUOF_NUM_PROCESSES=2 POPDIST_NUM_TOTAL_REPLICAS=4 POPDIST_NUM_IPUS_PER_REPLICA=1 \
            POPDIST_NUM_LOCAL_REPLICAS=2 POPDIST_REPLICA_INDEX_OFFSET=$((2 * p)) \
            POD_TRAIN_GROUP="2 Consecutive" timeout 300 nsenter --net=/run/netns/"$ns" -- \
            env LD_PRELOAD="$PRELOAD" ASAN_OPTIONS=detect_leaks=0 \
            "$PY" tests/integ/pod_train.py >"$D/$1.$p.out" 2>&1 &
        eval "k$p=\$!"
        KIDS="$KIDS $!"
    done
    wait "$k0"; rc0=$?
    wait "$k1"; rc1=$?
    KIDS=""
}
group_pair grp1 0
check "input groups, 2 instances x 2 replicas on one daemon exit 0 ($rc0, $rc1: \
$(tail -c 300 "$D/grp1.1.out"))" [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ]
group_pair grp2 1
check "input groups, 2 instances x 2 replicas over 2 daemons exit 0 ($rc0, $rc1: \
$(tail -c 300 "$D/grp2.1.out"))" [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ]
m=$(same_state "$D/grp1.0.out" "$D/grp1.1.out" "$D/grp2.0.out" "$D/grp2.1.out")
check "input groups over 2 daemons = on 1 daemon, every process: $m" [ $? -eq 0 ]

# Processes whose models differ between the daemons (another micro-batch): refused at the
# first call on both hosts, naming what differs, not trained on mismatched gradients.
for p in 0 1; do
    if [ $p = 0 ]; then ns=$NA srv=$SA bs=8; else ns=$NB srv=$SB bs=16; fi
    # shellcheck disable=SC2086
    IPUOF_SERVER=$srv IPUOF_POD_HOSTS=host-a,host-b IPUOF_JOB_KEY=diff-$N \
        IPUOF_PROCESS_ID=$p IPUOF_NUM_PROCESSES=2 timeout 300 nsenter --net=/run/netns/"$ns" -- \
        "$MNIST" $(echo "$ARGS" | sed 's/--batch-size 8//') --batch-size $bs --replicas 2 \
        >"$D/diff.$p.out" 2>&1 &
    eval "k$p=\$!"
    KIDS="$KIDS $!"
done
wait "$k0"; rc0=$?
wait "$k1"; rc1=$?
KIDS=""
check "models that differ between the daemons are refused on both ($rc0, $rc1: \
$(tail -c 250 "$D/diff.0.out"))" sh -c "[ $rc0 -ne 0 ] && [ $rc1 -ne 0 ] &&
    grep -q \"differs between the Pod's daemons\" '$D/diff.0.out' &&
    grep -q \"differs between the Pod's daemons\" '$D/diff.1.out'"

# A slower link: tc netem's 20 ms each way where the kernel has sch_netem, and a link
# limited to 20 Mbit/s by tbf (with its queueing delay) in any case.
if nsenter --net=/run/netns/"$NA" -- tc qdisc add dev "pva$N" root netem delay 20ms 2>"$D/tc.err" &&
    nsenter --net=/run/netns/"$NB" -- tc qdisc add dev "pvb$N" root netem delay 20ms 2>>"$D/tc.err"; then
    pod_mnist slow
    check "tutorial with netem 20 ms each way: both processes exit 0 ($rc0, $rc1)" \
        all_zero "$rc0" "$rc1"
    m=$(close "$D/r4.onnx" "$D/slow.onnx")
    check "tutorial with netem = 1 daemon x 4 replicas: $m" close "$D/r4.onnx" "$D/slow.onnx"
    nsenter --net=/run/netns/"$NA" -- tc qdisc del dev "pva$N" root 2>/dev/null
    nsenter --net=/run/netns/"$NB" -- tc qdisc del dev "pvb$N" root 2>/dev/null
else
    echo "ok - tutorial with netem 20 ms each way # SKIP this kernel has no sch_netem: $(cat "$D/tc.err")"
    pass=$((pass + 1))
fi
nsenter --net=/run/netns/"$NA" -- tc qdisc add dev "pva$N" root tbf rate 20mbit burst 32kbit latency 100ms &&
    nsenter --net=/run/netns/"$NB" -- tc qdisc add dev "pvb$N" root tbf rate 20mbit burst 32kbit latency 100ms ||
    not_ok "tc tbf on the veth pair"
pod_mnist tbf
check "tutorial over a 20 Mbit/s link (tbf): both processes exit 0 ($rc0, $rc1)" \
    all_zero "$rc0" "$rc1"
m=$(close "$D/r4.onnx" "$D/tbf.onnx")
check "tutorial over 20 Mbit/s = 1 daemon x 4 replicas: $m" close "$D/r4.onnx" "$D/tbf.onnx"
nsenter --net=/run/netns/"$NA" -- tc qdisc del dev "pva$N" root 2>/dev/null
nsenter --net=/run/netns/"$NB" -- tc qdisc del dev "pvb$N" root 2>/dev/null

# Pipelined replicas across hosts: the tutorial's blocks B1..B4 pipelined over 4 IPUs per
# replica, one replica on each daemon (all of a replica's stages on one host), against one
# daemon of 8 IPUs holding both replicas (a daemon outside the Pod, in host-a's namespace).
PARGS="--data $DATA --epochs 1 --limit-train 640 --limit-test 80 --device-iterations 5
       --gradient-accumulation 4 --batch-size 8 --optimizer sgd --quiet --strategy pipelined"
nsenter --net=/run/netns/"$NA" -- "$B/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$D/r8.port" --ipus 8 \
    --foreground --admin-socket "$D/r8.sock" >>"$D/r8.log" 2>&1 &
PR=$!
KIDS="$PR"
i=0
while [ ! -s "$D/r8.port" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
# shellcheck disable=SC2086
IPUOF_SERVER="127.0.0.1:$(cat "$D/r8.port")" nsenter --net=/run/netns/"$NA" -- "$MNIST" $PARGS --replicas 2 \
    --save "$D/p2.onnx" >"$D/p2.out" 2>&1
check "pipelined, 1 daemon x 2 replicas x 4 IPUs trains ($(tail -c 200 "$D/p2.out"))" \
    [ -s "$D/p2.onnx" ]
kill -TERM "$PR"
wait "$PR"
KIDS=""
PODARGS="$PARGS --replicas 1" pod_mnist pipe
check "pipelined, 2 daemons x 1 replica x 4 IPUs: both processes exit 0 ($rc0, $rc1: \
$(tail -c 200 "$D/pipe.1.out"))" [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ]
m=$(close "$D/p2.onnx" "$D/pipe.onnx")
check "pipelined, 2 daemons x 1 replica = 1 daemon x 2 replicas: $m" \
    close "$D/p2.onnx" "$D/pipe.onnx"

# pod_train_pair TAG CALLS: pod_train.py (popdist's variables, 2 of 4 replicas each) as
# process 0 on host-a and process 1 on host-b, CALLS calls, job key TAG-$N, output to
# $D/TAG.P.out; started in the background (k0, k1; in KIDS for the cleanup).
pod_train_pair() {
    for p in 0 1; do
        if [ $p = 0 ]; then ns=$NA srv=$SA; else ns=$NB srv=$SB; fi
        POD_TRAIN_CALLS=$2 IPUOF_SERVER=$srv IPUOF_POD_HOSTS=host-a,host-b \
            IPUOF_JOB_KEY=$1-$N IPUOF_PROCESS_ID=$p IPUOF_NUM_PROCESSES=2 \
            POPDIST_NUM_TOTAL_REPLICAS=4 POPDIST_NUM_IPUS_PER_REPLICA=1 \
            POPDIST_NUM_LOCAL_REPLICAS=2 POPDIST_REPLICA_INDEX_OFFSET=$((2 * p)) \
            timeout 300 nsenter --net=/run/netns/"$ns" -- env LD_PRELOAD="$PRELOAD" \
            ASAN_OPTIONS=detect_leaks=0 "$PY" tests/integ/pod_train.py >"$D/$1.$p.out" 2>&1 &
        eval "k$p=\$!"
        KIDS="$KIDS $!"
    done
}

# free_ipus NS SERVER: how many IPUs the daemon at SERVER (in namespace NS) has free.
free_ipus() {
    IPUOF_SERVER=$2 nsenter --net=/run/netns/"$1" -- "$B/bin/ipuctl" status --json | "$PY" -c \
        'import json,sys; print(sum(i["state"] == "free" for i in json.load(sys.stdin)["ipus"]))'
}

# host-b's daemon killed mid-run.
pod_train_pair kill 100000
i=0
while ! grep -q "call 3 done" "$D/kill.0.out" 2>/dev/null && [ $i -lt 600 ]; do
    sleep 0.1; i=$((i + 1)); done
check "the job trains across the two daemons before the kill" grep -q "call 3 done" "$D/kill.0.out"
t0=$(date +%s%N)
kill -9 "$PB"
PB=""
wait "$k0"; rc0=$?
t1=$(date +%s%N)
wait "$k1"
KIDS=""
ms=$(( (t1 - t0) / 1000000 ))
said=$(grep RecoverableError "$D/kill.0.out")
check "process 0 gets RecoverableError PARTITION_RESET naming host-b in $ms ms ($said)" \
    sh -c '[ "$1" -eq 3 ] && printf "%s\n" "$2" | grep -q "RecoverableError PARTITION_RESET: .*host-b"' \
    sh "$rc0" "$said"
# Seen here: 1.0-2.5 s. The bound shows the process is told instead of hanging; it leaves a
# loaded CI machine 8 s of scheduling delay on top of timeout_ms (no timing decides a test
# by a margin a busy machine can eat).
check "told within timeout_ms (4000) + 8 s (no hang): $ms ms" [ "$ms" -le 12000 ]
free=$(free_ipus "$NA" "$SA")
check "host-a's 4 IPUs are back in the pool ($free free)" [ "$free" = 4 ]
i=0
while [ "$(state "$NA" "$SA" host-b | cut -d' ' -f1)" != unreachable ] && [ $i -lt 100 ]; do
    sleep 0.1; i=$((i + 1)); done
check "host-a sees host-b unreachable" [ "$(state "$NA" "$SA" host-b | cut -d' ' -f1)" = unreachable ]
start "$NB" b
SB="127.0.0.1:$(cat "$D/b.port")"
pod_mnist again
check "host-b restarted: a new partition forms and trains ($rc0, $rc1)" \
    all_zero "$rc0" "$rc1"
m=$(close "$D/r4.onnx" "$D/again.onnx")
check "and reaches the same weights: $m" close "$D/r4.onnx" "$D/again.onnx"

# A fault at collective for host-b's IPUs (--host host-b): refused by host-a's daemon,
# naming the daemon to give it to; armed on host-b's: host-b leaves the job at the third
# training run's first collective; both processes, on both daemons, get RecoverableError
# PARTITION_RESET naming host-b; the IPUs come back.
nsenter --net=/run/netns/"$NA" -- "$B/bin/ipuctl" --admin-socket "$D/a.sock" fault inject --host host-b \
    --kind recoverable:PARTITION_RESET --at collective >"$D/fault.a.out" 2>&1
rc=$?
check "host-a's daemon refuses a fault for host-b's IPUs, naming host-b's daemon (rc $rc: \
$(cat "$D/fault.a.out"))" grep -q "give the fault to host 'host-b''s daemon" "$D/fault.a.out"
nsenter --net=/run/netns/"$NB" -- "$B/bin/ipuctl" --admin-socket "$D/b.sock" fault inject --host host-b \
    --kind recoverable:PARTITION_RESET --at collective --after-runs 2 >"$D/fault.out" 2>&1 ||
    not_ok "ipuctl fault inject --host host-b --at collective on host-b: $(cat "$D/fault.out")"
pod_train_pair fault 100000
wait "$k0"; rc0=$?
wait "$k1"; rc1=$?
KIDS=""
for p in 0 1; do
    said=$(grep RecoverableError "$D/fault.$p.out")
    rc=$rc0
    [ $p = 1 ] && rc=$rc1
    calls=$(grep -c "^call .* done" "$D/fault.$p.out")
    named=no
    echo "$said" | grep -q "RecoverableError PARTITION_RESET: .*Pod host 'host-b' .*went away" &&
        named=yes
    check "fault at collective on host-b: process $p trained 2 calls ($calls), then \
RecoverableError PARTITION_RESET naming host-b (rc $rc: $said)" \
        [ "$rc.$calls.$named" = 3.2.yes ]
done
check "process 1 (host-b) is told the injected fault: $(grep RecoverableError "$D/fault.1.out")" \
    grep -q "injected fault .* at collective" "$D/fault.1.out"
fired=$(nsenter --net=/run/netns/"$NB" -- "$B/bin/ipuctl" --admin-socket "$D/b.sock" fault list --json |
    "$PY" -c 'import json,sys; print(sum(f["fired"] for f in json.load(sys.stdin)))')
check "host-b's fault list: fired once ($fired)" [ "$fired" = 1 ]
nsenter --net=/run/netns/"$NB" -- "$B/bin/ipuctl" --admin-socket "$D/b.sock" fault clear >/dev/null
for h in a b; do
    if [ $h = a ]; then ns=$NA srv=$SA; else ns=$NB srv=$SB; fi
    free=$(free_ipus "$ns" "$srv")
    check "host-$h's 4 IPUs are back in the pool after the fault ($free free)" [ "$free" = 4 ]
done

# Link faults (issue 22): link:partition:host-b armed on host-a's daemon: host-a's status
# shows host-b unreachable naming the fault; a Pod job's first training run is cut, both
# processes get RecoverableError PARTITION_RESET, process 0's naming host-b's link; the
# IPUs come back. Cleared, link:latency=150:host-b: the tutorial trains to the same weights.
ipuctl_a() { nsenter --net=/run/netns/"$NA" -- "$B/bin/ipuctl" --admin-socket "$D/a.sock" "$@"; }
ipuctl_a fault inject --kind link:partition:host-b >"$D/link.out" 2>&1 ||
    not_ok "ipuctl fault inject --kind link:partition:host-b on host-a: $(cat "$D/link.out")"
i=0
while [ "$(state "$NA" "$SA" host-b | cut -d' ' -f1)" != unreachable ] && [ $i -lt 100 ]; do
    sleep 0.1; i=$((i + 1)); done
check "link:partition: host-a sees host-b unreachable ($(state "$NA" "$SA" host-b))" \
    [ "$(state "$NA" "$SA" host-b | cut -d' ' -f1)" = unreachable ]
pod_train_pair link 3
wait "$k0"; rc0=$?
wait "$k1"; rc1=$?
KIDS=""
for p in 0 1; do
    said=$(grep RecoverableError "$D/link.$p.out")
    rc=$rc0
    [ $p = 1 ] && rc=$rc1
    calls=$(grep -c "^call .* done" "$D/link.$p.out")
    check "link:partition: process $p gets RecoverableError PARTITION_RESET at its first \
call ($calls done, rc $rc: $said)" [ "$rc.$calls" = 3.0 ]
    check "and it says PARTITION_RESET" grep -q "RecoverableError PARTITION_RESET" "$D/link.$p.out"
done
check "process 0 (host-a) is told its link to host-b is partitioned: $(grep RecoverableError \
"$D/link.0.out")" grep -q "its link to Pod host 'host-b' is partitioned" "$D/link.0.out"
ipuctl_a fault clear >/dev/null
i=0
while [ "$(state "$NA" "$SA" host-b | cut -d' ' -f1)" != reachable ] && [ $i -lt 100 ]; do
    sleep 0.1; i=$((i + 1)); done
check "link healed: host-a sees host-b reachable" \
    [ "$(state "$NA" "$SA" host-b | cut -d' ' -f1)" = reachable ]
for h in a b; do
    if [ $h = a ]; then ns=$NA srv=$SA; else ns=$NB srv=$SB; fi
    free=$(free_ipus "$ns" "$srv")
    check "host-$h's 4 IPUs are back in the pool after the link partition ($free free)" \
        [ "$free" = 4 ]
done
ipuctl_a fault inject --kind link:latency=150:host-b >"$D/link.out" 2>&1 ||
    not_ok "ipuctl fault inject --kind link:latency=150:host-b: $(cat "$D/link.out")"
t0=$(date +%s)
pod_mnist lat
echo "# tutorial with link:latency=150:host-b on host-a took $(($(date +%s) - t0)) s"
check "link:latency=150: both processes exit 0 ($rc0, $rc1: $(tail -c 200 "$D/lat.0.out"))" \
    all_zero "$rc0" "$rc1"
m=$(close "$D/r4.onnx" "$D/lat.onnx")
check "link:latency=150: the same weights as 1 daemon x 4 replicas: $m" \
    close "$D/r4.onnx" "$D/lat.onnx"
check "host-a's log shows the delay" grep -q "link latency 150 ms before its collective run" \
    "$D/a.log"
ipuctl_a fault clear >/dev/null

# The operator's way: a V-IPU partition of 2 IPUs on each daemon, and an IPUoF config file
# per GCD naming its daemon and every daemon of the partition (attributes."Pod hosts").
for h in a b; do
    if [ $h = a ]; then ns=$NA; else ns=$NB; fi
    nsenter --net=/run/netns/"$ns" -- "$B/bin/vipu" --admin-socket "$D/$h.sock" create partition podpt \
        --size 2 >"$D/vipu.$h" 2>&1 || not_ok "vipu create partition on host-$h: $(cat "$D/vipu.$h")"
done
for g in 0 1; do
    if [ $g = 0 ]; then srv=$SA; else srv=$SB; fi
    printf '{"attributes": {"Partition Id": "podpt", "GCD Id": %d, "Num GCDs": 2, ' "$g" \
        >"$D/gcd$g.conf"
    printf '"Pod hosts": ["host-a", "host-b"]}, "servers": [{"address": "%s"}]}\n' "$srv" \
        >>"$D/gcd$g.conf"
done
for p in 0 1; do
    if [ $p = 0 ]; then ns=$NA; else ns=$NB; fi
    # shellcheck disable=SC2086
    IPUOF_CONFIG_PATH="$D/gcd$p.conf" IPUOF_JOB_KEY=conf-$N IPUOF_PROCESS_ID=$p \
        IPUOF_NUM_PROCESSES=2 timeout 300 nsenter --net=/run/netns/"$ns" -- \
        "$MNIST" $ARGS --replicas 2 --save "$D/conf.onnx" >"$D/conf.$p.out" 2>&1 &
    eval "k$p=\$!"
    KIDS="$KIDS $!"
done
wait "$k0"; rc0=$?
wait "$k1"; rc1=$?
KIDS=""
check "IPUoF config files with \"Pod hosts\" on V-IPU partitions: both exit 0 ($rc0, $rc1: \
$(tail -c 250 "$D/conf.1.out"))" all_zero "$rc0" "$rc1"
m=$(close "$D/r4.onnx" "$D/conf.onnx")
check "and reach the weights of 1 daemon x 4 replicas: $m" close "$D/r4.onnx" "$D/conf.onnx"

for h in a b; do
    pid=$PA
    [ $h = b ] && pid=$PB
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    check "ipuofd host-$h exits 0 on SIGTERM ($rc)" [ "$rc" -eq 0 ]
    if [ $h = a ]; then PA=""; else PB=""; fi
done
# [pod] sum = daemons: each daemon sums its replicas, then gloo's ring over the two sums:
# other rounding, (g0 + g1) + (g2 + g3), within 1e-5 of the 1 x 4 weights.
for h in a b; do printf 'sum = daemons\n' >>"$D/$h.conf"; done
start "$NA" a
start "$NB" b
SA="127.0.0.1:$(cat "$D/a.port")" SB="127.0.0.1:$(cat "$D/b.port")"
pod_mnist ring
check "sum = daemons: both processes exit 0 ($rc0, $rc1)" all_zero "$rc0" "$rc1"
m=$(TOL=1e-5 close "$D/r4.onnx" "$D/ring.onnx")
within() { TOL=1e-5 close "$1" "$2" >/dev/null; }
check "sum = daemons: within 1e-5 of 1 daemon x 4 replicas: $m" within "$D/r4.onnx" "$D/ring.onnx"
for h in a b; do
    pid=$PA
    [ $h = b ] && pid=$PB
    kill -TERM "$pid"
    wait "$pid"
    if [ $h = a ]; then PA=""; else PB=""; fi
done
grep -h -E "ERROR|runtime error|Sanitizer" "$D/a.log" "$D/b.log" && not_ok "sanitizer or error in the daemons' logs"

testd_sh_end
