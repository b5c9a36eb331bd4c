#!/bin/sh
# Runs every test against the build in $1 (default build): cmocka unit tests, integration
# tests that start real daemons, and shell tests. Prints one line per program and a final
# "N passed, M failed, K skipped" line; exits non-zero when anything failed.
#
#   IPUOF_TEST_FILTER=devices sh tests/run.sh build    only programs whose name matches
#
# Then the simulator's unit tests (test_sim_*) and the parity tests (against PyTorch:
# test_interop_*, test_torchvision; against ONNX's expected outputs: integ_test_conformance)
# run again once per instruction-set level below the one the first pass ran at
# (IPUOF_SIM_ISA, sim/kernels/hot.h), named "NAME [isa=LEVEL]": on an AVX-512 machine avx2 and
# baseline, on an AVX2 one baseline; none where the build has one copy of each kernel
# (sanitizer and clang builds). IPUOF_TEST_FILTER=isa= runs only those passes.
set -u
BUILD=${1:-build}
export IPUOFD_BIN="$BUILD/bin/ipuofd"
export IPUCTL_BIN="$BUILD/bin/ipuctl"
export IPUOF_BUILD="$BUILD"
# The tests reach only the daemons they start: a developer's own IPUoF config files
# (~/.ipuof.conf.d, read before IPUOF_SERVER) and a partition chosen in the environment would
# send them elsewhere, so HOME is an empty directory of the run's and those variables go.
unset IPUOF_CONFIG_PATH IPUOF_SERVER IPUOF_PARTITION IPUOF_JOB_KEY IPUOF_PROCESS_ID \
      IPUOF_NUM_PROCESSES IPUOF_VIPU_API_HOST IPUOF_VIPU_API_PORT IPUOF_VIPU_API_PARTITION_ID \
      IPUOF_VIPU_API_GCD_ID
TEST_HOME=$(mktemp -d /tmp/ipuof-test-home-XXXXXX)
trap 'rm -rf "$TEST_HOME"' EXIT
export HOME="$TEST_HOME"
# Sanitizer builds: fail on the first report, check leaks.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
filter=${IPUOF_TEST_FILTER:-}
logdir="$BUILD/test-logs"
mkdir -p "$logdir"

passed=0 failed=0 skipped=0 failures=""

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

isa="" # the level of a capped pass (run_one's command runs with IPUOF_SIM_ISA=$isa)

run_one() { # kind name command...
    kind=$1 name=$2
    shift 2
    shown=$name log="$logdir/$name.log"
    if [ -n "$isa" ]; then
        shown="$name [isa=$isa]" log="$logdir/$name.isa-$isa.log"
        set -- env IPUOF_SIM_ISA="$isa" "$@"
    fi
    case "$shown" in *"$filter"*) ;; *) return ;; esac
    start=$(date +%s)
    timeout 900 "$@" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
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
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
    if [ "$f" -ne 0 ]; then
        printf 'FAIL %-36s %4d passed %3d failed (%ss, rc %d) log: %s\n' "$shown" "$p" "$f" "$secs" "$rc" "$log"
        failures="$failures $(echo "$shown" | tr -d ' ')"
        grep -E 'ERROR|FAILED|Error|error:|not ok|runtime error|Sanitizer|skipped without' "$log" | head -n 20 | sed 's/^/     /'
    else
        printf 'ok   %-36s %4d passed %3d skipped (%ss)\n' "$shown" "$p" "$s" "$secs"
    fi
}

# Only programs whose source is still in the tree: a build directory keeps the binaries of
# renamed or removed tests.
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] && [ -f "tests/unit/$(basename "$t").c" ] && run_one cmocka "$(basename "$t")" "$t"
done
for t in "$BUILD"/tests/integ/test_*; do
    [ -x "$t" ] && [ -f "tests/integ/$(basename "$t").c" ] &&
        run_one cmocka "integ_$(basename "$t")" "$t"
done
for t in tests/integ/test_*.sh; do
    [ -f "$t" ] && run_one sh "$(basename "$t" .sh)" sh "$t" "$BUILD"
done

# The capped passes (see the top).
if [ ! -x "$BUILD/tests/test_sim_isa" ]; then
    levels="$BUILD/tests/test_sim_isa is not built (make all builds it)"
    false
else
    levels=$("$BUILD/tests/test_sim_isa" --levels 2>&1)
fi || {
    echo "FAIL instruction-set levels: $levels"
    failed=$((failed + 1)) failures="$failures isa-levels" levels=""
}
# shellcheck disable=SC2086 # the levels are words
set -- $levels
if [ $# -gt 0 ]; then
    shift
    echo
    echo "instruction-set levels: $levels (the pass above: ${levels%% *}; capped passes:" \
        "${*:-none: this build has one copy of each kernel, or this CPU only the baseline})"
fi
for isa in "$@"; do
    for t in "$BUILD"/tests/test_sim_*; do
        [ -x "$t" ] && [ -f "tests/unit/$(basename "$t").c" ] && run_one cmocka "$(basename "$t")" "$t"
    done
    t=$BUILD/tests/integ/test_conformance
    [ -x "$t" ] && run_one cmocka integ_test_conformance "$t"
    for t in tests/integ/test_interop_*.sh tests/integ/test_torchvision.sh; do
        [ -f "$t" ] && run_one sh "$(basename "$t" .sh)" sh "$t" "$BUILD"
    done
done
isa=""

echo
[ -n "$failures" ] && echo "failed:$failures"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
