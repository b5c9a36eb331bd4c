# shellcheck shell=sh
# bench/daemon.sh — sourced by the benchmark scripts that start a daemon of their own.
#
# wait_daemon PID PORTFILE LOG: waits up to 10 s for the daemon PID to write its port to
# PORTFILE and sets ADDR to 127.0.0.1:PORT; if the daemon exits first or the time runs
# out, prints LOG and fails through the caller's die().
wait_daemon() {
    _i=0
    while [ ! -s "$2" ]; do
        if ! kill -0 "$1" 2>/dev/null || [ $_i -ge 100 ]; then
            cat "$3" >&2
            die "ipuofd did not start"
        fi
        sleep 0.1
        _i=$((_i + 1))
    done
    # shellcheck disable=SC2034 # ADDR is for the caller
    ADDR=127.0.0.1:$(cat "$2")
}
