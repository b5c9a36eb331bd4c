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
#
# The programs run side by side in a pool of IPUOF_TEST_JOBS (default: the CPUs this process
# may use) through tests/run_one.sh, each with a HOME of its own; lines print as programs
# end. The programs that make network namespaces run one after the other in one job of the
# pool. The longest programs of the last run in this build start first
# ($BUILD/test-logs/durations.txt; without it, a built-in list of the long ones).
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

RESULTS=$(mktemp -d /tmp/ipuof-test-results-XXXXXX)
trap 'rm -rf "$TEST_HOME" "$RESULTS"' EXIT
export IPUOF_TEST_RESULTS="$RESULTS" IPUOF_TEST_HOMES="$TEST_HOME"
jobs=${IPUOF_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
case "$jobs" in ''|*[!0-9]*|0) echo "IPUOF_TEST_JOBS must be a positive number, not '$jobs'" >&2; exit 2 ;; esac

isa="" # the level of a capped pass
add() { # kind name path group: one program, when the filter takes it
    shown=$2 res=$2
    [ -n "$isa" ] && shown="$2 [isa=$isa]" res="$2.isa-$isa"
    case "$shown" in *"$filter"*) ;; *) return ;; esac
    echo "$res" >>"$RESULTS/expected"
    echo "$1:$2:${isa:--}:$3" >>"$RESULTS/jobs.$4"
}

# Only programs whose source is still in the tree: a build directory keeps the binaries of
# renamed or removed tests.
# The last argument of add is the program's group: "one", a job of its own; "netns", the
# chain of programs that make network namespaces (`ip netns` mounts /run/netns and each of
# them unmounts it again when it made the mount: two must not overlap); "alone", run after
# the pool with nothing beside it (test_install runs `make install`, which rebuilds what is
# out of date: programs running beside it once lost their daemon's binary mid-link).
: >"$RESULTS/expected"
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] && [ -f "tests/unit/$(basename "$t").c" ] && add cmocka "$(basename "$t")" "$t" one
done
for t in "$BUILD"/tests/integ/test_*; do
    [ -x "$t" ] && [ -f "tests/integ/$(basename "$t").c" ] &&
        add cmocka "integ_$(basename "$t")" "$t" one
done
for t in tests/integ/test_*.sh; do
    [ -f "$t" ] || continue
    case $t in
    */test_pod_netns.sh|*/test_vipu_pod.sh) add sh "$(basename "$t" .sh)" "$t" netns ;;
    */test_install.sh) add sh "$(basename "$t" .sh)" "$t" alone ;;
    *) add sh "$(basename "$t" .sh)" "$t" one ;;
    esac
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
    echo "instruction-set levels: $levels (the first pass: ${levels%% *}; capped passes:" \
        "${*:-none: this build has one copy of each kernel, or this CPU only the baseline})"
fi
for isa in "$@"; do
    for t in "$BUILD"/tests/test_sim_*; do
        [ -x "$t" ] && [ -f "tests/unit/$(basename "$t").c" ] && add cmocka "$(basename "$t")" "$t" one
    done
    t=$BUILD/tests/integ/test_conformance
    [ -x "$t" ] && add cmocka integ_test_conformance "$t" one
    for t in tests/integ/test_interop_*.sh tests/integ/test_torchvision.sh; do
        [ -f "$t" ] && add sh "$(basename "$t" .sh)" "$t" one
    done
done
isa=""

# The pool's jobs, longest first: by the last run's durations where there are any, else the
# programs known to take minutes first; the netns chain weighs the sum of its programs.
durations="$logdir/durations.txt"
long="test_python test_pod_netns test_daemon_cycles test_sim_multi test_torchvision test_vipu
      test_tls test_poprun test_ipuof_run integ_test_faults"
{
    [ -s "$RESULTS/jobs.netns" ] && tr '\n' ' ' <"$RESULTS/jobs.netns" | sed 's/ $//' && echo
    [ -s "$RESULTS/jobs.one" ] && cat "$RESULTS/jobs.one"
} | awk -v long="$long" -v dfile="$durations" '
    BEGIN {
        n = split(long, l, " ")
        for (i = 1; i <= n; i++) guess[l[i]] = 1000 - i
        while ((getline line < dfile) > 0) { split(line, d, " "); known[d[1]] = d[2] }
    }
    { w = 0
      for (i = 1; i <= NF; i++) {
          split($i, f, ":"); res = f[2]; if (f[3] != "-") res = res ".isa-" f[3]
          if (res in known) w += known[res]; else if (f[2] in guess) w += guess[f[2]]
      }
      printf "%012.3f %s\n", w, $0 }' | sort -r | cut -d' ' -f2- >"$RESULTS/pool"

xargs -P "$jobs" -L 1 sh tests/run_one.sh <"$RESULTS/pool"
if [ -s "$RESULTS/jobs.alone" ]; then
    while read -r job; do sh tests/run_one.sh "$job"; done <"$RESULTS/jobs.alone"
fi

passed=0 failed=0 skipped=0 failures=""
: >"$RESULTS/durations"
while read -r res; do
    if [ -f "$RESULTS/$res.res" ]; then
        read -r p f s secs <"$RESULTS/$res.res"
        echo "$res $secs" >>"$RESULTS/durations"
    else
        echo "FAIL $res: ended without a result (its log is in $logdir)"
        p=0 f=1 s=0
    fi
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
    [ "$f" -ne 0 ] && failures="$failures $res"
done <"$RESULTS/expected"
# The durations of the programs this run did not run (a filtered run) stay as they were.
[ -f "$durations" ] && awk 'NR == FNR { seen[$1] = 1; next } !($1 in seen)' \
    "$RESULTS/durations" "$durations" >"$RESULTS/durations.kept"
cat "$RESULTS/durations" "$RESULTS/durations.kept" 2>/dev/null >"$durations"

echo
[ -n "$failures" ] && echo "failed:$failures"
echo "$passed passed, $failed failed, $skipped skipped (programs side by side: $jobs)"
[ "$failed" -eq 0 ]
