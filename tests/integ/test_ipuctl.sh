#!/bin/sh
# The operator's view end to end: a real ipuofd on an ephemeral loopback port, driven with
# ipuctl and ipuof-hello; exit codes and JSON checked. Usage: sh tests/integ/test_ipuctl.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
testd_sh_init ipuctl-test
no() { fail=$((fail + 1)); echo "not ok - $1"; }
check() { # description expected-rc actual-rc
    if [ "$2" = "$3" ]; then ok "$1"; else no "$1 (exit $3, expected $2)"; fi
}

testd_sh_must_start "$B" "$D" --ipus 4 --admin-socket "$D/admin.sock"
PORT=$(cat "$D/port")
S="127.0.0.1:$PORT"
CTL="$B/bin/ipuctl"

"$CTL" --server "$S" status --json >"$D/status.json" 2>"$D/err"
check "status --json exits 0" 0 $?
python3 - "$D/status.json" <<'PY' && ok "status --json lists 4 free IPUs" || no "status --json lists 4 free IPUs"
import json, sys
d = json.load(open(sys.argv[1]))
ipus = d["ipus"]
assert len(ipus) == 4, ipus
for i, x in enumerate(ipus):
    assert x["id"] == i and x["state"] == "free" and x["partition"] is None and x["holder"] is None
    assert x["memory_capacity_bytes"] == 900 * 2**20 and x["memory_used_bytes"] == 0
PY
[ ! -s "$D/err" ] && ok "status --json writes nothing to stderr" || no "status --json wrote to stderr"

"$CTL" --server "$S" status >"$D/table"
check "status table exits 0" 0 $?
grep -q "free" "$D/table" && ok "status table shows free IPUs" || no "status table"

# The simulator kernels' level (as the daemon logged it) and the executable cache against
# its budget (cache_bytes, 1 GiB by default): empty, then holding a compiled model.
isa=$(sed -n 's/.*simulator kernels: \([a-z0-9]*\) .*/\1/p' "$D/log" | head -n 1)
python3 - "$D/status.json" "$isa" <<'PY' && ok "status --json gives the kernels' level ($isa), an empty cache of 1 GiB and no arenas of 3/4 of the host's memory" || no "status --json: sim_isa, the cache and the arenas"
import json, os, sys
d = json.load(open(sys.argv[1]))
assert sys.argv[2] in ("baseline", "avx2", "avx512") and d["sim_isa"] == sys.argv[2], d["sim_isa"]
assert d["cache_bytes"] == 0 and d["cache_budget_bytes"] == 1 << 30, d
phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
assert d["arena_bytes"] == 0 and d["arena_budget_bytes"] == phys // 4 * 3, (d, phys)
PY
grep -qE "^simulator kernels $isa, executable cache 0 B of 1 GiB, arenas 0 B of [0-9.]+ [KMGT]iB$" "$D/table" &&
    ok "  ... and the table's summary says so" || no "  ... table summary: $(sed -n 2p "$D/table")"
# The simulated clock's device type (issue 28): the daemon's default, gc200 at 1.33 GHz.
python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
assert d["ipu_type"] == "gc200" and d["clock_hz"] == 1.33e9, d' "$D/status.json" &&
    ok "status --json gives the clock's device type (gc200, 1.33 GHz)" || no "status --json: ipu_type"
grep -qx "simulated clock: gc200 IPUs at 1.33 GHz (docs/cost-model.md)" "$D/table" &&
    ok "  ... and the table's summary says so" || no "  ... table: no device type line"
RELU=/usr/share/libonnx-testdata/data/node/test_relu
"$B/bin/ipuof-run" --server "$S" --model "$RELU/model.onnx" \
    --input "$RELU/test_data_set_0/input_0.pb" --output-dir "$D/relu" >"$D/run.out" 2>"$D/run.err"
check "ipuof-run compiles and runs test_relu (libonnx-testdata)" 0 $? "$D/run.err"
# The prediction from the compile alone (docs/cost-model.md): JSON whose figures add up.
"$B/bin/ipuof-run" --server "$S" --model "$RELU/model.onnx" --device-iterations 10 \
    --predict=json >"$D/pred.json" 2>"$D/pred.err"
check "ipuof-run --predict=json exits 0 without running" 0 $? "$D/pred.err"
python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))
assert abs(p["samples_per_s"] * p["step_seconds"] - p["samples_per_step"]) <= 1e-9 * p["samples_per_step"], p
assert sum(p["parts"].values()) <= p["step_seconds"] * (1 + 1e-12), p
assert p["device_iterations"] == 10 and p["ipu_type"] == "gc200", p' "$D/pred.json" &&
    ok "  ... its samples/s x step time = samples per step, parts within the step" ||
    no "  ... prediction JSON: $(cat "$D/pred.json")"
"$B/bin/ipuof-run" --server "$S" --model "$RELU/model.onnx" --predict=xml >/dev/null 2>"$D/pred.err"
check "ipuof-run --predict=xml is refused (64)" 64 $? "$D/pred.err"
"$CTL" --server "$S" status --json | python3 -c '
import json,sys; d=json.load(sys.stdin)
assert 0 < d["cache_bytes"] <= d["cache_budget_bytes"], d
assert d["arena_bytes"] == 0, d   # test_relu has no value but its input and output
' \
    && ok "  ... after which the cache holds its executable (test_relu: no arena)" || no "  ... the cache holds it"

# Garbage and an oversized frame do not stop the daemon.
python3 - "$PORT" <<'PY'
import os, socket, struct, sys
port = int(sys.argv[1])
for payload in (os.urandom(1 << 20), b"IPUF" + struct.pack(">HHII", 1, 0, 16, 0xFFFFFFFF)):
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(payload)
        s.settimeout(5)
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()
PY
kill -0 "$PID" && ok "daemon alive after garbage" || no "daemon died after garbage"
"$CTL" --server "$S" status --json >/dev/null
check "status after garbage" 0 $?

# A holder, then resets.
"$B/bin/ipuof-hello" --server "$S" --ipus 2 --partition demo --hold 3000 >"$D/hello.out" 2>"$D/hello.err" &
HELLO=$!
i=0
until "$CTL" --server "$S" status --json 2>/dev/null | grep -q '"demo"'; do
    sleep 0.05; i=$((i + 1)); [ $i -gt 100 ] && break
done
"$CTL" --server "$S" status --json | python3 -c '
import json,sys; d=json.load(sys.stdin)
held=[x for x in d["ipus"] if x["partition"]=="demo"]
assert len(held)==2 and held[0]["holder"]["name"]=="ipuof-hello", held' \
    && ok "status shows the holder" || no "status shows the holder"
"$CTL" --server "$S" reset --all 2>"$D/err"
check "reset over TCP without admin rights is refused (77)" 77 $?
"$CTL" --admin-socket "$D/admin.sock" reset --partition demo 2>"$D/err"
check "reset of a held partition without --force (75)" 75 $?
grep -q -- "--force" "$D/err" && ok "refusal mentions --force" || no "refusal mentions --force"
"$CTL" --admin-socket "$D/admin.sock" reset --ipu 9 2>/dev/null
check "reset of a missing IPU (65)" 65 $?
"$CTL" --admin-socket "$D/admin.sock" reset --partition demo --force >/dev/null
check "forced reset (0)" 0 $?
wait "$HELLO"
check "holder learns of the reset (75)" 75 $?
grep -q "reset" "$D/hello.err" && ok "holder's message says reset" || no "holder's message: $(cat "$D/hello.err")"
"$CTL" --admin-socket "$D/admin.sock" reset --all >/dev/null
check "reset --all through the admin socket" 0 $?

# ipuctl fault: usage errors before connecting, rights, the daemon's refusal, list, clear.
"$CTL" --admin-socket "$D/admin.sock" fault inject --ipu 0 2>"$D/err"
check "fault inject without --kind (64)" 64 $?
"$CTL" --admin-socket "$D/admin.sock" fault inject --ipu 0 --partition x --kind unrecoverable 2>/dev/null
check "fault inject with two targets (64)" 64 $?
"$CTL" --admin-socket "$D/admin.sock" fault inject --ipu 0 --kind unrecoverable --probability 0.5 2>"$D/err"
check "fault inject --probability without --seed (64)" 64 $?
grep -q -- "--seed" "$D/err" && ok "the sentence asks for --seed" || no "no --seed hint: $(cat "$D/err")"
"$CTL" --admin-socket "$D/admin.sock" fault frob 2>/dev/null
check "fault with an unknown verb (64)" 64 $?
"$CTL" --server "$S" fault inject --ipu 0 --kind unrecoverable 2>/dev/null
check "fault inject over TCP without admin rights (77)" 77 $?
"$CTL" --admin-socket "$D/admin.sock" fault inject --ipu 0 --kind recoverable:PARITION_RESET 2>"$D/err"
check "fault inject of a misspelt kind (64)" 64 $?
grep -q "PARTITION_RESET" "$D/err" && ok "the daemon names the right spelling" || no "$(cat "$D/err")"
out=$("$CTL" --admin-socket "$D/admin.sock" fault inject --ipu 1 --kind host-sync-timeout --at compile --count 3)
check "fault inject (0)" 0 $?
[ "$out" = "armed fault 1: host-sync-timeout at compile" ] && ok "inject says what it armed" || no "inject printed: $out"
"$CTL" --admin-socket "$D/admin.sock" fault list --json | python3 -c 'import json,sys; f=json.load(sys.stdin); assert [(x["id"],x["ipu"],x["kind"],x["at"],x["count"],x["state"]) for x in f]==[(1,1,"host-sync-timeout","compile",3,"armed")], f' 2>"$D/err"
check "fault list --json shows the armed fault" 0 $?
"$CTL" --admin-socket "$D/admin.sock" fault inject --ipu 0 --kind hang --duration 10x 2>"$D/err"
check "fault inject --duration that is not a time (64)" 64 $?
grep -q "such as 500ms, 30s or 2m" "$D/err" && ok "--duration's error names the forms" || no "--duration error: $(cat "$D/err")"
"$CTL" --admin-socket "$D/admin.sock" fault inject --ipu 0 --kind hang --at attach 2>"$D/err"
check "fault inject of a hang at attach (64)" 64 $?
out=$("$CTL" --admin-socket "$D/admin.sock" fault inject --ipu 0 --kind soc-error --at load --duration 2m --rearm-on-reset)
check "fault inject soc-error at load (0)" 0 $?
"$CTL" --admin-socket "$D/admin.sock" fault inject --ipu 0 --kind host-sync-timeout --wait 1s >/dev/null
check "fault inject host-sync-timeout --wait 1s (0)" 0 $?
"$CTL" --admin-socket "$D/admin.sock" fault list --json | python3 -c 'import json,sys; f=json.load(sys.stdin); assert [(x["kind"],x["at"],x["duration_ms"],x["rearm_on_reset"],x["wait_ms"],x["state"]) for x in f[1:]]==[("soc-error","load",120000,True,0,"armed"),("host-sync-timeout","run",0,False,1000,"armed")], f' 2>"$D/err"
check "fault list --json shows --duration, --rearm-on-reset and --wait" 0 $?
out=$("$CTL" --admin-socket "$D/admin.sock" fault clear)
[ "$out" = "cleared 3 faults" ] && ok "fault clear" || no "fault clear printed: $out"
"$CTL" --admin-socket "$D/admin.sock" fault clear --id 1 2>/dev/null
check "fault clear of a fault gone (65)" 65 $?

"$CTL" --server 127.0.0.1:1 status 2>/dev/null
check "unreachable daemon (69)" 69 $?
"$CTL" --server "$S" frobnicate 2>/dev/null
check "unknown command (64)" 64 $?

# Config checking.
"$B/bin/ipuofd" --check-config --config systemd/ipuofd.conf >/dev/null
check "--check-config accepts the sample config" 0 $?
printf '[server]\nmax_conections = 1\n' >"$D/bad.conf"
"$B/bin/ipuofd" --check-config --config "$D/bad.conf" 2>"$D/err"
check "--check-config rejects an unknown key (78)" 78 $?
grep -q "max_conections" "$D/err" && ok "the error names the key" || no "the error names the key"

kill -TERM "$PID"
wait "$PID"
check "SIGTERM exits 0" 0 $?
PID=""
[ ! -e "$D/admin.sock" ] && ok "admin socket removed on exit" || no "admin socket left behind"

# The port file is never written through a symlink: main wrote "<path>.tmp.<pid>" with
# fopen, so a link planted at that predictable name (or at the port file) sent the port into
# another file. The daemon's pid is the shell's that execs it.
echo victim >"$D/victim"
sh -c 'ln -s "$1/victim" "$1/p2.tmp.$$"; ln -s "$1/victim" "$1/p2"; exec "$2/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$1/p2" --ipus 1 --foreground 2>"$1/log2"' sh "$D" "$B" &
P2=$!
i=0
while ! grep -q '^[0-9]' "$D/p2" 2>/dev/null && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
kill -TERM "$P2" 2>/dev/null; wait "$P2" 2>/dev/null
[ "$(cat "$D/victim")" = victim ] && ok "a symlink at the port file's names is not followed" \
    || no "the port file was written through a symlink: victim holds $(cat "$D/victim")"
[ -f "$D/p2" ] && [ ! -L "$D/p2" ] && grep -q '^[0-9][0-9]*$' "$D/p2" \
    && ok "the port file replaces the link" || no "the port file replaces the link"

testd_sh_end
