#!/bin/sh
# Prints the import cycles between the source files of one source tree (SRCDIR and every
# folder below it: sim/ and its parts, daemon/ and its parts), in three senses:
#   calls    file A uses file B when A.o has an undefined symbol that B.o defines (nm);
#   headers  file A uses file B when A.c or A.h includes "B.h" (x.c and x.h are one file x;
#            a header without its .c, such as jobs_int.h, is a file of its own); a header is
#            found by its name anywhere in the tree, as the per-part include paths find it;
#   parts    folder P uses folder Q when a file of P uses a file of Q in either sense above:
#            the parts of a tree may only call downward, so any cycle between two folders
#            (the top folder counts as one, ".") is reported, even when no two files make one.
# A cycle is a set of two or more nodes each of which reaches every other one (a strongly
# connected component of the graph); for each, the uses inside it are listed with one symbol
# or header that makes them. Files are named by their path below SRCDIR without the
# extension (jobs/jobs_life). Exits 1 when there is a cycle, 0 when there is none.
#
#   sh tools/dep_cycles.sh daemon build/obj/daemon      all three senses
#   sh tools/dep_cycles.sh daemon                       headers and parts by headers only
set -u
export LC_ALL=C
SRC=${1:?usage: dep_cycles.sh SRCDIR [OBJDIR]}
OBJ=${2:-}
T=$(mktemp -d /tmp/dep-cycles-XXXXXX)
trap 'rm -rf "$T"' EXIT INT TERM

# $1: a file of "from to why" lines; prints the cycles, returns 1 when there is one.
cycles() {
    awk '
    BEGIN { n = 0 }
    { if (!($1 in id)) { id[$1] = n; name[n++] = $1 }
      if (!($2 in id)) { id[$2] = n; name[n++] = $2 }
      a = id[$1]; b = id[$2]
      if (a != b && !((a, b) in r)) { r[a, b] = 1; why[a, b] = $3 } }
    END {
      for (k = 0; k < n; k++) for (i = 0; i < n; i++) if ((i, k) in r)
        for (j = 0; j < n; j++) if ((k, j) in r) r[i, j] = 1
      found = 0
      for (i = 0; i < n; i++) {
        if (i in done) continue
        members = name[i]; m = 1; done[i] = 1; set[i] = 1
        for (j = i + 1; j < n; j++)
          if (((i, j) in r) && ((j, i) in r)) { members = members " " name[j]; m++; done[j] = 1; set[j] = 1 }
        if (m > 1) {
          found++
          printf "cycle of %d: %s\n", m, members
          for (a = 0; a < n; a++) for (b = 0; b < n; b++)
            if ((a in set) && (b in set) && ((a, b) in why))
              printf "    %s -> %s (%s)\n", name[a], name[b], why[a, b]
        }
        for (j in set) delete set[j]
      }
      if (found == 0) print "no cycle"
      exit found > 0
    }' "$1"
}

# Every source of the tree, as "stem path" (stem: the path below SRC without .c/.h).
(cd "$SRC" && find . -name '*.[ch]' -type f | sed 's|^\./||' | sort) >"$T/files"
# header name -> stem (a name found twice in one tree would be ambiguous: refused)
sed -n 's|^\(\(.*/\)\{0,1\}\([^/]*\)\)\.h$|\3.h \1|p' "$T/files" | sort >"$T/hdrs"
dup=$(awk '{ print $1 }' "$T/hdrs" | uniq -d)
if [ -n "$dup" ]; then
    echo "dep_cycles: header names found twice under $SRC: $dup" >&2
    exit 2
fi

status=0
# headers: one node per stem; edges from the file that includes to the header's stem
while read -r rel; do
    from=${rel%.[ch]}
    sed -n 's/^#include "\([^"]*\.h\)".*/\1/p' "$SRC/$rel" | while read -r inc; do
        to=$(awk -v h="$(basename "$inc")" '$1 == h { print $2; exit }' "$T/hdrs")
        [ -n "$to" ] && echo "$from $to $(basename "$inc")"
    done
done <"$T/files" >"$T/headers"
echo "== headers ($SRC)"
cycles "$T/headers" || status=1
cp "$T/headers" "$T/all"

if [ -n "$OBJ" ]; then
    # Only the objects of sources that exist: a build directory keeps the objects of files
    # since removed or renamed (jobs.o after jobs.c was split), which would count otherwise.
    grep '\.c$' "$T/files" | while read -r rel; do
        o="$OBJ/${rel%.c}.o"
        [ -f "$o" ] && echo "${rel%.c} $o"
    done >"$T/objs"
    if [ ! -s "$T/objs" ]; then
        echo "dep_cycles: no object of $SRC's sources under $OBJ: build first" >&2
        exit 2
    fi
    while read -r stem o; do
        nm -g --defined-only "$o" | awk -v f="$stem" 'NF == 3 { print $3, f }'
    done <"$T/objs" | sort >"$T/defs"
    while read -r stem o; do
        nm -u "$o" | awk -v f="$stem" '{ print $NF, f }'
    done <"$T/objs" | sort >"$T/uses"
    # "user definer symbol" for every symbol one file uses and another defines
    join "$T/uses" "$T/defs" | awk '$2 != $3 { print $2, $3, $1 }' >"$T/calls"
    echo "== calls ($OBJ)"
    cycles "$T/calls" || status=1
    cat "$T/calls" >>"$T/all"
fi

# parts: the folder of each file ("." for the top); an edge says which two files make it
awk '{ fa = $1; fb = $2
       if (sub(/\/[^\/]*$/, "", fa) == 0) fa = "."
       if (sub(/\/[^\/]*$/, "", fb) == 0) fb = "."
       if (fa != fb) print fa, fb, $1 "->" $2 ":" $3 }' "$T/all" >"$T/parts"
echo "== parts ($SRC$([ -n "$OBJ" ] && echo ", headers and calls" || echo ", headers"))"
cycles "$T/parts" || status=1
exit $status
