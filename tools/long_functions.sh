#!/bin/sh
# Lists the C functions longer than MAX lines (issue 30, Goals: "no function over 120 lines")
# and exits 1 when there is one, 0 when there is none.
# A function is a body that opens with '{' at column 0 and closes with '}' at column 0 (the
# tree's style: the signature above, the braces alone on their lines); its length is the
# number of lines after the '{' up to and including the '}'. Its name is the identifier
# before the '(' of the last line above the '{' that starts at column 0 (the signature's
# first line), or MACRO(name) for a function a macro makes (SIM_HOT_FN(name, ...)). Struct
# and array initialisers do not open at column 0, so they are not counted.
#
#   sh tools/long_functions.sh                  every *.c git tracks (tests too), MAX 120;
#                                               without git (a copy of the tree, make test in
#                                               a fresh root): every *.c below the top but
#                                               build*/ and .git/
#   sh tools/long_functions.sh -n 100 a.c b.c   these files, MAX 100
#   sh tools/long_functions.sh -a               every function, longest first (no limit)
set -u
export LC_ALL=C
max=120
all=0
while [ $# -gt 0 ]; do
    case $1 in
    -n) max=${2:?-n needs a number}; shift 2 ;;
    -a) all=1; shift ;;
    -*) echo "long_functions.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
done
case $max in ''|*[!0-9]*) echo "long_functions.sh: -n takes a number, not '$max'" >&2; exit 2 ;; esac
if [ $# -eq 0 ]; then
    if files=$(git ls-files '*.c' 2>/dev/null) && [ -n "$files" ]; then
        set -- $files
    else
        set -- $(find . -path './build*' -prune -o -path './.git' -prune -o -name '*.c' -type f \
            -print | sed 's|^\./||' | sort)
    fi
    [ $# -gt 0 ] || { echo "long_functions.sh: no C file (run it from the checkout)" >&2; exit 2; }
fi
out=$(awk -v max="$max" -v all="$all" '
FNR == 1 { inb = 0; sig = "" }
/^\{/ { start = FNR; inb = 1; name = sig; next }
inb && /^\}/ {
    n = FNR - start
    if (all || n > max) printf "%d %s %s\n", n, FILENAME, name
    inb = 0; next
}
!inb && /^[A-Za-z_]/ && /\(/ {
    s = $0; sub(/\(.*/, "", s); k = split(s, w, /[ \t*]+/); sig = w[k]
    if (sig ~ /^[A-Z_][A-Z0-9_]*$/) { # a macro making the function: SIM_HOT_FN(name, ...)
        a = $0; sub(/^[^(]*\([ \t]*/, "", a); sub(/[ \t]*[,)].*/, "", a); sig = sig "(" a ")"
    }
}
' "$@" | sort -k1,1nr -k2)
[ -n "$out" ] || exit 0
[ "$all" -eq 1 ] || echo "functions over $max lines (lines, file, function):"
echo "$out"
[ "$all" -eq 1 ]
