#!/bin/sh
# All-reduce bandwidth between two hosts against the ring's bound (issue 20): two network
# namespaces joined by a veth pair (made here, removed on exit, also on failure or ^C), the
# link's plain-TCP rate measured in the same run (one stream each way, alone and both at
# once, since the ring sends and receives at the same time), then pod/coll.h's all-reduce of
# 100 MB of float32 between 2 ranks, one per namespace. The ring's bound is
# 2(n-1)/n x bytes over the TCP rate; the ratio is that bound over the measured time
# (goal >= 0.70).
#
#   sh bench/allreduce.sh [BUILD]        as root (ip netns); make has built BUILD
#
# Environment:
#   ALLREDUCE_BYTES=100000000  all-reduce size (bytes of float32)
#   ALLREDUCE_ITERS=5          timed all-reduces (after one warm-up); the median is reported
#   ALLREDUCE_ORDER=ring       ring (gloo's) or rank (POD_COLL_SUM_RANK_ORDER)
#   ALLREDUCE_RATE=            a tc rate for the link (e.g. 1gbit, tbf both ways): a link
#                              that is slower than the CPUs, as between real hosts; empty:
#                              the veth's own speed (CPU-bound, shared with the ranks)
# Figures are printed, never judged: exit 0 whether the goal is met or not ("MISSED" marks
# it), 1 only when the benchmark cannot run.
# shellcheck disable=SC2317 # cleanup runs from a trap
set -eu
B=${1:-build}
HERE=$(dirname "$0")
BYTES=${ALLREDUCE_BYTES:-100000000}
ITERS=${ALLREDUCE_ITERS:-5}
ORDER=${ALLREDUCE_ORDER:-ring}
RATE=${ALLREDUCE_RATE:-}

die() {
    echo "allreduce: $*" >&2
    exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root (ip netns add); run it as root, as CI does"
command -v ip >/dev/null || die "ip is missing (Debian's iproute2: sh tools/deps.sh)"
[ -f "$B/lib/libipuofpod.a" ] || die "$B/lib/libipuofpod.a is missing; build first (make)"

mkdir -p "$B/bench"
${CC:-cc} -std=c11 -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Wshadow -Werror \
    ${CFLAGS:--O2 -g} -pthread -D_GNU_SOURCE -Ipod -o "$B/bench/allreduce" "$HERE/allreduce.c" \
    "$B/lib/libipuofpod.a" -lgloo -lstdc++ -lm
DRV=$(cd "$B/bench" && pwd)/allreduce

NA=ipuofar-a-$$ NB=ipuofar-b-$$ VA=arA$$ VB=arB$$ IPA=10.231.0.1 IPB=10.231.0.2
STORE=$(mktemp -d /tmp/ipuof-allreduce-XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    ip netns del "$NA" 2>/dev/null || true # takes its end of the veth pair, and so both
    ip netns del "$NB" 2>/dev/null || true
    rm -rf "$STORE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$NA"
ip netns add "$NB"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$NA"
ip link set "$VB" netns "$NB"
ip -n "$NA" addr add "$IPA/24" dev "$VA"
ip -n "$NB" addr add "$IPB/24" dev "$VB"
for n in "$NA" "$NB"; do ip -n "$n" link set lo up; done
ip -n "$NA" link set "$VA" up
ip -n "$NB" link set "$VB" up
if [ -n "$RATE" ]; then
    ip netns exec "$NA" tc qdisc add dev "$VA" root tbf rate "$RATE" burst 1mb latency 100ms
    ip netns exec "$NB" tc qdisc add dev "$VB" root tbf rate "$RATE" burst 1mb latency 100ms
fi

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# TCP: 3 transfers of BYTES each way alone, then 3 with both ways at once; bytes/s each.
tcp_one() { # from-ns to-ns to-ip port -> prints seconds (a command substitution's subshell)
    ip netns exec "$2" "$DRV" tcp-recv "$3" "$4" &
    rp=$!
    if ! out=$(ip netns exec "$1" "$DRV" tcp-send "$3" "$4" "$BYTES"); then
        kill "$rp" 2>/dev/null
        return 1
    fi
    wait "$rp"
    echo "$out" | awk '{ print $3 }'
}
one_way="" both_ways=""
for i in 1 2 3; do
    one_way="$one_way $(tcp_one "$NA" "$NB" "$IPB" 5201)"
    ip netns exec "$NB" "$DRV" tcp-recv "$IPB" 5202 &
    r1=$!
    ip netns exec "$NA" "$DRV" tcp-recv "$IPA" 5203 &
    r2=$!
    ip netns exec "$NA" "$DRV" tcp-send "$IPB" 5202 "$BYTES" >"$STORE/ab" &
    s1=$!
    PIDS="$r1 $r2 $s1" # killed by cleanup if this round fails
    ip netns exec "$NB" "$DRV" tcp-send "$IPA" 5203 "$BYTES" >"$STORE/ba"
    wait "$s1" "$r1" "$r2"
    PIDS=""
    # both at once: the slower direction's time is the pair's
    both_ways="$both_ways $(awk '{ print $3 }' "$STORE/ab" "$STORE/ba" | sort -n | tail -n 1)"
done
t1=$(echo "$one_way" | tr ' ' '\n' | grep . | median)
t2=$(echo "$both_ways" | tr ' ' '\n' | grep . | median)

# The all-reduce: rank 0 in A, rank 1 in B.
ip netns exec "$NB" "$DRV" rank 1 2 "$STORE" "$IPB" "$BYTES" "$ITERS" "$ORDER" &
PIDS=$!
ip netns exec "$NA" "$DRV" rank 0 2 "$STORE" "$IPA" "$BYTES" "$ITERS" "$ORDER" >"$STORE/ar" ||
    die "the all-reduce failed"
wait "$PIDS" || die "rank 1 failed"
PIDS=""
ta=$(awk '{ print $3 }' "$STORE/ar" | median)

awk -v b="$BYTES" -v t1="$t1" -v t2="$t2" -v ta="$ta" -v rate="${RATE:-none}" -v order="$ORDER" -v it="$ITERS" 'BEGIN {
    n = 2; moved = 2 * (n - 1) / n * b
    r1 = b / t1; r2 = b / t2
    printf "link: veth between two network namespaces, tc rate %s\n", rate
    printf "tcp one way:   %d bytes in %.3f s = %.3f GB/s (median of 3)\n", b, t1, r1 / 1e9
    printf "tcp both ways: %d bytes each way in %.3f s = %.3f GB/s per direction (median of 3)\n", b, t2, r2 / 1e9
    printf "all-reduce (%s, 2 ranks): %d bytes in %.3f s = %.3f GB/s of buffer (median of %d)\n", order, b, ta, b / ta / 1e9, it
    printf "ring bound 2(n-1)/n x bytes = %d bytes: %.3f s at the one-way rate, %.3f s at the both-ways rate\n", moved, moved / r1, moved / r2
    g1 = moved / r1 / ta; g2 = moved / r2 / ta
    printf "ratio to the bound: %.2f (one-way rate) %s, %.2f (both-ways rate) %s; goal >= 0.70\n", g1, (g1 >= 0.7 ? "ok" : "MISSED"), g2, (g2 >= 0.7 ? "ok" : "MISSED")
}'
