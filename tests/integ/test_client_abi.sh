#!/bin/sh
# The client library's ABI across struct growth: a program built against the old
# declarations of struct ipuof_fault (IPUOF_CLIENT_0.4) and struct ipuof_optimizer /
# ipuof_training_opts (IPUOF_CLIENT_0), tests/integ/abi_old_app.c, linked to today's
# libipuof-client.so, injects and lists faults and compiles and trains a model against a real
# daemon with its old structs surrounded by guard bytes; and the .so exports both versions of
# each function whose argument layout changed. Usage: sh tests/integ/test_client_abi.sh [BUILD]
set -u
B=${1:-build}
D=$(mktemp -d /tmp/ipuof-abi-XXXXXX)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$D"; }
trap cleanup EXIT INT TERM
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
no() { fail=$((fail + 1)); echo "not ok - $1"; }
SO="$B/lib/libipuof-client.so"

# Both versions of each changed function: the old one (name@VER) and the default (@@0.7).
syms=$(readelf --dyn-syms -W "$SO")
for f in ipuof_fault_inject@IPUOF_CLIENT_0.4 ipuof_fault_list@IPUOF_CLIENT_0.4 \
         ipuof_optimizer_init@IPUOF_CLIENT_0 ipuof_model_set_optimizer@IPUOF_CLIENT_0 \
         ipuof_model_compile_training@IPUOF_CLIENT_0 \
         ipuof_model_compile_training_file@IPUOF_CLIENT_0; do
    name=${f%@*}
    echo "$syms" | grep -q " $f\$" && ok "exports $f" || no "exports $f"
    echo "$syms" | grep -q " $name@@IPUOF_CLIENT_0.7\$" && ok "exports $name@@IPUOF_CLIENT_0.7" \
        || no "exports $name@@IPUOF_CLIENT_0.7"
done
for f in ipuof_model_set_optimizer_half@@IPUOF_CLIENT_0.8 \
         ipuof_model_set_optimizer_with@@IPUOF_CLIENT_0.11; do   # new functions, new nodes
    echo "$syms" | grep -q " $f\$" && ok "exports $f" || no "exports $f"
done
# the old setOptimizer calls stay, in their nodes, beside the handle's
echo "$syms" | grep -q " ipuof_model_set_optimizer@@IPUOF_CLIENT_0.7\$" && \
    echo "$syms" | grep -q " ipuof_model_set_optimizer_half@@IPUOF_CLIENT_0.8\$" && \
    ok "ipuof_model_set_optimizer and _half keep their versions" \
    || no "ipuof_model_set_optimizer and _half keep their versions"
echo "$syms" | grep -q "_v0" && no "a compat implementation's own name is exported" \
    || ok "the compat implementations' own names stay local"

# The old program, built as it was: its declarations, the shared library.
san=""
nm -D "$SO" | grep -q __asan_init && san="-fsanitize=address,undefined"
if ! cc -std=gnu11 $san $(for d in sim sim/*/; do printf -- " -I%s" "${d%/}"; done) -o "$D/app" tests/integ/abi_old_app.c "$B/lib/libipuofsim.a" \
        -L"$B/lib" -lipuof-client $(pkg-config --libs libprotobuf-c zlib) \
        -lopenblas -ldnnl -lgomp -lpthread -lm >"$D/cc.log" 2>&1; then
    no "build the old program"; cat "$D/cc.log"; echo "$pass passed, $fail failed"; exit 1
fi
ok "build the old program against the shared library"
undef=$(objdump -T "$D/app" | grep -E "ipuof_(fault_(inject|list)|optimizer_init|model_set_optimizer|model_compile_training)")
echo "$undef" | grep -Eq "IPUOF_CLIENT_0\.4\)? +ipuof_fault_list\$" && \
    echo "$undef" | grep -Eq "IPUOF_CLIENT_0\)? +ipuof_optimizer_init\$" && \
    ok "it binds ipuof_fault_list@IPUOF_CLIENT_0.4 and ipuof_optimizer_init@IPUOF_CLIENT_0" \
    || { no "its bindings"; echo "$undef"; }

"$B/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$D/port" --foreground \
    --admin-socket "$D/admin.sock" --ipus 8 >"$D/log" 2>&1 &
PID=$!
i=0
while [ ! -s "$D/port" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
[ -s "$D/port" ] || { no "ipuofd started: $(cat "$D/log")"; echo "$pass passed, $fail failed"; exit 1; }

LD_LIBRARY_PATH="$B/lib" "$D/app" "127.0.0.1:$(cat "$D/port")" "unix:$D/admin.sock" "$D" \
    >"$D/out" 2>&1
rc=$?
cat "$D/out"
pass=$((pass + $(grep -c '^ok - ' "$D/out")))
fail=$((fail + $(grep -c '^not ok - ' "$D/out")))
[ $rc -eq 0 ] && [ "$(grep -c '^ok - ' "$D/out")" -ge 14 ] && ok "the old program ran to its end" \
    || no "the old program exited $rc"
kill -0 "$PID" 2>/dev/null && ok "the daemon still serves" || no "the daemon died: $(tail -5 "$D/log")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
