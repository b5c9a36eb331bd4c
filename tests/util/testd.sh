# tests/util/testd.sh — starting a test's own ipuofd from a shell test (sourced, not run),
# as tests/util/testd.c does for the C tests: on an ephemeral loopback port, in the
# foreground, its log in a file of the test's directory; and what such a test sets up
# first (its directory, the trap that cleans up), its checks, stopping the daemon and the
# summary line (testd_sh_init, ok / not_ok / check, testd_sh_stop, testd_sh_end).
# shellcheck shell=sh disable=SC2034
# (SC2034: PID, KIDS, D and the counters are read by the sourcing script)

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

# testd_sh_init NAME: what every shell test that starts a daemon sets up first. D, a new
# directory /tmp/ipuof-NAME-XXXXXX; PID (the daemon, set by testd_sh_start) and KIDS (other
# processes the test starts: it adds their pids) empty; a trap on EXIT, INT and TERM that
# runs testd_sh_undo when the test defines it (what else it has to undo, e.g. a tmux
# server), kills KIDS and PID (SIGKILL) and removes D (kept when KEEP is set, for a look
# afterwards); the counters pass, fail and skip at 0.
testd_sh_init() {
    D=$(mktemp -d "/tmp/ipuof-$1-XXXXXX") || { echo "not ok - mktemp failed"; exit 1; }
    PID="" KIDS=""
    pass=0 fail=0 skip=0
    trap testd_sh_cleanup EXIT INT TERM
}

testd_sh_cleanup() {
    command -v testd_sh_undo >/dev/null 2>&1 && testd_sh_undo
    for _k in $KIDS $PID; do kill -9 "$_k" 2>/dev/null; done
    [ -n "${KEEP:-}" ] || rm -rf "$D"
}

# TAP lines and the counters: ok WHAT, not_ok WHAT, check WHAT COMMAND... (the command's
# status decides). A test with checks of another shape defines its own after sourcing.
ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $1"; }
check() {
    _what=$1
    shift
    if "$@"; then ok "$_what"; else not_ok "$_what"; fi
}

# testd_sh_need_mnist DATA: exits 77 (a skip, tests/skips.txt) when DATA has no
# Fashion-MNIST.
testd_sh_need_mnist() {
    [ -e "$1/train-images-idx3-ubyte.gz" ] || [ -e "$1/train-images-idx3-ubyte" ] ||
        { echo "skip: no Fashion-MNIST in $1 (Debian package dataset-fashion-mnist)"; exit 77; }
}

# testd_sh_must_start BUILD DIR [IPUOFD ARGS...]: testd_sh_start, or a failed check naming
# the daemon's log, the summary and exit 1.
testd_sh_must_start() {
    testd_sh_start "$@" && return 0
    not_ok "ipuofd did not start: $(cat "$2/log")"
    testd_sh_end
    exit 1
}

# testd_sh_add LOG [RC WHAT]: a sub-program's output LOG (a driver's, a script's) counted
# into this test's: its lines echoed but its "N passed, M failed" summary, whose counts are
# added; no summary is one failure, and so is RC non-zero when no failure was counted
# ("not ok - WHAT exited with RC").
testd_sh_add() {
    grep -v -E '^[0-9]+ passed, [0-9]+ failed' "$1"
    _line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
    _p=$(echo "$_line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
    _f=$(echo "$_line" | sed -n 's/^[0-9]* passed, \([0-9]*\) failed.*/\1/p')
    pass=$((pass + ${_p:-0}))
    fail=$((fail + ${_f:-1}))
    if [ "${2:-0}" -ne 0 ] && [ "${_f:-1}" -eq 0 ]; then
        not_ok "${3:-the program} exited with $2"
    fi
}

# testd_sh_stop: SIGTERM to the daemon PID, then checks that it exits 0.
testd_sh_stop() {
    kill -TERM "$PID"
    wait "$PID"
    _rc=$?
    PID=""
    check "ipuofd exits 0 on SIGTERM (got $_rc)" [ "$_rc" -eq 0 ]
}

# testd_sh_end: the summary line tests/run_one.sh reads; its status is 0 when nothing failed
# (the test's last command).
testd_sh_end() {
    echo "$pass passed, $fail failed, $skip skipped"
    [ "$fail" -eq 0 ]
}
