#!/bin/sh
# vipu across the daemons of a Pod (issue 31, item 4): two network namespaces joined by a
# veth pair (ip netns; root), one ipuofd of 4 IPUs in each, its client port and its Pod port
# on its veth address (auth and admin tokens), a [pod] section naming the other. Then:
#   - each daemon's hello replies carry its client address: `vipu list allocations` on
#     either lists both hosts, the other at the address its clients use;
#   - `vipu create partition pp --size 4 --num-ilds 2` makes a 2-IPU share on each daemon,
#     `--size 8` goes over both by itself (each has 4), `get` shows the shares;
#   - `vipu get partition pp --ipuof-configs-dir DIR` writes GCD 0's and GCD 1's IPUoF
#     config files ("Pod hosts", each GCD's daemon), and two ipuof-mnist processes, one per
#     namespace, each given its file and nothing else, train 10 steps to the weights of one
#     process of 4 replicas on one daemon (max abs difference 0);
#   - a create that one daemon refuses leaves no share on the other; remove removes every
#     share; without the admin token (admin socket only) a Pod partition is refused;
#   - host-b's daemon stopped: host-a lists it unreachable, a create over two daemons is
#     refused naming it, and poprun -H over both names host-b's ipuofd, not the V-IPU server.
# Not root: exit 77 (tests/skips.txt). Commands enter a namespace with nsenter --net (as
# test_pod_netns.sh, which says why).
# Usage: sh tests/integ/test_vipu_pod.sh [BUILD]
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
testd_sh_init vipu-pod-test
N=$$
NA=ipuof-va-$N NB=ipuof-vb-$N
NET=10.$((200 + N % 50)).$((N / 50 % 250 + 1)).
PA="" PB=""
NETNS_MOUNTED=no
mountpoint -q /run/netns 2>/dev/null && NETNS_MOUNTED=yes
# testd.sh's trap: this, then KIDS killed and D removed
testd_sh_undo() {
    [ -n "$PA" ] && kill -9 "$PA" 2>/dev/null
    [ -n "$PB" ] && kill -9 "$PB" 2>/dev/null
    ip netns del "$NA" 2>/dev/null
    ip netns del "$NB" 2>/dev/null
    if [ "$NETNS_MOUNTED" = no ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
        umount /run/netns 2>/dev/null
    fi
}

ip netns add "$NA" && ip netns add "$NB" &&
    ip link add "vva$N" type veth peer name "vvb$N" &&
    ip link set "vva$N" netns "$NA" && ip link set "vvb$N" netns "$NB" &&
    nsenter --net=/run/netns/"$NA" -- ip addr add "${NET}1/24" dev "vva$N" &&
    nsenter --net=/run/netns/"$NB" -- ip addr add "${NET}2/24" dev "vvb$N" &&
    nsenter --net=/run/netns/"$NA" -- ip link set "vva$N" up &&
    nsenter --net=/run/netns/"$NB" -- ip link set "vvb$N" up &&
    nsenter --net=/run/netns/"$NA" -- ip link set lo up &&
    nsenter --net=/run/netns/"$NB" -- ip link set lo up ||
    { echo "not ok - cannot make the namespaces"; exit 1; }

# Each namespace has its own ports: both daemons use ipuofd's 50052 (poprun reaches every
# Pod host at the V-IPU server's port).
SA="${NET}1:50052" SB="${NET}2:50052"
export IPUOF_AUTH_TOKEN="cli-$N"
conf() { # NAME ADDR PEER PEERADDR
    printf '[server]\nauth_token = cli-%s\nadmin_token = adm-%s\njob_timeout = 30\n' "$N" "$N"
    printf '[pod]\nname = %s\nlisten = %s:50053\npeers = %s=%s:50053\ntoken = pod-%s\n' \
        "$1" "$2" "$3" "$4" "$N"
    printf 'hello_interval = 1\ntimeout_ms = 2000\n'
}
conf host-a "${NET}1" host-b "${NET}2" >"$D/a.conf"
conf host-b "${NET}2" host-a "${NET}1" >"$D/b.conf"
start() { # NS NAME ADDR
    nsenter --net=/run/netns/"$1" -- "$B/bin/ipuofd" --listen "$3" --ipus 4 --foreground \
        --config "$D/$2.conf" --admin-socket "$D/$2.sock" >>"$D/$2.log" 2>&1 &
    if [ "$2" = a ]; then PA=$!; else PB=$!; fi
}
start "$NA" a "$SA"
start "$NB" b "$SB"
ina() { nsenter --net=/run/netns/"$NA" -- "$@"; }
inb() { nsenter --net=/run/netns/"$NB" -- "$@"; }
V="$B/bin/vipu"

# agent NSFN SERVER HOST: "reachable ADDRESS IPUS" of HOST in SERVER's allocation
agent() {
    $1 "$V" --server "$2" --showjson list allocations 2>/dev/null | "$PY" -c 'import json,sys
for a in json.load(sys.stdin)["allocations"][0]["agents"]:
    if a["name"] == sys.argv[1]: print("reachable" if a["reachable"] else "unreachable", a["id"], a["ipus"])' "$3" 2>/dev/null
}
i=0
while { [ "$(agent ina "$SA" host-b)" != "reachable $SB 4" ] ||
        [ "$(agent inb "$SB" host-a)" != "reachable $SA 4" ]; } && [ $i -lt 150 ]; do
    sleep 0.1; i=$((i + 1)); done
got=$(agent ina "$SA" host-b)
[ "$got" = "reachable $SB 4" ] && ok "host-a's allocation lists host-b at its client address ($got)" ||
    not_ok "host-a's agent host-b: '$got' (want 'reachable $SB 4'): $(ina "$V" --server "$SA" list allocations 2>&1)"
got=$(agent inb "$SB" host-a)
[ "$got" = "reachable $SA 4" ] && ok "host-b's allocation lists host-a at its client address ($got)" ||
    not_ok "host-b's agent host-a: '$got' (want 'reachable $SA 4')"

# expect WHAT STATUS TEXT CMD...: CMD exits STATUS with TEXT in its output
expect() {
    what=$1 want_rc=$2 want=$3
    shift 3
    "$@" >"$D/out" 2>&1
    rc=$?
    if [ "$rc" -eq "$want_rc" ] && grep -qF -- "$want" "$D/out"; then
        ok "$what (exit $rc)"
    else
        not_ok "$what: exit $rc (want $want_rc), said: $(cat "$D/out")"
    fi
}

# The reference: one process of 4 replicas on host-a's daemon alone (before any partition).
MNIST="$B/bin/ipuof-mnist"
ARGS="--data $DATA --epochs 1 --limit-train 320 --limit-test 80 --device-iterations 5
      --gradient-accumulation 1 --batch-size 8 --optimizer sgd --quiet"
# shellcheck disable=SC2086
IPUOF_SERVER=$SA ina "$MNIST" $ARGS --replicas 4 --save "$D/r4.onnx" >"$D/r4.out" 2>&1
[ -s "$D/r4.onnx" ] && ok "1 daemon x 4 replicas trains" || not_ok "reference run: $(tail -c 300 "$D/r4.out")"

A="$V --admin-token adm-$N"
expect "without the admin token a partition over two daemons is refused" 77 \
    "vipu: create partition pp: a partition over 2 daemons needs the admin token (--admin-token or IPUOF_ADMIN_TOKEN): the admin socket reaches this host's daemon only" \
    ina "$V" --server "$SA" --admin-socket "$D/a.sock" create partition pp --size 4 --num-ilds 2
expect "--num-ilds beyond the Pod" 64 "--num-ilds 4, but the Pod of this ipuofd has 2 hosts; give at most 2" \
    ina $A --server "$SA" create partition pp --size 4 --num-ilds 4
expect "a share that is not a power of two" 64 \
    "--size 6 over 2 daemons: each gets size / daemons IPUs, which must be a power of two" \
    ina $A --server "$SA" create partition pp --size 6 --num-ilds 2
expect "create partition pp --size 4 --num-ilds 2" 0 \
    "create partition (pp): success. State: PS_ACTIVE, 4 IPUs over 2 hosts of the Pod, 2 GCDs: GCD 0 on host-a (IPUs 0-1), GCD 1 on host-b (IPUs 0-1)." \
    ina $A --server "$SA" create partition pp --size 4 --num-ilds 2
expect "host-b's daemon holds its share" 0 "| pp | ipuofd     |    2 |    1 | false    | ACTIVE | -       |" \
    inb "$V" --server "$SB" list partitions
expect "get partition pp from host-b shows both shares" 0 "| pp@host-b | ipuofd     |    2 |    1 |" \
    inb "$V" --server "$SB" get partition pp
grep -qF "| pp@host-a | ipuofd     |    2 |    1 |" "$D/out" && ok "... host-a's first" ||
    not_ok "get partition pp: $(cat "$D/out")"

mkdir -p "$D/conf"
expect "get partition pp --ipuof-configs-dir writes a file per GCD" 0 "$D/conf/pp_gcd1.conf" \
    inb "$V" --server "$SB" get partition pp --ipuof-configs-dir "$D/conf"
cat >"$D/want1" <<EOW
{
  "attributes": {
    "Partition Id": "pp",
    "GCD Id": 1,
    "Num GCDs": 2,
    "IPUs": 2,
    "Pod hosts": ["host-a", "host-b"]
  },
  "servers": [
    {"address": "$SB", "ipus": [0, 1]}
  ]
}
EOW
cmp -s "$D/want1" "$D/conf/pp_gcd1.conf" && ok "GCD 1's file names host-b's daemon and both hosts" ||
    not_ok "pp_gcd1.conf: $(cat "$D/conf/pp_gcd1.conf")"
ina "$V" --server "$SA" get partition pp --gcd 0 --ipuof-configs >"$D/gcd0.stdout" 2>&1
cmp -s "$D/gcd0.stdout" "$D/conf/pp_gcd0.conf" && grep -q "\"address\": \"$SA\"" "$D/gcd0.stdout" &&
    ok "--gcd 0 --ipuof-configs prints GCD 0's file (host-a's daemon)" ||
    not_ok "--gcd 0 --ipuof-configs: $(cat "$D/gcd0.stdout")"

# A program given its GCD's file and nothing else (no IPUOF_SERVER, no IPUOF_POD_HOSTS).
for p in 0 1; do
    if [ $p = 0 ]; then ns=$NA; else ns=$NB; fi
    # shellcheck disable=SC2086
    IPUOF_CONFIG_PATH="$D/conf/pp_gcd$p.conf" IPUOF_JOB_KEY=vp-$N IPUOF_PROCESS_ID=$p \
        IPUOF_NUM_PROCESSES=2 timeout 300 nsenter --net=/run/netns/"$ns" -- \
        "$MNIST" $ARGS --replicas 2 --save "$D/pod.onnx" \
        >"$D/pod.$p.out" 2>&1 &
    eval "k$p=\$!"
    KIDS="$KIDS $!"
done
# shellcheck disable=SC2154
wait "$k0"; rc0=$?
wait "$k1"; rc1=$?
KIDS=""
[ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] &&
    ok "two processes on the files vipu wrote train over both daemons" ||
    not_ok "processes on vipu's files: $rc0 $rc1: $(tail -c 300 "$D/pod.0.out") $(tail -c 300 "$D/pod.1.out")"
m=$("$PY" - "$D/r4.onnx" "$D/pod.onnx" <<'EOP'
import sys
import numpy as np
import onnx
from onnx import numpy_helper
a, b = ({t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(p).graph.initializer}
        for p in sys.argv[1:3])
assert a.keys() == b.keys(), "different weights"
print("%.3g" % max(float(np.max(np.abs(a[k] - b[k]))) for k in a))
EOP
)
[ "$m" = "0" ] && ok "and reach the weights of 1 daemon x 4 replicas: max abs difference $m" ||
    not_ok "weights of the Pod run against 1 x 4: max abs difference '$m'"

# All or nothing: host-b full (a partition of its own), a create over both leaves nothing.
expect "host-b's own partition fills it" 0 "create partition (full)" \
    inb "$V" --server "$SB" --admin-socket "$D/b.sock" create partition full --size 2
expect "a create host-b refuses" 75 "vipu: create partition pr on Pod host 'host-b': " \
    ina $A --server "$SA" create partition pr --size 4 --num-ilds 2
grep -qF "removing the 1 share made" "$D/out" && ok "... says it removes host-a's share" ||
    not_ok "no rollback said: $(cat "$D/out")"
expect "... and host-a has no share of it" 65 "no partition 'pr' on this ipuofd" \
    ina "$V" --server "$SA" get partition pr
expect "remove partition pp removes both shares" 0 "remove partition (pp): success (2 hosts of the Pod)." \
    ina $A --server "$SA" remove partition pp
expect "... host-b's is gone" 65 "no partition 'pp' on this ipuofd" inb "$V" --server "$SB" get partition pp
expect "host-b's own partition removed" 0 "remove partition (full): success." \
    inb "$V" --server "$SB" --admin-socket "$D/b.sock" remove partition full
expect "--size 8 goes over both daemons by itself (4 IPUs each)" 0 \
    "create partition (big): success. State: PS_ACTIVE, 8 IPUs over 2 hosts of the Pod, 2 GCDs: GCD 0 on host-a (IPUs 0-3), GCD 1 on host-b (IPUs 0-3)." \
    ina $A --server "$SA" create partition big --size 8
expect "reset partition big resets both shares" 0 "reset partition (big): success (2 hosts of the Pod)." \
    inb "$V" --server "$SB" reset partition big
expect "remove partition big" 0 "remove partition (big): success (2 hosts of the Pod)." \
    inb $A --server "$SB" remove partition big

# host-b's daemon gone.
kill -TERM "$PB"
wait "$PB"
PB=""
i=0
while [ "$(agent ina "$SA" host-b | cut -d' ' -f1)" != unreachable ] && [ $i -lt 100 ]; do
    sleep 0.1; i=$((i + 1)); done
got=$(agent ina "$SA" host-b)
[ "${got%% *}" = unreachable ] && ok "host-b stopped: host-a lists it unreachable" ||
    not_ok "host-b stopped: '$got'"
expect "a create over two daemons with host-b down is refused, naming it" 69 \
    "vipu: a partition over 2 daemons of 2 IPUs each needs 2 hosts of the Pod that are reachable with 2 IPUs or more; there is 1: host-a (reachable, 4 IPUs), host-b (unreachable" \
    ina $A --server "$SA" create partition pp --size 4 --num-ilds 2
expect "poprun -H over the Pod names host-b's ipuofd, not the V-IPU server" 69 \
    "poprun: the ipuofd of Pod host ${NET}2 (-H/--host, at the V-IPU server's port 50052, --vipu-server-port): cannot connect to ipuofd at ${NET}2:50052" \
    ina env IPUOF_ADMIN_TOKEN="adm-$N" "$B/bin/poprun" -H "${NET}1,${NET}2" --vipu-server-host "${NET}1" \
    --vipu-server-port 50052 --num-instances 2 --num-replicas 2 --offline-mode no echo STARTED
grep -q STARTED "$D/out" && not_ok "poprun started the program"

kill -TERM "$PA"
wait "$PA"
rc=$?
PA=""
[ "$rc" -eq 0 ] && ok "ipuofd host-a exits 0 on SIGTERM" || not_ok "host-a exit $rc"
grep -h -E "ERROR|runtime error|Sanitizer" "$D/a.log" "$D/b.log" && not_ok "sanitizer or error in the daemons' logs"
testd_sh_end
