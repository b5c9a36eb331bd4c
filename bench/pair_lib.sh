# bench/pair_lib.sh — what bench/dist.sh and bench/pod_train.sh share (sourced, not run):
# two ways of training the same network with ipuof-mnist, run in alternating rounds, the
# epoch's throughput of each and the medians. The sourcing script sets B (the build), DATA
# (Fashion-MNIST), NAME (its name in messages), then calls pair_check, starts its daemons
# (pair_daemon, pair_port), and defines one() and two() (run number -> samples/s, by
# pair_one / pair_two) before pair_rounds.
# shellcheck shell=sh disable=SC2034,SC2086
# (SC2034: STARTED, ADDR, ma, mb are read by the sourcing script; SC2086: $COMMON is split on purpose)

die() {
    echo "$NAME: $*" >&2
    exit 1
}

# Exits through die when the build lacks ipuofd or ipuof-mnist, or DATA has no Fashion-MNIST.
pair_check() {
    for f in "$B/bin/ipuofd" "$B/bin/ipuof-mnist"; do
        [ -x "$f" ] || die "$f is missing; build first (make)"
    done
    [ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] ||
        die "no Fashion-MNIST in $DATA (Debian's dataset-fashion-mnist)"
}

# Starts $B/bin/ipuofd on an ephemeral loopback port, in the foreground, its port file $1
# and its output in $2, plus the arguments given; sets STARTED to its pid (the caller's
# cleanup kills it).
pair_daemon() {
    _pf=$1 _lg=$2
    shift 2
    "$B/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$_pf" --foreground "$@" >"$_lg" 2>&1 &
    STARTED=$!
}

# Waits up to 10 s for the port file $1 of the daemon logging to $2 (else dies saying that
# $3 did not start, with the log); sets ADDR to 127.0.0.1:PORT.
pair_port() {
    _i=0
    while [ ! -s "$1" ] && [ $_i -lt 500 ]; do sleep 0.02; _i=$((_i + 1)); done
    [ -s "$1" ] || die "$3 did not start: $(cat "$2")"
    ADDR="127.0.0.1:$(cat "$1")"
}

# "SAMPLES SECONDS" of the epoch line of ipuof-mnist's output file $1.
epoch_of() {
    sed -n 's/.*Epoch 1\/1: [0-9]* calls, \([0-9]*\) samples in \([0-9.]*\) s.*/\1 \2/p' "$1"
}

# Samples/s of one process's output file $1.
pair_rate() {
    epoch_of "$1" | awk '{ printf "%.1f\n", $1 / $2 }'
}

# Samples/s of two processes' output files $1 and $2: both processes' samples over the
# slower one's seconds.
pair_rate2() {
    { epoch_of "$1"; epoch_of "$2"; } |
        awk '{ s += $1; if ($2 > t) t = $2 } END { printf "%.1f\n", s / t }'
}

# Run $1 of the one-process side: ipuof-mnist $COMMON --replicas 2 with the variables
# given after $2 (NAME=value) in its environment, its output in $D/one$1; prints its
# samples/s, or dies saying "$2 failed".
pair_one() {
    _r=$1 _w=$2
    shift 2
    env "$@" "$B/bin/ipuof-mnist" $COMMON --replicas 2 >"$D/one$_r" 2>&1 ||
        die "$_w failed: $(tail -c 400 "$D/one$_r")"
    pair_rate "$D/one$_r"
}

# Run $1 of the two-process side: two_proc P $1 (the sourcing script's: process P of 2, in
# the foreground) for P = 0 and 1 side by side, outputs in $D/two$1.P; prints their
# samples/s, or dies saying which of "$2" failed.
pair_two() {
    for _p in 0 1; do
        two_proc $_p "$1" >"$D/two$1.$_p" 2>&1 &
        eval "_k$_p=\$!"
    done
    # shellcheck disable=SC2154
    wait "$_k0" || die "$2: process 0 failed: $(tail -c 400 "$D/two$1.0")"
    # shellcheck disable=SC2154
    wait "$_k1" || die "$2: process 1 failed: $(tail -c 400 "$D/two$1.1")"
    pair_rate2 "$D/two$1.0" "$D/two$1.1"
}

median() {
    sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Runs $PAIRS rounds of one() then two() (files in $D), printing a row per round under the
# header "round  $1  $2  (samples/s)"; leaves the medians in ma and mb.
pair_rounds() {
    echo "round  $1  $2  (samples/s)"
    : >"$D/a"
    : >"$D/b"
    r=1
    while [ $r -le "$PAIRS" ]; do
        a=$(one $r)
        b=$(two $r)
        echo "$a" >>"$D/a"
        echo "$b" >>"$D/b"
        printf "%5d  %${#1}s  %${#2}s\n" "$r" "$a" "$b"
        r=$((r + 1))
    done
    ma=$(median <"$D/a")
    mb=$(median <"$D/b")
}
