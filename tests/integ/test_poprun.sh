#!/bin/sh
# poprun (tools/poprun.c): every check of the command line with its sentence and exit status
# 64; the topology table; the variables each instance gets (exactly PopRun's -x set, the
# launch's job key, nothing of the caller's IPUOF_PROCESS_ID / IPUOF_PARTITION /
# IPUOF_CONFIG_PATH); --only-output-from-instance, --mpi-global-args, --mpi-local-args and
# the program's exit status; then, against a real ipuofd, an unchanged PopTorch program
# (tests/integ/poprun_train.py: popdist under poprun, 4 replicas alone) launched by
# `poprun --num-instances 2 --num-replicas 4` ends with the same weights as one process
# with 4 replicas.
# Usage: sh tests/integ/test_poprun.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
PY=${IPUOF_PYTHON:-/usr/bin/python3}
POPRUN="$B/bin/poprun"
testd_sh_init poprun-test
PIDA="" PIDB=""

# refuses "WHAT" STATUS "SENTENCE" ARGS...: poprun ARGS exits STATUS printing SENTENCE and
# starts nothing.
refuses() {
    what=$1 want_rc=$2 want=$3
    shift 3
    "$POPRUN" "$@" >"$D/out" 2>&1
    rc=$?
    if [ "$rc" -eq "$want_rc" ] && grep -qF -- "$want" "$D/out" && ! grep -q STARTED "$D/out"; then
        ok "$what: exit $rc, '$want'"
    else
        not_ok "$what: exit $rc (want $want_rc), said: $(cat "$D/out")"
    fi
}

command -v mpirun >/dev/null 2>&1 ||
    { echo "not ok - mpirun is missing (Debian package openmpi-bin, a test dependency)"; echo "0 passed, 1 failed"; exit 1; }

refuses "replicas not divisible by instances" 64 \
    "poprun: --num-replicas must be divisible by --num-instances (--num-replicas 3, --num-instances 2)" \
    --num-instances 2 --num-replicas 3 --offline-mode yes echo STARTED
refuses "instances not divisible by hosts" 64 \
    "--num-instances must be divisible by the number of hosts (--num-instances 3, 2 hosts in -H/--host)" \
    -H a,b --num-instances 3 --num-replicas 3 --offline-mode yes echo STARTED
refuses "partition size not a power of two" 64 \
    "--num-replicas x --ipus-per-replica must be a power of two of at most 1024 (3 x 2 = 6)" \
    --num-replicas 3 --ipus-per-replica 2 --offline-mode yes echo STARTED
refuses "--only-output-from-instance out of range" 64 \
    "--only-output-from-instance must be less than --num-instances (--only-output-from-instance 2, --num-instances 2)" \
    --num-instances 2 --num-replicas 2 --only-output-from-instance 2 --offline-mode yes echo STARTED
refuses "--offline-mode with --vipu-partition" 64 \
    "--offline-mode and --vipu-partition exclude each other" \
    --offline-mode yes --vipu-partition p echo STARTED
refuses "zero instances" 64 "--num-instances expects a whole number from 1 to 256, not '0'" \
    --num-instances 0 echo STARTED
refuses "a count that is not a number" 64 "--num-replicas expects a whole number from 1 to 65536, not '4x'" \
    --num-replicas=4x echo STARTED
refuses "a yes/no option given something else" 64 \
    "--print-topology expects yes or no (true/false, on/off, 1/0), not 'maybe'" \
    --print-topology maybe echo STARTED
refuses "an unknown option" 64 "unknown option '--num-replica'; see poprun --help" \
    --num-replica 2 echo STARTED
refuses "an option without its value" 64 "--num-replicas needs a value" --num-replicas
refuses "no program" 64 "no program to launch; usage: poprun [options] PROGRAM [ARGS...]" \
    --num-replicas 2
refuses "a bad partition name" 64 "--vipu-partition 'a/b' has the character '/'" \
    --vipu-partition a/b echo STARTED
refuses "a bad host range" 64 "-H/--host: bad range in 'h[3-1]'" -H 'h[3-1]' echo STARTED
refuses "a host named twice" 64 "-H/--host names host 'h1' twice" -H 'h[0-1],h1' echo STARTED
refuses "an unclosed quote in --mpi-global-args" 64 "--mpi-global-args has an unclosed ' quote" \
    --offline-mode yes --mpi-global-args "--x 'y" echo STARTED
# Every number and count is checked for overflow, and a host name cannot pass for an option
# (issue 32, defects 9-12; at fe31a81 each of these started mpirun, asked for a partition of
# 0 IPUs, looped 2^64 times, or wrote past the heap array of mpirun's words).
refuses "65536 x 65536 IPUs (0 in 32 bits), offline" 64 \
    "--num-replicas x --ipus-per-replica must be a power of two of at most 1024 (65536 x 65536 = 4294967296)" \
    --num-replicas 65536 --ipus-per-replica 65536 --offline-mode yes echo STARTED
refuses "65536 x 65536 IPUs, online: no partition of size 0 asked for" 64 \
    "(65536 x 65536 = 4294967296)" \
    --num-replicas 65536 --ipus-per-replica 65536 --vipu-server-host 127.0.0.1 \
    --vipu-server-port 1 echo STARTED
refuses "a host name that is an ssh option" 64 \
    "-H/--host: host name '-oProxyCommand=id' starts with '-'" -H '-oProxyCommand=id' \
    --offline-mode yes echo STARTED
refuses "a host name after a comma that is an option" 64 "host name '-x' starts with '-'" \
    -H 'a,-x' --num-instances 2 --num-replicas 2 --offline-mode yes echo STARTED
refuses "a host range number past 2^64" 64 \
    "-H/--host: the number '18446744073709551615' in 'h[18446744073709551615]' is too large; host[a-b] numbers are 0 to 999999" \
    -H 'h[18446744073709551615]' --offline-mode yes echo STARTED
refuses "a host range ending past 2^64" 64 "the number '99999999999999999999999' in" \
    -H 'h[1-99999999999999999999999]' --offline-mode yes echo STARTED
refuses "a host range of 65 hosts" 64 "-H/--host names more than 64 hosts ('h[0-64]' names 65)" \
    -H 'h[0-64]' --offline-mode yes echo STARTED
refuses "two ranges of 64 hosts in all" 64 "-H/--host names more than 64 hosts ('a[0-31],b[0-32]' names 65)" \
    -H 'a[0-31],b[0-32]' --offline-mode yes echo STARTED
long=$(printf 'h%0300d' 0)
refuses "a host name of 301 characters" 64 "has 301 characters; a host name has at most 253" \
    -H "$long" --offline-mode yes echo STARTED
words() { # N WORD: WORD N times, space-separated
    k=0 w=""
    while [ $k -lt "$1" ]; do w="$w $2"; k=$((k + 1)); done
    echo "$w"
}
refuses "210 words of --mpi-global-args" 64 "--mpi-global-args has more than 128 words; give at most 128" \
    --offline-mode yes --mpi-global-args "$(words 210 -q)" echo STARTED
refuses "129 words of --mpi-local-args" 64 "--mpi-local-args has more than 128 words; give at most 128" \
    --offline-mode yes --mpi-local-args "$(words 129 -q)" echo STARTED
# 128 of each reach mpirun whole (a stand-in that prints its words, one a line).
mkdir -p "$D/argv"
printf '#!/bin/sh\nfor a in "$@"; do echo "W:$a"; done\n' >"$D/argv/mpirun"
chmod +x "$D/argv/mpirun"
PATH="$D/argv:$PATH" "$POPRUN" --offline-mode yes --num-instances 4 --num-replicas 4 \
    --mpi-global-args "$(words 128 --gw)" --mpi-local-args "$(words 128 --lw)" echo a b c \
    >"$D/argv.out" 2>&1
rc=$?
g=$(grep -c '^W:--gw$' "$D/argv.out") l=$(grep -c '^W:--lw$' "$D/argv.out")
p=$(grep -c '^W:echo$' "$D/argv.out")
if [ "$rc" -eq 0 ] && [ "$g" -eq 128 ] && [ "$l" -eq 512 ] && [ "$p" -eq 4 ]; then
    ok "128 words of --mpi-global-args and of --mpi-local-args x 4 instances reach mpirun whole"
else
    not_ok "128 words each: exit $rc, $g global, $l local (want 512), $p programs: $(tail -3 "$D/argv.out")"
fi
IPUOF_SERVER=h:0 "$POPRUN" echo STARTED >"$D/out" 2>&1
rc=$?
if [ "$rc" -eq 64 ] && grep -q "give the V-IPU server with --vipu-server-host and --vipu-server-port" "$D/out"; then
    ok "an IPUOF_SERVER without a usable port for the V-IPU server: exit 64"
else
    not_ok "IPUOF_SERVER=h:0 ($rc): $(cat "$D/out")"
fi

# The topology table and the variables of each instance (offline: no V-IPU server).
"$POPRUN" --num-instances 2 --num-replicas 4 --ipus-per-replica 2 --print-topology yes \
    --offline-mode yes --mpi-local-args "-x LOCAL_ARG=1" -v \
    env IPUOF_PROCESS_ID=9 sh -c 'x=$(env | grep -E "^(POPDIST_|IPUOF_(JOB_KEY|LOG_LEVEL|PROCESS_ID|NUM_PROCESSES|PARTITION|CONFIG_PATH|VIPU_API_[A-Z_]*)=|LOCAL_ARG)" | sort | tr "\n" " "); echo "$x"' \
    >"$D/top" 2>"$D/top.err"
rc=$?
cat >"$D/table" <<'EOF'
 ===============================
|        poprun topology        |
|===============================|
| hosts     |     localhost     |
|-----------|-------------------|
| ILDs      |         0         |
|-----------|-------------------|
| instances |    0    |    1    |
|-----------|-------------------|
| replicas  | 0  | 1  | 2  | 3  |
 -------------------------------
EOF
head -n 11 "$D/top" >"$D/table.got"
if [ "$rc" -eq 0 ] && cmp -s "$D/table" "$D/table.got"; then
    ok "--print-topology prints the topology table"
else
    not_ok "--print-topology ($rc): $(cat "$D/top" "$D/top.err")"
fi
for i in 0 1; do
    off=$((i * 2))
    want="IPUOF_JOB_KEY=KEY IPUOF_LOG_LEVEL=WARN IPUOF_PROCESS_ID=9 LOCAL_ARG=1 POPDIST_LOCAL_INSTANCE_INDEX=$i POPDIST_NUM_IPUS_PER_REPLICA=2 POPDIST_NUM_LOCAL_REPLICAS=2 POPDIST_NUM_TOTAL_REPLICAS=4 POPDIST_REPLICA_INDEX_OFFSET=$off POPDIST_UNIFORM_REPLICAS_PER_INSTANCE=1 "
    got=$(sed -n "s/^\[1,$i\]<stdout>://p" "$D/top" | sed 's/IPUOF_JOB_KEY=[0-9a-f]\{32\} /IPUOF_JOB_KEY=KEY /')
    if [ "$got" = "$want" ]; then
        ok "offline instance $i gets PopRun's POPDIST_* variables, the job key and --mpi-local-args"
    else
        not_ok "offline instance $i's variables: got '$got', want '$want'"
    fi
done
k0=$(sed -n 's/^\[1,0\]<stdout>:.*IPUOF_JOB_KEY=\([0-9a-f]*\) .*/\1/p' "$D/top")
k1=$(sed -n 's/^\[1,1\]<stdout>:.*IPUOF_JOB_KEY=\([0-9a-f]*\) .*/\1/p' "$D/top")
"$POPRUN" --offline-mode yes sh -c 'echo $IPUOF_JOB_KEY' >"$D/key2" 2>&1
k2=$(sed -n 's/^\[1,0\]<stdout>://p' "$D/key2")
if [ -n "$k0" ] && [ "$k0" = "$k1" ] && [ -n "$k2" ] && [ "$k2" != "$k0" ] && ! grep -q "$k0" "$D/top.err"; then
    ok "the instances of a launch share a job key, another launch has another, and -v does not show it"
else
    not_ok "job keys: '$k0' '$k1' '$k2'; -v: $(cat "$D/top.err")"
fi
if grep -q "^poprun: mpirun --tag-output --bind-to none .*-H localhost:2 -np 1 -host localhost:2 -x LOCAL_ARG=1 -x POPDIST_NUM_TOTAL_REPLICAS=4 " "$D/top.err"; then
    ok "-v prints the mpirun command, one app context per instance"
else
    not_ok "-v: $(cat "$D/top.err")"
fi

# --only-output-from-instance, --mpi-global-args, and the program's exit status.
"$POPRUN" --num-instances 2 --num-replicas 2 --offline-mode yes --only-output-from-instance 1 \
    --mpi-global-args "--report-bindings" sh -c 'echo instance $OMPI_COMM_WORLD_RANK; echo err >&2' \
    >"$D/only" 2>&1
if grep -q '^\[1,1\]<stdout>:instance 1$' "$D/only" && grep -q '^\[1,1\]<stderr>:err$' "$D/only" &&
    ! grep -q '^\[1,0\]' "$D/only"; then
    ok "--only-output-from-instance 1 shows instance 1's output only"
else
    not_ok "--only-output-from-instance: $(cat "$D/only")"
fi
"$POPRUN" --num-instances 2 --num-replicas 2 --offline-mode yes -v \
    --mpi-global-args "--mca btl self,tcp --report-bindings" sh -c 'exit 3' >"$D/exit" 2>&1
rc=$?
if [ "$rc" -eq 3 ] && grep -q "^poprun: mpirun --tag-output --bind-to none --mca btl self,tcp --report-bindings " "$D/exit"; then
    ok "--mpi-global-args reach mpirun, and the program's exit status is poprun's ($rc)"
else
    not_ok "exit status $rc (want 3) or --mpi-global-args: $(cat "$D/exit")"
fi

# Against a real ipuofd: the partition service, then end to end.
if ! "$PY" -c 'import torch, onnx, cffi' 2>/dev/null; then
    not_ok "Debian's python3 lacks torch/onnx/cffi (make deps installs them)"
    testd_sh_end
    exit 1
fi
printf '[server]\nadmin_token = op-secret\n' >"$D/conf"
testd_sh_must_start "$B" "$D" --config "$D/conf" --admin-socket "$D/admin.sock" --ipus 8
PORT=$(cat "$D/port")
VIPU="$B/bin/vipu"
SRV="--vipu-server-host 127.0.0.1 --vipu-server-port $PORT"
export IPUOF_CLIENT_LIB="$B/lib/libipuof-client.so" PYTHONPATH="$PWD/python"
unset IPUOF_SERVER IPUOF_PARTITION IPUOF_CONFIG_PATH IPUOF_ADMIN_TOKEN

# The operator makes the partitions (admin socket); poprun uses them.
"$VIPU" --admin-socket "$D/admin.sock" create partition pt --size 4 >"$D/mk" 2>&1 &&
    "$VIPU" --admin-socket "$D/admin.sock" create partition two --size 2 --num-gcds 2 \
    --reconfigurable >>"$D/mk" 2>&1
[ $? -eq 0 ] && ok "vipu create partition (admin socket)" || not_ok "vipu create: $(cat "$D/mk")"

# Each instance gets PopRun's IPUOF_VIPU_API_* variables, its GCD of a 2-GCD partition,
# and not the caller's IPUOF_PROCESS_ID, IPUOF_PARTITION, IPUOF_CONFIG_PATH.
# shellcheck disable=SC2086
IPUOF_PARTITION=x IPUOF_CONFIG_PATH=/x IPUOF_NUM_PROCESSES=3 IPUOF_PROCESS_ID=1 \
    "$POPRUN" --num-instances 2 --num-replicas 2 $SRV --vipu-partition two \
    --vipu-server-timeout 30 \
    sh -c 'x=$(env | grep -E "^(IPUOF_[A-Z_]*(PARTITION|CONFIG|PROCESS|VIPU)[A-Z_]*)=" | sort | tr "\n" " "); echo "$x"' \
    >"$D/vipu" 2>&1
for i in 0 1; do
    want="IPUOF_VIPU_API_GCD_ID=$i IPUOF_VIPU_API_HOST=127.0.0.1 IPUOF_VIPU_API_PARTITION_ID=two IPUOF_VIPU_API_PORT=$PORT IPUOF_VIPU_API_TIMEOUT=30 "
    got=$(sed -n "s/^\[1,$i\]<stdout>://p" "$D/vipu")
    if [ "$got" = "$want" ]; then
        ok "instance $i gets PopRun's IPUOF_VIPU_API_* variables (GCD $i of 2), not the caller's IPUOF_PROCESS_ID, IPUOF_PARTITION, IPUOF_CONFIG_PATH"
    else
        not_ok "instance $i's V-IPU variables: got '$got', want '$want' ($(cat "$D/vipu"))"
    fi
done

# What poprun checks against the partition service.
# shellcheck disable=SC2086
refuses "a partition of another size" 64 \
    "poprun: partition 'pt' has 4 IPUs but --num-replicas x --ipus-per-replica is 2; give --update-partition yes" \
    --num-replicas 2 $SRV --vipu-partition pt echo STARTED
# shellcheck disable=SC2086
refuses "fewer instances than a partition's GCDs" 64 \
    "poprun: partition 'two' has 2 GCDs; --num-instances (1) must be a multiple of them" \
    --num-replicas 2 $SRV --vipu-partition two echo STARTED
# shellcheck disable=SC2086
refuses "creating a partition without admin rights" 1 \
    "without admin rights, ask the operator for a partition (vipu create partition mine --size 2)" \
    --num-replicas 2 $SRV --vipu-partition mine echo STARTED
refuses "an unreachable V-IPU server" 69 \
    "poprun: the V-IPU server (--vipu-server-host/--vipu-server-port): cannot connect to ipuofd at 127.0.0.1:1" \
    --vipu-server-host 127.0.0.1 --vipu-server-port 1 echo STARTED
# With the admin token: poprun creates its partition, and removes it after the run.
# shellcheck disable=SC2086
IPUOF_ADMIN_TOKEN=op-secret "$POPRUN" -v --num-replicas 2 $SRV sh -c 'echo $IPUOF_VIPU_API_PARTITION_ID' \
    >"$D/made" 2>&1
rc=$?
made=$(sed -n 's/^\[1,0\]<stdout>://p' "$D/made")
"$VIPU" --server "127.0.0.1:$PORT" list partitions >"$D/after" 2>&1
if [ "$rc" -eq 0 ] && echo "$made" | grep -q '^poprun-[0-9a-f]\{8\}$' &&
    grep -q "poprun: created partition '$made' (2 IPUs)" "$D/made" &&
    grep -q "poprun: final state of $made: PS_ACTIVE" "$D/made" &&
    grep -q "poprun: removed partition '$made'" "$D/made" && ! grep -q "$made" "$D/after"; then
    ok "with the admin token poprun creates partition $made for the run and removes it after"
else
    not_ok "poprun's own partition ($rc): $(cat "$D/made" "$D/after")"
fi
# --update-partition yes recreates a partition of the wrong size, which then stays.
# shellcheck disable=SC2086
IPUOF_ADMIN_TOKEN=op-secret "$POPRUN" --num-replicas 4 $SRV --vipu-partition two \
    --update-partition yes true >"$D/upd" 2>&1
rc=$?
"$VIPU" --server "127.0.0.1:$PORT" --showjson list partitions >"$D/after" 2>&1
if [ "$rc" -eq 0 ] && grep -q '"id":"two","spec":{"ipus":4,"num_gcds":1,' "$D/after"; then
    ok "--update-partition yes recreates 'two' with 4 IPUs and 1 GCD, and it stays"
else
    not_ok "--update-partition ($rc): $(cat "$D/upd" "$D/after")"
fi

# A program pointed at a partition that does not exist is told so before attaching.
IPUOF_VIPU_API_HOST=127.0.0.1 IPUOF_VIPU_API_PORT=$PORT IPUOF_VIPU_API_PARTITION_ID=nope \
    "$B/bin/ipuof-hello" --ipus 1 >"$D/nope" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "partition 'nope' (from IPUOF_VIPU_API_HOST): no partition 'nope' on this ipuofd (partitions: 'two', 'pt'); vipu create partition nope --size N makes one" "$D/nope"; then
    ok "a program given a partition that does not exist is refused, naming where the name came from"
else
    not_ok "attach to a missing partition ($rc): $(cat "$D/nope")"
fi

# ... and so is one given a GCD the partition does not have (at fe31a81 it attached).
IPUOF_VIPU_API_HOST=127.0.0.1 IPUOF_VIPU_API_PORT=$PORT IPUOF_VIPU_API_PARTITION_ID=two \
    IPUOF_VIPU_API_GCD_ID=5 "$B/bin/ipuof-hello" --ipus 1 >"$D/gcd5" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "partition 'two' (from IPUOF_VIPU_API_HOST): GCD 5 (IPUOF_VIPU_API_GCD_ID or the config file's \"GCD Id\") is not one of its 1 GCD: give 0" "$D/gcd5"; then
    ok "a program given GCD 5 of a one-GCD partition is refused, saying which GCDs it has"
else
    not_ok "IPUOF_VIPU_API_GCD_ID=5 on a one-GCD partition ($rc): $(cat "$D/gcd5")"
fi

if nm -D "$IPUOF_CLIENT_LIB" 2>/dev/null | grep -q __asan_init; then
    export LD_PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
    export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1"
fi
# The reference: one process, 4 replicas, on the same partition (named as poprun names it).
IPUOF_SERVER=127.0.0.1:$PORT IPUOF_VIPU_API_PARTITION_ID=pt timeout 300 \
    "$PY" tests/integ/poprun_train.py 4 >"$D/one.out" 2>&1
rc1=$?
# shellcheck disable=SC2086
timeout 300 "$POPRUN" --num-instances 2 --num-replicas 4 --print-topology yes $SRV \
    --vipu-partition pt "$PY" tests/integ/poprun_train.py >"$D/two.out" 2>&1
rc2=$?
unset LD_PRELOAD
head -n 11 "$D/two.out"
m=$("$PY" - "$D/one.out" "$D/two.out" <<'EOF'
import json, sys
def weights(path, prefix):
    for line in open(path):
        if line.startswith(prefix + "{"):
            return json.JSONDecoder().raw_decode(line[len(prefix):])[0]
    raise SystemExit("no weights in " + path)
a, b = weights(sys.argv[1], ""), weights(sys.argv[2], "[1,0]<stdout>:")
assert (a["instances"], a["replicas"], b["instances"], b["replicas"]) == (1, 4, 2, 4), (a, b)
d = max(abs(x - y) for k in ("weight", "bias")
        for x, y in zip(sum(a[k], []) if k == "weight" else a[k],
                        sum(b[k], []) if k == "weight" else b[k]))
print("max abs difference %.3g" % d)
sys.exit(0 if d <= 1e-6 else 1)
EOF
)
mrc=$?
if [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$mrc" -eq 0 ]; then
    ok "poprun --num-instances 2 --num-replicas 4 on partition 'pt' trains what one process with 4 replicas does: $m"
else
    not_ok "poprun end to end ($rc1, $rc2, $m): $(tail -c 1500 "$D/one.out") $(tail -c 3000 "$D/two.out")"
fi
if grep -q "job 'pt': model [0-9]* 'training' compiled for 2 processes x 2 replicas" "$D/log"; then
    ok "the daemon ran one job of 2 processes x 2 replicas on partition 'pt'"
else
    not_ok "the daemon's log shows no job of 2 x 2 on 'pt': $(tail -n 20 "$D/log")"
fi
"$VIPU" --server "127.0.0.1:$PORT" get partition pt >"$D/pt" 2>&1 &&
    grep -q '| pt | ipuofd     |    4 |    1 | false    | ACTIVE | -       |' "$D/pt" &&
    ok "the operator's partition stays after the run, free" || not_ok "after the run: $(cat "$D/pt")"
testd_sh_stop
# A Pod: -H names two hosts, 127.0.0.1 and 127.0.0.2 (both this machine's loopback), each
# with an ipuofd of 4 IPUs at the same port, in one Pod (host-a, host-b). poprun gives
# each daemon a 2-IPU share of the partition and each instance IPUOF_POD_HOSTS and its own
# host's daemon; the 2 instances x 2 replicas train what one process of 4 replicas does.
# Open MPI would reach 127.0.0.2 over ssh, so a stand-in mpirun runs each app context here.
mkdir "$D/shim"
cat >"$D/shim/mpirun" <<'EOS'
#!/usr/bin/python3
"""mpirun for hosts that are all this machine: each app context (-np 1 -host H -x VAR[=V]
... PROGRAM ARGS, separated by ':') runs here, its output tagged [1,i]<stdout>:."""
import os, subprocess, sys, threading
args = sys.argv[1:]
while args and args[0] in ("--tag-output", "--allow-run-as-root", "--bind-to", "-H"):
    args = args[2:] if args[0] in ("--bind-to", "-H") else args[1:]
ctxs, cur = [], []
for a in args + [":"]:
    if a == ":":
        ctxs.append(cur)
        cur = []
    else:
        cur.append(a)
procs = []
for i, c in enumerate(ctxs):
    env, k = dict(os.environ), 0
    while c[k].startswith("-"):
        if c[k] == "-x" and "=" in c[k + 1]:
            name, _, val = c[k + 1].partition("=")
            env[name] = val
        k += 2
    env["HOST_OF_CONTEXT"] = c[c.index("-host") + 1]
    p = subprocess.Popen(c[k:], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    def pump(p=p, i=i):
        for line in p.stdout:
            sys.stdout.write("[1,%d]<stdout>:%s" % (i, line.decode()))
            sys.stdout.flush()
    t = threading.Thread(target=pump)
    t.start()
    procs.append((p, t))
rc = 0
for p, t in procs:
    t.join()
    rc = rc or p.wait()
sys.exit(rc)
EOS
chmod +x "$D/shim/mpirun"
PP=$("$PY" -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')
PPA=${PP% *} PPB=${PP#* }
for h in a b; do
    if [ $h = a ]; then ip=127.0.0.1 me=host-a pp=$PPA peer=host-b peerip=127.0.0.2 ppp=$PPB
    else ip=127.0.0.2 me=host-b pp=$PPB peer=host-a peerip=127.0.0.1 ppp=$PPA; fi
    printf '[server]\nadmin_token = op-secret\njob_timeout = 30\n[pod]\nname = %s\n' "$me" \
        >"$D/pod$h.conf"
    printf 'listen = %s:%s\npeers = %s=%s:%s\ntoken = pod-poprun\nhello_interval = 1\n' \
        "$ip" "$pp" "$peer" "$peerip" "$ppp" >>"$D/pod$h.conf"
done
"$B/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$D/podport" --foreground \
    --config "$D/poda.conf" --admin-socket "$D/poda.sock" >"$D/poda.log" 2>&1 &
PIDA=$!
KIDS=$PIDA
i=0
while [ ! -s "$D/podport" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
PODPORT=$(cat "$D/podport")
"$B/bin/ipuofd" --listen "127.0.0.2:$PODPORT" --foreground --config "$D/podb.conf" \
    --admin-socket "$D/podb.sock" >"$D/podb.log" 2>&1 &
PIDB=$!
KIDS="$PIDA $PIDB"
i=0
while ! IPUOF_SERVER="127.0.0.2:$PODPORT" "$B/bin/ipuctl" status >/dev/null 2>&1 &&
    [ $i -lt 250 ]; do sleep 0.02; i=$((i + 1)); done
PRE=""  # a sanitizer build's library in Python needs the runtimes preloaded (as above)
if nm -D "$IPUOF_CLIENT_LIB" 2>/dev/null | grep -q __asan_init; then
    PRE="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
fi
LD_PRELOAD="$PRE" PATH="$D/shim:$PATH" IPUOF_ADMIN_TOKEN=op-secret timeout 300 "$POPRUN" -v -H 127.0.0.1,127.0.0.2 \
    --num-instances 2 --num-replicas 4 --vipu-server-host 127.0.0.1 --vipu-server-port "$PODPORT" \
    sh -c 'echo "vars $HOST_OF_CONTEXT $IPUOF_VIPU_API_HOST $IPUOF_POD_HOSTS"; exec "$@"' sh \
    "$PY" tests/integ/poprun_train.py >"$D/pod.out" 2>&1
rc2=$?
for i in 0 1; do
    h=127.0.0.$((i + 1))
    got=$(sed -n "s/^\[1,$i\]<stdout>:vars //p" "$D/pod.out")
    if [ "$got" = "$h:1 $h host-a,host-b" ]; then
        ok "poprun -H over a Pod: instance $i runs on $h, attaches there, IPUOF_POD_HOSTS=host-a,host-b"
    else
        not_ok "poprun -H over a Pod, instance $i: got '$got' ($(tail -c 2000 "$D/pod.out"))"
    fi
done
m=$("$PY" - "$D/one.out" "$D/pod.out" <<'EOS'
import json, sys
def weights(path, prefix):
    for line in open(path):
        if line.startswith(prefix + "{"):
            return json.JSONDecoder().raw_decode(line[len(prefix):])[0]
    raise SystemExit("no weights in " + path)
a, b = weights(sys.argv[1], ""), weights(sys.argv[2], "[1,0]<stdout>:")
assert (a["instances"], a["replicas"], b["instances"], b["replicas"]) == (1, 4, 2, 4), (a, b)
d = max(abs(x - y) for k in ("weight", "bias")
        for x, y in zip(sum(a[k], []) if k == "weight" else a[k],
                        sum(b[k], []) if k == "weight" else b[k]))
print("max abs difference %.3g" % d)
sys.exit(0 if d == 0 else 1)
EOS
)
mrc=$?
if [ "$rc2" -eq 0 ] && [ "$mrc" -eq 0 ] &&
    grep -q "a Pod of 2 daemons (host-a,host-b), 2 IPUs on each" "$D/pod.out"; then
    ok "poprun -H 127.0.0.1,127.0.0.2 over a Pod: 2 daemons x 2 replicas train what 1 process of 4 does: $m"
else
    not_ok "poprun over a Pod ($rc2, $m): $(tail -c 3000 "$D/pod.out")"
fi
left=$("$B/bin/vipu" --server "127.0.0.2:$PODPORT" list partitions 2>&1 | grep -c poprun-)
if [ "$left" = 0 ]; then
    ok "poprun removed its partition's share on host-b after the run"
else
    not_ok "host-b still has poprun's partition: $("$B/bin/vipu" --server "127.0.0.2:$PODPORT" list partitions 2>&1)"
fi
kill "$PIDA" "$PIDB"
wait "$PIDA" "$PIDB"
PIDA="" PIDB="" KIDS=""
testd_sh_end
