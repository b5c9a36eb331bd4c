#!/bin/sh
# ipuctl top under tmux (a private server, its pane read with capture-pane) against a real
# ipuofd on an ephemeral loopback port while ipuof-mnist trains: the frames refresh, show
# the holder, the utilisation and the steps per second, then the IPUs free again; --once
# prints one frame for scripts. tmux missing is a failure (make deps installs it).
# Usage: sh tests/integ/test_ipuctl_top.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
testd_sh_init top-test
MPID=""
TM="tmux -S $D/tmux.sock"
testd_sh_undo() { $TM kill-server 2>/dev/null; }
no() { not_ok "$1"; }
DATA=${IPUOF_MNIST_DATA:-/usr/share/datasets/fashion-mnist}
command -v tmux >/dev/null 2>&1 || {
    echo "not ok - tmux is not installed: run make deps"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
}

testd_sh_must_start "$B" "$D"
S=$IPUOF_SERVER
CTL=$(cd "$(dirname "$B/bin/ipuctl")" && pwd)/ipuctl

# Waits up to $2 seconds for the pane to show a line matching the ERE $1; 0 when it did.
wait_pane() {
    n=0
    while [ $n -lt $(($2 * 5)) ]; do
        $TM capture-pane -p -t top >"$D/pane" 2>/dev/null
        grep -Eq "$1" "$D/pane" && return 0
        sleep 0.2
        n=$((n + 1))
    done
    return 1
}

$TM new-session -d -s top -x 140 -y 30 "$CTL --server $S top --interval 0.2; sleep 30"
wait_pane '^IPU +STATE +PARTITION +HOLDER' 15 && ok "top draws its table in tmux" ||
    no "top's table: $(cat "$D/pane")"
grep -Eq '^ipuofd [0-9.]+ at 127\.0\.0\.1:[0-9]+, up ' "$D/pane" && ok "  ... under the daemon's line" ||
    no "  ... header: $(head -2 "$D/pane")"
grep -Eq '^3 +free ' "$D/pane" && ok "  ... with the 4 IPUs free" || no "  ... IPUs: $(cat "$D/pane")"

# Training long enough for several frames (a frame every 0.2 s; about 1 500 steps, 2 s on
# an idle 2-core machine, where the 510 steps of 2 epochs once ran at 874 a second, within
# one frame of the default second, and no frame showed them): holder, busy time and steps
# per second show.
"$B/bin/ipuof-mnist" --server "$S" --data "$DATA" --epochs 6 --limit-train 4000 \
    --limit-test 80 --batch-size 8 --device-iterations 5 --gradient-accumulation 2 \
    --quiet >"$D/mnist.out" 2>&1 &
MPID=$!
KIDS=$MPID
# IPU 0's line: fields 4 holder, 5 host %, 6 simulated %, NF-1 steps/s. (The simulated
# share rounds to 0.0 on a slow host, e.g. under ASan: test_metrics checks that clock.)
n=0 seen=""
while [ $n -lt 300 ]; do
    $TM capture-pane -p -t top >"$D/pane" 2>/dev/null
    seen=$(awk '$1 == "0" && $4 ~ /^ipuof-mnist\[[0-9]+\]$/ && $5 > 0 && $6 >= 0 && $(NF-1) > 0' "$D/pane")
    [ -n "$seen" ] && break
    sleep 0.2
    n=$((n + 1))
done
[ -n "$seen" ] && ok "while ipuof-mnist trains, IPU 0 shows its holder, host utilisation and steps/s above 0: $seen" ||
    no "training frame: $(cat "$D/pane")"
f1=$(grep -E '^0 ' "$D/pane")
sleep 2.5
$TM capture-pane -p -t top >"$D/pane2"
f2=$(grep -E '^0 ' "$D/pane2")
[ "$f1" != "$f2" ] && ok "the frame refreshes (IPU 0's line changed in 2.5 s)" ||
    no "no refresh: $f1"
wait "$MPID"
rc=$?
MPID="" KIDS=""
[ $rc -eq 0 ] && ok "ipuof-mnist trained" || no "ipuof-mnist exit $rc: $(tail -c 300 "$D/mnist.out")"
wait_pane '^0 +free +- +- +0\.0 +0\.0 .* 0\.0 +[1-9][0-9]*$' 15 &&
    ok "after training, IPU 0 is free, idle, with its steps counted" ||
    no "after training: $(grep '^0 ' "$D/pane")"

# --once: one frame on stdout, no escape sequences, exit 0.
"$CTL" --server "$S" top --once --interval 0.2 >"$D/once" 2>"$D/once.err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c -E '^[0-3] +free ' "$D/once")" = 4 ] &&
    ok "--once prints one frame of the 4 IPUs and exits 0" || no "--once ($rc): $(cat "$D/once" "$D/once.err")"
if grep -q "$(printf '\033')" "$D/once"; then no "--once wrote escape sequences"; else ok "  ... without clearing the screen"; fi
"$CTL" --server "$S" top --interval 0 >/dev/null 2>"$D/err"
[ $? -eq 64 ] && grep -q "interval wants seconds" "$D/err" && ok "a bad --interval is a usage error" ||
    no "bad --interval: $(cat "$D/err")"
kill "$PID"
wait "$PID" 2>/dev/null
PID=""
"$CTL" --server "$S" top --once >/dev/null 2>"$D/err"
[ $? -eq 69 ] && ok "a daemon gone: exit 69 ($(head -c 100 "$D/err"))" || no "no daemon: $(cat "$D/err")"

testd_sh_end
