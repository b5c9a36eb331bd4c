#!/bin/sh
# Prints the import cycles between the source files of one directory, in two senses:
#   calls    file A uses file B when A.o has an undefined symbol that B.o defines (nm);
#   headers  file A uses file B when A.c or A.h includes "B.h" (x.c and x.h are one file x;
#            a header without its .c, such as jobs_int.h, is a file of its own).
# A cycle is a set of two or more files each of which reaches every other one (a strongly
# connected component of the graph); for each, the uses inside it are listed with one symbol
# or header that makes them. Exits 1 when there is a cycle, 0 when there is none.
#
#   sh tools/dep_cycles.sh daemon build/obj/daemon      both senses
#   sh tools/dep_cycles.sh daemon                       headers only
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
          printf "cycle of %d files: %s\n", m, members
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

status=0
# headers: one node per stem; edges from the file that includes to the header's stem
for f in "$SRC"/*.c "$SRC"/*.h; do
    [ -f "$f" ] || continue
    from=$(basename "$f" | sed 's/\.[ch]$//')
    sed -n 's/^#include "\([^"]*\)\.h".*/\1/p' "$f" | while read -r to; do
        [ -f "$SRC/$to.h" ] && echo "$from $to $to.h"
    done
done >"$T/headers"
echo "== headers ($SRC)"
cycles "$T/headers" || status=1

if [ -n "$OBJ" ]; then
    # Only the objects of sources that exist: a build directory keeps the objects of files
    # since removed or renamed (jobs.o after jobs.c was split), which would count otherwise.
    objs=""
    for o in "$OBJ"/*.o; do
        [ -f "$SRC/$(basename "$o" .o).c" ] && objs="$objs $o"
    done
    for o in $objs; do
        nm -g --defined-only "$o" | awk -v f="$(basename "$o" .o)" 'NF == 3 { print $3, f }'
    done | sort >"$T/defs"
    for o in $objs; do
        nm -u "$o" | awk -v f="$(basename "$o" .o)" '{ print $NF, f }'
    done | sort >"$T/uses"
    # "user definer symbol" for every symbol one file uses and another defines
    join "$T/uses" "$T/defs" | awk '$2 != $3 { print $2, $3, $1 }' >"$T/calls"
    echo "== calls ($OBJ)"
    cycles "$T/calls" || status=1
fi
exit $status
