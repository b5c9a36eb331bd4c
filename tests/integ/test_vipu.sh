#!/bin/sh
# The partition service (daemon/requests/req_vipu.c) through vipu (tools/vipu.c) against a real
# ipuofd: create / list / get / reset / remove with V-IPU's output and --showjson, the
# allocation, admin rights, every refusal with its sentence and exit status, the IPUoF
# config file of a GCD used by a program through IPUOF_CONFIG_PATH and ~/.ipuof.conf.d,
# ipuctl status showing the partitions, a held partition reset and removed with --force
# (the holder told), and partitions gone after a restart (they live in the daemon's memory).
# Usage: sh tests/integ/test_vipu.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
testd_sh_init vipu-test
HOLD=""

start_daemon() {
    rm -f "$D/port"
    "$B/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$D/port" --foreground \
        --admin-socket "$D/admin.sock" --ipus 8 >>"$D/log" 2>&1 &
    PID=$!
    i=0
    while [ ! -s "$D/port" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
    [ -s "$D/port" ] || { echo "not ok - ipuofd did not start: $(cat "$D/log")"; exit 1; }
    export IPUOF_SERVER="127.0.0.1:$(cat "$D/port")"
}
start_daemon
unset IPUOF_ADMIN_TOKEN IPUOF_CONFIG_PATH IPUOF_VIPU_API_HOST IPUOF_VIPU_API_PARTITION_ID
export HOME="$D/home"
mkdir -p "$HOME"
V="$B/bin/vipu"
A="$V --admin-socket $D/admin.sock"

# expect "WHAT" STATUS "TEXT" CMD...: CMD exits STATUS with TEXT in its output.
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

expect "create needs admin rights" 77 \
    "vipu: create partition pt: create partition needs admin rights: connect through the admin socket" \
    $V create partition pt --size 4
expect "create partition pt --size 4 --num-gcds 2" 0 \
    "create partition (pt): success. State: PS_ACTIVE, IPUs 0-3, 2 GCDs." \
    $A create partition pt --size 4 --num-gcds 2
expect "create a second one" 0 "create partition (solo): success. State: PS_ACTIVE, IPU 4, 1 GCD." \
    $A create partition solo --size 1 --reconfigurable
expect "a size that is not a power of two, the request named once" 64 \
    "vipu: create partition x: --size 3: a partition is a power of two IPUs" \
    $A create partition x --size 3
expect "more GCDs than IPUs" 64 "--num-gcds 4: the GCDs divide the partition's 2 IPUs evenly" \
    $A create partition x --size 2 --num-gcds 4
expect "a name taken" 75 "partition 'pt' already exists; choose another name or remove it first" \
    $A create partition pt --size 2
expect "no room" 75 "cannot attach 8 IPUs: 3 of 8 IPUs are free (5, 6, 7); IPU 4 reserved for partition 'solo' (vipu list partitions), attached by its name only; IPUs 0-3 reserved for partition 'pt'" \
    $A create partition big --size 8
expect "a bad name" 64 "vipu: create partition a/b: partition name 'a/b' has the character 0x2f" \
    $A create partition a/b --size 1
expect "create without --size" 64 "create partition q needs --size N" $A create partition q
expect "an unknown command" 64 "unknown command 'make'" $V make partition q
expect "an option a verb does not take" 64 "unexpected argument '--size' for this command" \
    $V get partition pt --size 2

$V list partitions >"$D/list" 2>&1
cat >"$D/want" <<'EOF'
+------+------------+------+------+----------+--------+---------+
| ID   | ALLOCATION | IPUS | GCDS | RECONFIG | STATE  | HELD BY |
+------+------------+------+------+----------+--------+---------+
| pt   | ipuofd     |    4 |    2 | false    | ACTIVE | -       |
| solo | ipuofd     |    1 |    1 | true     | ACTIVE | -       |
+------+------------+------+------+----------+--------+---------+
EOF
cmp -s "$D/want" "$D/list" && ok "list partitions (no admin rights needed)" ||
    not_ok "list partitions: $(cat "$D/list")"
$V --showjson list partitions >"$D/json" 2>&1
/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
p = [x["partition"] for x in d["partitions"]]
assert [x["id"] for x in p] == ["pt", "solo"], p
assert p[0]["spec"] == {"ipus": 4, "num_gcds": 2, "reconfigurable": False, "allocation": "ipuofd"}, p[0]
assert p[0]["status"] == {"state": "PS_ACTIVE", "first_ipu": 0, "holder": None}, p[0]
' "$D/json" && ok "--showjson list partitions: V-IPU's partition.id, spec and PS_ACTIVE" ||
    not_ok "--showjson: $(cat "$D/json")"
expect "list allocations: the daemon as the agent" 0 "| ipuofd        | -     | $IPUOF_SERVER |    8 |    - | self  |          2 |" \
    $V list allocations
expect "get a partition that does not exist" 65 \
    "vipu: get partition nope: no partition 'nope' on this ipuofd (partitions: 'solo', 'pt'); vipu create partition nope --size N makes one" \
    $V get partition nope
expect "get --gcd beyond the partition's GCDs" 64 "the partition has 2 GCDs (0 to 1)" \
    $V get partition pt --gcd 2 --ipuof-configs

# The IPUoF config files of both GCDs, used by a program as Poplar's would be.
$V get partition pt --gcd 1 --ipuof-configs >"$D/pt1.conf" 2>&1
cat >"$D/want" <<EOF
{
  "attributes": {
    "Partition Id": "pt",
    "GCD Id": 1,
    "Num GCDs": 2,
    "IPUs": 2
  },
  "servers": [
    {"address": "$IPUOF_SERVER", "ipus": [2, 3]}
  ]
}
EOF
cmp -s "$D/want" "$D/pt1.conf" && ok "get partition pt --gcd 1 --ipuof-configs" ||
    not_ok "ipuof config: $(cat "$D/pt1.conf")"
IPUOF_CONFIG_PATH="$D/pt1.conf" IPUOF_SERVER=127.0.0.1:1 "$B/bin/ipuof-hello" --ipus 4 >"$D/hello" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q "attached partition 'pt': IPU 0 IPU 1 IPU 2 IPU 3" "$D/hello"; then
    ok "a program with IPUOF_CONFIG_PATH (and a wrong IPUOF_SERVER) attaches partition pt"
else
    not_ok "IPUOF_CONFIG_PATH attach ($rc): $(cat "$D/hello")"
fi
mkdir -p "$HOME/.ipuof.conf.d"
$V get partition solo --ipuof-configs >"$HOME/.ipuof.conf.d/solo_gcd0.conf"
IPUOF_SERVER=127.0.0.1:1 "$B/bin/ipuof-hello" --ipus 1 >"$D/hello" 2>&1
rc=$?
[ "$rc" -eq 0 ] && grep -q "partition 'solo'" "$D/hello" &&
    ok "a program finds partition solo through ~/.ipuof.conf.d" ||
    not_ok "~/.ipuof.conf.d attach ($rc): $(cat "$D/hello")"
printf '{"attributes": {"Partition Id": "solo", "GCD Id": "0"}, "servers": []}' \
    >"$HOME/.ipuof.conf.d/solo_gcd0.conf"
expect "a broken config file is named with its field" 1 \
    ".ipuof.conf.d/solo_gcd0.conf: attributes.\"GCD Id\" is the string \"0\" (line 1); it must be a whole number 0 to 1023, without quotes" \
    env IPUOF_SERVER=127.0.0.1:1 "$B/bin/ipuof-hello" --ipus 1
rm -rf "$HOME/.ipuof.conf.d"
expect "an attach without the name never takes reserved IPUs" 75 \
    "IPUs 0-3 reserved for partition 'pt' (vipu list partitions), attached by its name only" \
    "$B/bin/ipuof-hello" --ipus 4

# A program holds pt: status shows it; reset and remove need admin rights and --force.
"$B/bin/ipuof-hello" --partition pt --ipus 4 --hold 20000 >"$D/hold" 2>&1 &
HOLD=$!
KIDS=$HOLD
i=0
until $V list partitions 2>/dev/null | grep -q 'ipuof-hello\['; do
    sleep 0.05; i=$((i + 1)); [ $i -lt 200 ] || break
done
"$B/bin/ipuctl" status >"$D/status" 2>&1
"$B/bin/ipuctl" status --json >"$D/status.json" 2>&1
if grep -Eq '^\| pt +\| 0-3 +\| +2 \| no +\| PS_ACTIVE \| yes +\|' "$D/status" &&
    grep -Eq '^\| solo +\| 4 +\| +1 \| yes +\| PS_ACTIVE \| no +\|' "$D/status" &&
    grep -q '"vipu_partitions":\[{"name":"pt","ipus":4,"num_gcds":2,"first_ipu":0,"reconfigurable":false,"state":"PS_ACTIVE","held":true}' "$D/status.json"; then
    ok "ipuctl status (table and --json) shows the partitions, pt held"
else
    not_ok "ipuctl status: $(cat "$D/status" "$D/status.json")"
fi
expect "reset of a held partition without admin rights" 77 \
    "reset partition of a partition somebody holds needs admin rights" $V reset partition pt
expect "reset of a held partition without --force" 75 \
    "refusing to reset IPUs in use: partition 'pt' (IPUs 0-3) held by ipuof-hello" \
    $A reset partition pt
expect "remove of a held partition without --force" 75 "remove partition pt: refusing to reset IPUs in use" \
    $A remove partition pt
expect "reset partition solo (nobody holds it: no admin rights needed)" 0 \
    "reset partition (solo): success." $V reset partition solo
expect "remove needs admin rights" 77 "remove partition needs admin rights" $V remove partition solo
expect "remove partition pt --force" 0 "remove partition (pt): success." $A remove partition pt --force
wait "$HOLD"
rc=$?
HOLD="" KIDS=""
if [ "$rc" -ne 0 ] && grep -q "partition 'pt' (IPUs 0-3) was reset by an administrator" "$D/hold"; then
    ok "the holder is told its partition was reset ($rc)"
else
    not_ok "the holder ($rc): $(cat "$D/hold")"
fi
expect "pt is gone, its IPUs anybody's" 0 "attached partition" "$B/bin/ipuof-hello" --ipus 4

# Lifetime: until removed or until the daemon restarts.
kill "$PID"
wait "$PID"
start_daemon
$V list partitions >"$D/list" 2>&1
[ "$(grep -c '^| ' "$D/list")" -eq 1 ] && ok "after a restart there are no partitions (they live in the daemon's memory)" ||
    not_ok "after a restart: $(cat "$D/list")"
kill "$PID"
wait "$PID"
rc=$?
PID=""
[ "$rc" -eq 0 ] && ok "ipuofd exits 0 on SIGTERM" || not_ok "ipuofd exit status $rc"
testd_sh_end
