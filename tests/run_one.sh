#!/bin/sh
# One job of tests/run.sh's pool: runs one or more test programs in order (a chain: programs
# that must not overlap, such as the two that make network namespaces), each as
#   KIND:NAME:ISA:PATH      KIND cmocka or sh; ISA a capped level or "-"; PATH the program
# (cmocka) or the script run as `sh PATH BUILD` (sh). For each it prints one line, written
# with one printf so the pool's lines do not interleave, and leaves "p f s secs" in
# $IPUOF_TEST_RESULTS/SHOWN.res for run.sh's totals. Environment: everything run.sh exports.
set -u
BUILD=$IPUOF_BUILD
logdir="$BUILD/test-logs"

count_cmocka() { # log -> sets p f s and skipcases (names of skipped tests)
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' "$1" | awk '{s+=$1} END {print s+0}')
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below:/\1/p' "$1" | awk '{s+=$1} END {print s+0}')
    s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test(s), listed below:/\1/p' "$1" | awk '{s+=$1} END {print s+0}')
    # cmocka names each skipped test after the summary line and once more after [ RUN ].
    skipcases=$(sed -n 's/^\[  SKIPPED \] \([A-Za-z0-9_]*\)$/\1/p' "$1" | sort -u)
}

# 0 when tests/skips.txt lists a reason for a skip of case $2 (or of any case) of program $1.
skip_listed() {
    awk -v prog="$1" -v c="$2" '$1 == prog && ($2 == c || $2 == "*") { found = 1 } END { exit !found }' \
        tests/skips.txt 2>/dev/null
}

run_one() { # kind name isa path
    kind=$1 name=$2 isa=$3 path=$4
    if [ "$kind" = cmocka ]; then set -- "$path"; else set -- sh "$path" "$BUILD"; fi
    shown=$name log="$logdir/$name.log" res=$name
    if [ "$isa" != - ]; then
        shown="$name [isa=$isa]" log="$logdir/$name.isa-$isa.log" res="$name.isa-$isa"
        set -- env IPUOF_SIM_ISA="$isa" "$@"
    fi
    # Each program has a HOME of its own: programs of the pool run side by side, and a
    # test may write IPUoF config files under HOME.
    home=$(mktemp -d "$IPUOF_TEST_HOMES/home-XXXXXX")
    start=$(date +%s)
    HOME=$home timeout 900 "$@" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    rm -rf "$home"
    p=0 f=0 s=0 skipcases=""
    if [ "$kind" = cmocka ] && grep -q '^\[==========\]' "$log"; then
        count_cmocka "$log"
        [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    else
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
        tapskips=$(grep -c -E '^ok .*# SKIP' "$log")
        if [ "$rc" -eq 77 ]; then
            s=1 skipcases="*"
        elif [ -n "$line" ]; then
            p=$(echo "$line" | sed 's/^\([0-9]*\) passed.*/\1/')
            f=$(echo "$line" | sed 's/^[0-9]* passed, \([0-9]*\) failed.*/\1/')
            s=$(echo "$line" | sed -n 's/.*failed, \([0-9]*\) skipped.*/\1/p')
            s=${s:-0}
            # A TAP "ok ... # SKIP" the program counted as passed is a skip.
            if [ "$tapskips" -gt 0 ] && [ "$p" -ge "$tapskips" ]; then
                p=$((p - tapskips)) s=$((s + tapskips))
            fi
            [ "$s" -gt 0 ] && skipcases="*"
            [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
        elif [ "$rc" -eq 0 ]; then
            p=1
        else
            f=1
        fi
    fi
    unlisted=""
    if [ "$s" -gt 0 ]; then
        set -f # a case of "*" is a word, not a file name pattern
        for c in ${skipcases:-"*"}; do
            skip_listed "$name" "$c" || unlisted="$unlisted $c"
        done
        set +f
    fi
    if [ -n "$unlisted" ]; then
        f=$((f + 1))
        echo "$name: skipped without a reason in tests/skips.txt:$unlisted" >>"$log"
    fi
    echo "$p $f $s $secs" >"$IPUOF_TEST_RESULTS/$res.res"
    if [ "$f" -ne 0 ]; then
        printf 'FAIL %-36s %4d passed %3d failed (%ss, rc %d) log: %s\n%s\n' "$shown" "$p" "$f" "$secs" "$rc" "$log" \
            "$(grep -E 'ERROR|FAILED|Error|error:|not ok|runtime error|Sanitizer|skipped without' "$log" | head -n 20 | sed 's/^/     /')"
    else
        printf 'ok   %-36s %4d passed %3d skipped (%ss)\n' "$shown" "$p" "$s" "$secs"
    fi
}

for job in "$@"; do
    # KIND:NAME:ISA:PATH (PATH last: it may hold a colon)
    kind=${job%%:*} rest=${job#*:}
    name=${rest%%:*} rest=${rest#*:}
    isa=${rest%%:*} path=${rest#*:}
    run_one "$kind" "$name" "$isa" "$path"
done
