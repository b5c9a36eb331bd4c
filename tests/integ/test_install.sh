#!/bin/sh
# make install into a staging directory: every file lands, the pkg-config file works, and a
# program built against the installed header and library runs. Usage: sh tests/integ/test_install.sh [BUILD]
set -u
B=${1:-build}
D=$(mktemp -d /tmp/ipuof-install-XXXXXX)
trap 'rm -rf "$D"' EXIT INT TERM
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
no() { fail=$((fail + 1)); echo "not ok - $1"; }

# A sanitizer build is installed as it was built (make install rebuilds what is out of date).
sanflag=""
nm "$B/bin/ipuofd" 2>/dev/null | grep -q __asan_init && sanflag="SAN=1"
if ! make -s install $sanflag BUILD="$B" DESTDIR="$D/root" PREFIX=/usr >"$D/log" 2>&1; then
    no "make install"; cat "$D/log"; echo "$pass passed, $((fail)) failed"; exit 1
fi
ok "make install DESTDIR=... PREFIX=/usr"
for f in usr/sbin/ipuofd usr/bin/ipuctl usr/include/ipuof/client.h usr/include/ipuof/status.h \
         usr/lib/libipuof-client.a usr/lib/libipuof-client.so usr/lib/libipuof-client.so.0 \
         usr/lib/pkgconfig/ipuof-client.pc usr/lib/systemd/system/ipuofd.service \
         etc/ipuofd/ipuofd.conf usr/share/man/man8/ipuofd.8 usr/share/man/man8/ipuctl.8 \
         usr/share/man/man5/ipuofd.conf.5; do
    [ -e "$D/root/$f" ] && ok "installed $f" || no "installed $f"
done
grep -q "$D" "$D/root/usr/lib/pkgconfig/ipuof-client.pc" && no "DESTDIR leaked into the .pc file" \
    || ok "DESTDIR not embedded in the .pc file"
soname=$(objdump -p "$D/root/usr/lib/libipuof-client.so" | awk '/SONAME/ {print $2}')
[ "$soname" = "libipuof-client.so.0" ] && ok "SONAME is libipuof-client.so.0" || no "SONAME is '$soname'"
exported=$(nm -D --defined-only "$D/root/usr/lib/libipuof-client.so" | awk '{print $3}' | grep -v '^ipuof_' | grep -v '^IPUOF' | wc -l)
[ "$exported" -eq 0 ] && ok "only ipuof_* symbols exported" || no "$exported foreign symbols exported"

cat >"$D/app.c" <<'C'
#include <ipuof/client.h>
#include <stdio.h>
int main(void) {
    ipuof_client *c = ipuof_client_new();
    int rc = ipuof_client_connect(c, "127.0.0.1:1");
    printf("%s %s\n", ipuof_version(), ipuof_status_name(rc));
    ipuof_client_free(c);
    return rc == IPUOF_E_IO ? 0 : 1;
}
C
export PKG_CONFIG_PATH="$D/root/usr/lib/pkgconfig"
# A sanitizer build's library needs the sanitizer runtime in the application too.
san=""
nm -D "$D/root/usr/lib/libipuof-client.so" | grep -q __asan_init && san="-fsanitize=address,undefined"
if cc $san -o "$D/app" "$D/app.c" $(pkg-config --define-variable=prefix="$D/root/usr" --cflags --libs ipuof-client) >"$D/cc.log" 2>&1; then
    ok "an application builds with pkg-config --cflags --libs ipuof-client"
    LD_LIBRARY_PATH="$D/root/usr/lib" "$D/app" >/dev/null && ok "and runs against the shared library" \
        || no "the application ran wrong"
else
    no "an application builds with pkg-config"; cat "$D/cc.log"
fi
for f in usr/lib/python3/dist-packages/ipuof/__init__.py \
         usr/lib/python3/dist-packages/ipuof/ipuof-client.cdef \
         usr/lib/python3/dist-packages/poptorch/__init__.py \
         usr/lib/python3/dist-packages/popdist/__init__.py \
         usr/lib/python3/dist-packages/popdist/poptorch.py; do
    [ -e "$D/root/$f" ] && ok "installed $f" || no "installed $f"
done
# The installed package finds the installed library next to it (no build tree, no
# IPUOF_CLIENT_LIB) and reports an unreachable daemon as poptorch.Error.
if [ -z "$san" ] && (cd "$D" && env -u IPUOF_CLIENT_LIB -u IPUOF_BUILD \
        PYTHONPATH="$D/root/usr/lib/python3/dist-packages" /usr/bin/python3 -c '
import poptorch, popdist.poptorch, sys
assert poptorch.library_path.startswith(sys.argv[1]), poptorch.library_path
assert popdist.__file__.startswith(sys.argv[1]), popdist.__file__
' "$D/root/usr/lib/") >"$D/py.log" 2>&1; then
    ok "import poptorch and popdist.poptorch from the install uses the installed library"
elif [ -n "$san" ]; then
    ok "import poptorch from the install (not tried: a sanitizer build's library)"
else
    no "import poptorch from the install"; cat "$D/py.log"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
