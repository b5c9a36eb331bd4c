# bench/pair_lib.sh — what bench/dist.sh and bench/pod_train.sh share (sourced, not run):
# two ways of training the same network with ipuof-mnist, run in alternating rounds, the
# epoch's throughput of each and the medians. The sourcing script sets B (the build), DATA
# (Fashion-MNIST), NAME (its name in messages), then calls pair_check, and defines one() and
# two() (run number -> samples/s, by pair_rate / pair_rate2) before pair_rounds.
# shellcheck shell=sh disable=SC2034

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
