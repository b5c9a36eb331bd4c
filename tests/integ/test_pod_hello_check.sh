#!/bin/sh
# A Pod peer's hello reply is checked where it enters (daemon/pod/pod_peers.c; issue 32's "a peer
# reporting more free IPUs than it has"): a stand-in peer (tests/integ/pod_fake_peer.py) that
# says 5 of its 4 IPUs are free is shown unreachable with that sentence, not as a host with
# 5 free IPUs; the same stand-in saying 3 of 4 is reachable with 3 free (so the check, not
# the stand-in, makes the difference). A client address the peer gives with a wildcard host
# (0.0.0.0:7777) is listed by vipu list allocations at the host of its [pod] address.
# Usage: sh tests/integ/test_pod_hello_check.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
PY=${IPUOF_PYTHON:-/usr/bin/python3}
testd_sh_init pod-hello-test
FAKE=""

# run FREE: a daemon whose peer host-b is the stand-in saying FREE of 4 IPUs are free;
# prints host-b's "state free error" from ipuctl status --json once it has an answer
run() {
    rm -f "$D/fport" "$D/port"
    "$PY" tests/integ/pod_fake_peer.py "$D/fport" host-b 4 "$1" 0.0.0.0:7777 >"$D/fake.log" 2>&1 &
    FAKE=$!
    i=0
    while [ ! -s "$D/fport" ] && [ $i -lt 250 ]; do sleep 0.02; i=$((i + 1)); done
    printf '[pod]\nname = host-a\nlisten = 127.0.0.1:0\npeers = host-b=127.0.0.1:%s\nhello_interval = 1\n' \
        "$(cat "$D/fport")" >"$D/conf"
    "$B/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$D/port" --foreground --config "$D/conf" \
        --ipus 4 >>"$D/log" 2>&1 &
    PID=$!
    i=0
    while [ ! -s "$D/port" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
    i=0
    got=""
    while [ $i -lt 60 ]; do
        got=$(IPUOF_SERVER="127.0.0.1:$(cat "$D/port")" "$B/bin/ipuctl" status --json 2>/dev/null |
            "$PY" -c 'import json,sys
for h in json.load(sys.stdin)["pod_hosts"]:
    if h["name"] == "host-b": print(h["state"], h["free_ipus"], h["error"])' 2>/dev/null)
        case "$got" in reachable* | unreachable*) break ;; esac
        sleep 0.1
        i=$((i + 1))
    done
    echo "$got"
    IPUOF_SERVER="127.0.0.1:$(cat "$D/port")" "$B/bin/vipu" --showjson list allocations \
        >"$D/alloc.$1" 2>&1
    kill "$PID" "$FAKE" 2>/dev/null
    wait "$PID" "$FAKE" 2>/dev/null
    PID="" FAKE=""
}

got=$(run 5)
case "$got" in
"unreachable 0 the daemon at 127.0.0.1:"*" says 5 of its 4 IPUs are free: more than it has")
    ok "a peer saying 5 of its 4 IPUs are free is unreachable, saying why" ;;
*) not_ok "a peer saying 5 free of 4: '$got'" ;;
esac
got=$(run 3)
[ "$got" = "reachable 3 None" ] && ok "the same stand-in saying 3 of 4 is reachable with 3 free" ||
    not_ok "a peer saying 3 free of 4: '$got'"
grep -qF '{"id":"127.0.0.1:7777","name":"host-b","ipus":4,"reachable":true}' "$D/alloc.3" &&
    ok "vipu list allocations lists the peer at its client address, the wildcard host replaced" ||
    not_ok "list allocations: $(cat "$D/alloc.3")"
grep -h -E "runtime error|Sanitizer" "$D/log" && not_ok "sanitizer report in the daemon's log"
testd_sh_end
