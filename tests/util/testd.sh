# tests/util/testd.sh — starting a test's own ipuofd from a shell test (sourced, not run),
# as tests/util/testd.c does for the C tests: on an ephemeral loopback port, in the
# foreground, its log in a file of the test's directory.
# shellcheck shell=sh disable=SC2034
# (SC2034: PID is read by the sourcing script)

# testd_sh_start BUILD DIR [IPUOFD ARGS...]: starts BUILD/bin/ipuofd --listen 127.0.0.1:0
# with its port file DIR/port and its output in DIR/log, plus the arguments given; sets PID
# (the caller's trap kills it) and exports IPUOF_SERVER. Returns 0, or 1 when no port was
# written within 10 s (the caller says so, with the log, and fails).
testd_sh_start() {
    _b=$1 _d=$2
    shift 2
    "$_b/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$_d/port" --foreground "$@" \
        >"$_d/log" 2>&1 &
    PID=$!
    _i=0
    while [ ! -s "$_d/port" ] && [ $_i -lt 500 ]; do sleep 0.02; _i=$((_i + 1)); done
    [ -s "$_d/port" ] || return 1
    IPUOF_SERVER="127.0.0.1:$(cat "$_d/port")"
    export IPUOF_SERVER
}
