#!/bin/sh
# ipuctl status shows the phase of a job of several processes (daemon/jobs/jobs_sm.h), in
# its table (JOB PHASE) and in --json ("job_phase"), against a real ipuofd:
#   - process 0 of 2 attached alone: both rows say gather-attach (process 1 absent);
#   - process 1 attaches too: both rows say ready (both attached);
#   - both gone: no job row is left.
# The processes are ipuof-hello with IPUOF_PROCESS_ID / IPUOF_NUM_PROCESSES, holding the
# partition; every wait is bounded (a time limit, never a pass criterion).
# Usage: sh tests/integ/test_job_phase_status.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
PY=${IPUOF_PYTHON:-/usr/bin/python3}
testd_sh_init job-phase-test
h0="" h1=""

printf '[server]\njob_timeout = 60\n' >"$D/conf"
testd_sh_must_start "$B" "$D" --config "$D/conf"

# status_until PATTERN: ipuctl status into $D/st (and --json into $D/st.json) until its
# table has a line matching PATTERN (grep -E), for up to 30 s. Status 0 when it did.
status_until() {
    _i=0
    while [ $_i -lt 300 ]; do
        "$B/bin/ipuctl" status >"$D/st" 2>&1
        if grep -Eq "$1" "$D/st"; then
            "$B/bin/ipuctl" status --json >"$D/st.json" 2>&1
            return 0
        fi
        sleep 0.1; _i=$((_i + 1))
    done
    return 1
}
# phases: "process_id state job_phase" per job process of $D/st.json, sorted.
phases() {
    "$PY" -c 'import json, sys
for p in json.load(open(sys.argv[1]))["job_processes"]:
    print(p["process_id"], p["state"], p["job_phase"])' "$D/st.json" | sort
}

IPUOF_PROCESS_ID=0 IPUOF_NUM_PROCESSES=2 IPUOF_PARTITION=phased \
    "$B/bin/ipuof-hello" --ipus 2 --hold 60000 >"$D/h0" 2>&1 &
h0=$!
KIDS=$h0
status_until '^\| phased +\| +0 of 2 \| attaching '
check "process 0 of 2 attaching: the table says gather-attach for both processes
$(sed -n "/^jobs of/,\$p" "$D/st")" \
    sh -c "grep -Eq '^\| phased +\| +0 of 2 \| attaching +\| ipuof-hello\[$h0\]@[^ ]+ +\| +[0-9]+ \| gather-attach +\|$' '$D/st' &&
           grep -Eq '^\| phased +\| +1 of 2 \| absent +\| - +\| +- \| gather-attach +\|$' '$D/st'"
printf '0 attaching gather-attach\n1 absent gather-attach\n' >"$D/want"
phases >"$D/got" 2>&1
check "process 0 of 2 attaching: --json job_phase is gather-attach ($(cat "$D/got"))" \
    cmp -s "$D/want" "$D/got"

IPUOF_PROCESS_ID=1 IPUOF_NUM_PROCESSES=2 IPUOF_PARTITION=phased \
    "$B/bin/ipuof-hello" --ipus 2 --hold 60000 >"$D/h1" 2>&1 &
h1=$!
KIDS="$h0 $h1"
status_until '^\| phased +\| +1 of 2 \| attached '
check "both processes attached: the table says ready for both
$(sed -n "/^jobs of/,\$p" "$D/st")" \
    sh -c "[ \$(grep -Ec '^\| phased +\| +[01] of 2 \| attached +\| ipuof-hello\[[0-9]+\]@[^ ]+ +\| +[0-9]+ \| ready +\|$' '$D/st') -eq 2 ]"
printf '0 attached ready\n1 attached ready\n' >"$D/want"
phases >"$D/got" 2>&1
check "both processes attached: --json job_phase is ready ($(cat "$D/got"))" \
    cmp -s "$D/want" "$D/got"

# Both processes go (killed: their connections close); the job ends and leaves the status.
kill "$h0" "$h1" 2>/dev/null
wait "$h0" "$h1" 2>/dev/null
h0="" h1="" KIDS=""
i=0
while [ $i -lt 300 ]; do
    "$B/bin/ipuctl" status --json >"$D/st.json" 2>&1
    [ "$(phases 2>&1)" = "" ] && break
    sleep 0.1; i=$((i + 1))
done
check "both processes gone: no job process is left ($(phases 2>&1))" [ -z "$(phases 2>&1)" ]

testd_sh_stop
testd_sh_end
