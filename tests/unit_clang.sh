#!/bin/sh
# Runs the unit test programs given (make check-clang: the simulator's, built by clang with
# AddressSanitizer and UndefinedBehaviorSanitizer) one after another. A program fails when it
# exits non-zero or when a sanitizer reports ("runtime error", "ERROR: AddressSanitizer"):
# some of clang's UBSan checks report and go on even with -fno-sanitize-recover, so the
# report, not the exit status, is what counts. Logs: build-clang/test-logs/NAME.log.
set -u
logs=build-clang/test-logs
mkdir -p "$logs"
fail=0
for t in "$@"; do
    name=$(basename "$t")
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$t" >"$logs/$name.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] || grep -q 'runtime error\|ERROR: AddressSanitizer' "$logs/$name.log"; then
        echo "FAIL $name (exit $rc; $logs/$name.log):"
        grep -m3 -A6 'runtime error\|ERROR: AddressSanitizer\|FAILED' "$logs/$name.log"
        fail=$((fail + 1))
    else
        echo "ok   $name"
    fi
done
echo "check-clang: $# programs, $fail failed"
[ $fail -eq 0 ]
