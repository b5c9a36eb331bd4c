#!/bin/sh
# Checks the systemd unit, the sample configuration and the man pages.
#
#   sh tests/integ/test_systemd.sh [BUILD_DIR]       (from the repository root or anywhere)
#
# 1. `systemd-analyze verify` on systemd/ipuofd.service. verify fails when ExecStart names
#    a program that does not exist, and /usr/sbin/ipuofd usually does not on a development
#    machine, so the check runs on a copy of the unit in a temporary directory whose
#    ExecStart points at BUILD_DIR/bin/ipuofd (default build/) when that has been built,
#    or at /bin/true otherwise. Everything else in the copy is unchanged. verify also runs
#    `man` for each Documentation= entry; MANPATH points it at this tree's man/ pages.
#    verify exits 0 even after warnings such as an unknown directive, so any output
#    counts as a failure.
# 2. `systemd-analyze security --offline=true` on the same copy: the overall exposure must
#    be below 2.0 (--threshold=19 makes the command itself fail at 2.0 or above, and the
#    "Overall exposure level" line is parsed as well).
# 3. Every directive of the unit has a comment line above it.
# 4. The sample configuration parses as the daemon's --check-config sees it (when the
#    daemon is built), every key it sets is documented in ipuofd.conf(5), and its
#    drain_timeout stays below the unit's TimeoutStopSec=.
# 5. Each man page formats without warnings under `man --warnings`.
#
# Prints "ok - ..." or "not ok - ..." per check, then "N passed, M failed".
# Exit status: 0 all passed, 1 something failed, 77 skipped (no systemd-analyze).

root=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
cd "$root" || exit 1
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "skip - systemd-analyze not found"
    exit 77
fi

unit=systemd/ipuofd.service
conf=systemd/ipuofd.conf
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok - $*"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $*"; }
# Indents captured output under a "not ok" line.
show() { sed 's/^/#   /' "$1"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_systemd.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM

# ---- the unit under test: a copy whose ExecStart exists ---------------------------------
if [ -x "$build/bin/ipuofd" ]; then
    exe=$build/bin/ipuofd
else
    exe=/bin/true
fi
if ! grep -q '^ExecStart=/usr/sbin/ipuofd ' "$unit"; then
    not_ok "$unit has ExecStart=/usr/sbin/ipuofd (make install rewrites that path)"
fi
# Quoted, so that a repository path with spaces stays one word for systemd.
sed "s|^ExecStart=/usr/sbin/ipuofd |ExecStart=\"$exe\" |" "$unit" > "$tmp/ipuofd.service"

# Documentation=man:... entries resolve against this tree's pages.
have_man=no
if command -v man >/dev/null 2>&1; then
    have_man=yes
    for page in man/*.[0-9]; do
        [ -f "$page" ] || continue
        section=${page##*.}
        mkdir -p "$tmp/man/man$section"
        cp "$page" "$tmp/man/man$section/"
    done
fi

# ---- 1. systemd-analyze verify ------------------------------------------------------------
if [ $have_man = yes ]; then
    MANPATH=$tmp/man systemd-analyze verify "$tmp/ipuofd.service" > "$tmp/verify.out" 2>&1
    rc=$?
    what="systemd-analyze verify $unit (ExecStart=$exe, Documentation= pages from man/)"
else
    systemd-analyze verify --man=no "$tmp/ipuofd.service" > "$tmp/verify.out" 2>&1
    rc=$?
    what="systemd-analyze verify --man=no $unit (ExecStart=$exe; man not installed)"
fi
if [ $rc -eq 0 ] && [ ! -s "$tmp/verify.out" ]; then
    ok "$what"
else
    not_ok "$what: exit $rc"
    show "$tmp/verify.out"
fi

# ---- 2. systemd-analyze security -------------------------------------------------------------
SYSTEMD_COLORS=0 systemd-analyze security --offline=true --threshold=19 --no-pager \
    "$tmp/ipuofd.service" > "$tmp/security.out" 2>&1
rc=$?
exposure=$(sed -n 's/.*Overall exposure level for [^:]*: *\([0-9][0-9.]*\).*/\1/p' "$tmp/security.out")
if [ -z "$exposure" ]; then
    not_ok "systemd-analyze security --offline=true $unit: no exposure level in the output"
    show "$tmp/security.out"
elif [ $rc -eq 0 ] && awk -v e="$exposure" 'BEGIN { exit !(e + 0 < 2.0) }'; then
    ok "systemd-analyze security --offline=true $unit: exposure $exposure < 2.0"
else
    not_ok "systemd-analyze security --offline=true $unit: exposure $exposure (exit $rc), want < 2.0"
    grep '✗' "$tmp/security.out" | sed 's/^/#   /'
fi

# ---- 3. every directive says why ---------------------------------------------------------
# A directive is any line that is not blank, not a comment and not a [Section] header.
awk '
    /^[ \t]*$/ || /^[#;]/ || /^\[/ { prev = $0; next }
    prev !~ /^[#;]/ { print FILENAME ":" FNR ": " $0 }
    { prev = $0 }
' "$unit" > "$tmp/uncommented.out"
if [ ! -s "$tmp/uncommented.out" ]; then
    ok "every directive in $unit has a comment above it"
else
    not_ok "directives in $unit without a comment above them"
    show "$tmp/uncommented.out"
fi

# ---- 4. the sample configuration -------------------------------------------------------------
if [ -x "$build/bin/ipuofd" ]; then
    "$build/bin/ipuofd" --config "$conf" --check-config > "$tmp/check.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        ok "ipuofd --check-config accepts $conf"
    else
        not_ok "ipuofd --check-config rejects $conf: exit $rc"
        show "$tmp/check.out"
    fi
else
    ok "ipuofd --check-config accepts $conf # SKIP $build/bin/ipuofd not built"
fi

sed -n 's/^\([a-z_][a-z_0-9]*\)[ \t]*=.*/\1/p' "$conf" > "$tmp/keys"
: > "$tmp/undocumented"
while read -r key; do
    grep -q "^\.BR $key \" = \"" man/ipuofd.conf.5 || echo "$key" >> "$tmp/undocumented"
done < "$tmp/keys"
if [ ! -s "$tmp/keys" ]; then
    not_ok "$conf sets no keys"
elif [ ! -s "$tmp/undocumented" ]; then
    ok "all $(wc -l < "$tmp/keys" | tr -d ' ') keys of $conf are documented in ipuofd.conf(5)"
else
    not_ok "keys of $conf missing from man/ipuofd.conf.5: $(tr '\n' ' ' < "$tmp/undocumented")"
fi

drain=$(sed -n 's/^drain_timeout[ \t]*=[ \t]*\([0-9]*\).*/\1/p' "$conf")
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s\{0,1\}$/\1/p' "$unit")
if [ -n "$drain" ] && [ -n "$stop" ] && [ "$drain" -lt "$stop" ]; then
    ok "drain_timeout ($drain s) is below TimeoutStopSec ($stop s)"
else
    not_ok "drain_timeout (${drain:-?} s) must be below TimeoutStopSec (${stop:-?} s)"
fi

# ---- 5. man pages ------------------------------------------------------------------------
for page in man/*.[0-9]; do
    if [ ! -f "$page" ]; then
        not_ok "man --warnings $page: file missing"
        continue
    fi
    if [ $have_man = no ]; then
        ok "man --warnings $page # SKIP man not installed"
        continue
    fi
    # man exits 0 even when groff warns, so the warnings themselves are the verdict.
    LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l -Tutf8 "$page" > /dev/null 2> "$tmp/man.err"
    rc=$?
    if [ $rc -eq 0 ] && [ ! -s "$tmp/man.err" ]; then
        ok "man --warnings $page"
    else
        not_ok "man --warnings $page: exit $rc"
        show "$tmp/man.err"
    fi
done

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
