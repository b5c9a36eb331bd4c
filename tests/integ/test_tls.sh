#!/bin/sh
# TLS on the client port against a real ipuofd on an ephemeral loopback port, with
# certificates this test makes with openssl (a CA, the daemon's, an expired one, another
# CA's, client certificates). Checks: the tools connect with IPUOF_TLS_CA_FILE; an in-test
# proxy recording every byte of a session sees neither the auth token nor a tensor's bytes
# (and, as a control, sees both on a plain daemon); a plain-text client, an unknown CA, a
# wrong host name, an expired certificate and a missing client certificate each get a clear
# error on both sides while the daemon serves everyone else; SIGHUP re-reads the
# certificates; a certificate's subject carries admin rights; ipuof-mnist trains and tests
# to the same losses and accuracies over TLS as in plain text.
# Usage: sh tests/integ/test_tls.sh [BUILD]
set -u
B=${1:-build}
D=$(mktemp -d /tmp/tls-test-XXXXXX)
PID="" PID2="" PROXY=""
cleanup() {
    for p in $PID $PID2 $PROXY; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$D"
}
trap cleanup EXIT INT TERM
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
no() { fail=$((fail + 1)); echo "not ok - $1"; }
CTL="$B/bin/ipuctl"
TOKEN="tok-$(od -An -tx8 -N8 /dev/urandom | tr -d ' ')"
RELU=/usr/share/libonnx-testdata/data/node/test_relu

# ---- certificates ---------------------------------------------------------------------------
(
cd "$D" || exit 1
key() { openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null; }
ca() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
           -keyout "$1.key" -out "$1.pem" -days 3 -subj "$2" 2>/dev/null; }
sign() { # name ca extfile
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
        -out "$1.pem" -days 2 ${3:+-extfile "$3"} 2>/dev/null; }
ca ca /CN=ipuof-test-ca
ca other /CN=someone-elses-ca
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.ext
key srv /CN=localhost && sign srv ca san.ext
key srv2 /CN=localhost && sign srv2 ca san.ext
key operator /CN=operator && sign operator ca
key user /CN=user && sign user ca
key stranger /CN=operator && sign stranger other
# An expired certificate: openssl ca takes explicit dates.
mkdir -p db && : >db/index.txt && echo 01 >db/serial
printf '[ca]\ndefault_ca=t\n[t]\ndir=.\ndatabase=db/index.txt\nserial=db/serial\nnew_certs_dir=db\ndefault_md=sha256\npolicy=p\n[p]\ncommonName=supplied\n' >ca.cnf
key old /CN=localhost
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in old.csr -out old.pem \
    -startdate 20200101000000Z -enddate 20200102000000Z -extfile san.ext >/dev/null 2>&1
) || { echo "not ok - openssl could not make the certificates"; exit 1; }
[ -s "$D/old.pem" ] && [ -s "$D/srv.pem" ] && ok "openssl made the CA, server, client and expired certificates" ||
    { no "certificates"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

conf() { # cert key auth_clients
    printf '[server]\nauth_token = %s\ntls_cert_file = %s\ntls_key_file = %s\ntls_ca_file = %s\ntls_auth_clients = %s\ntls_admin_subjects = CN=operator\n' \
        "$TOKEN" "$D/$1.pem" "$D/$1.key" "$D/ca.pem" "$2" >"$D/conf"
}
conf srv optional
"$B/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$D/port" --config "$D/conf" \
    --admin-socket "$D/admin.sock" --foreground 2>"$D/log" &
PID=$!
i=0
while [ ! -s "$D/port" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
[ -s "$D/port" ] || { echo "not ok - ipuofd did not start: $(cat "$D/log")"; exit 1; }
P=$(cat "$D/port")
S="127.0.0.1:$P"
export IPUOF_AUTH_TOKEN="$TOKEN"

IPUOF_TLS_CA_FILE="$D/ca.pem" "$CTL" --server "$S" status --json >"$D/st" 2>"$D/err"
[ $? -eq 0 ] && grep -q '"ipus"' "$D/st" && ok "ipuctl status over TLS (IPUOF_TLS_CA_FILE, host 127.0.0.1)" ||
    no "status over TLS: $(cat "$D/err")"
# The certificate's DNS name: connected at 127.0.0.1, verified as localhost (a debootstrapped
# Debian has no /etc/hosts entry for localhost, so the name itself need not resolve).
IPUOF_TLS_CA_FILE="$D/ca.pem" IPUOF_TLS_SERVER_NAME=localhost "$CTL" --server "$S" health \
    >/dev/null 2>"$D/err" &&
    ok "  ... and verified by the DNS name localhost (IPUOF_TLS_SERVER_NAME)" ||
    no "by name: $(cat "$D/err")"
if getent hosts localhost >/dev/null 2>&1; then
    IPUOF_TLS_CA_FILE="$D/ca.pem" "$CTL" --server "localhost:$P" health >/dev/null 2>"$D/err" &&
        ok "  ... and reached by the name localhost" || no "reached by name: $(cat "$D/err")"
else
    echo "# localhost does not resolve on this machine: the name was checked above through IPUOF_TLS_SERVER_NAME"
fi

# The IPUoF config file's fields do the same as the variables (the variables win).
printf '{"attributes": {"Partition Id": "p0", "GCD Id": 0}, "servers": [{"address": "%s", "tls_ca_file": "%s"}]}\n' \
    "$S" "$D/ca.pem" >"$D/ipuof.conf"
IPUOF_CONFIG_PATH="$D/ipuof.conf" "$CTL" status >/dev/null 2>"$D/err" &&
    ok "an IPUoF config file's servers[0].tls_ca_file turns TLS on" || no "config file TLS: $(cat "$D/err")"
IPUOF_CONFIG_PATH="$D/ipuof.conf" IPUOF_TLS_CA_FILE="$D/other.pem" "$CTL" status >/dev/null 2>"$D/err"
[ $? -eq 77 ] && ok "  ... and IPUOF_TLS_CA_FILE wins over it" || no "env over file: $(cat "$D/err")"
# Python gets it from the library, with no code of its own.
PRE=""
if nm -D "$B/lib/libipuof-client.so" 2>/dev/null | grep -q __asan_init; then # a sanitizer build
    PRE="LD_PRELOAD=$(cc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0:halt_on_error=1"
fi
py_hw() {
    env "$@" $PRE IPUOF_CLIENT_LIB="$B/lib/libipuof-client.so" PYTHONPATH=python IPUOF_SERVER="$S" \
        /usr/bin/python3 -c 'import poptorch; print(poptorch.ipuHardwareIsAvailable(1))' 2>&1
}
[ "$(py_hw IPUOF_TLS_CA_FILE="$D/ca.pem")" = True ] && [ "$(py_hw IPUOF_TLS=0)" = False ] &&
    ok "poptorch.ipuHardwareIsAvailable() sees the daemon over TLS (and not without it)" ||
    no "python over TLS: $(py_hw IPUOF_TLS_CA_FILE="$D/ca.pem")"

# ---- what an eavesdropper sees ----------------------------------------------------------------
# proxy.py LISTEN_PORT_FILE TARGET_PORT CAPTURE: forwards one connection at a time, records
# both directions' bytes.
cat >"$D/proxy.py" <<'PY'
import socket, sys, threading
pf, target, cap = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0)); ls.listen(16)
open(pf + ".tmp", "w").write(str(ls.getsockname()[1])); __import__("os").rename(pf + ".tmp", pf)
lock = threading.Lock()
out = open(cap, "ab", buffering=0)
def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            with lock:
                out.write(d)
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
while True:
    c, _ = ls.accept()
    u = socket.create_connection(("127.0.0.1", target))
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
PY
/usr/bin/python3 -c '
import sys
from onnx import load_tensor, numpy_helper
t = numpy_helper.to_array(load_tensor(sys.argv[1]))
open(sys.argv[2], "wb").write(t.tobytes())' "$RELU/test_data_set_0/input_0.pb" "$D/tensor.bin"
captured() { # capture-file proxy-target extra-env: runs ipuof-run through a proxy
    rm -f "$D/pport"
    python3 "$D/proxy.py" "$D/pport" "$2" "$1" &
    PROXY=$!
    i=0
    while [ ! -s "$D/pport" ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i + 1)); done  # up to 60 s
    env $3 "$B/bin/ipuof-run" --server "127.0.0.1:$(cat "$D/pport")" --model "$RELU/model.onnx" \
        --input "$RELU/test_data_set_0/input_0.pb" --output-dir "$D/out-$(basename "$1")" \
        >"$D/run.out" 2>&1
    rc=$?
    sleep 0.2
    kill "$PROXY" 2>/dev/null
    wait "$PROXY" 2>/dev/null
    PROXY=""
    return $rc
}
# contains FILE NEEDLE-FILE|STRING: 0 when the capture holds the bytes
# (exit 2, counted as a failure by the callers' checks below, when it cannot tell)
contains() {
    python3 - "$1" "$2" "$3" <<'PY'
import sys
try:
    cap = open(sys.argv[1], "rb").read()
    needle = open(sys.argv[3], "rb").read()[:64] if sys.argv[2] == "file" else sys.argv[3].encode()
    assert len(needle) >= 16
except Exception as e:
    print("# contains: %r" % e)
    sys.exit(2)
sys.exit(0 if needle in cap else 1)
PY
}
absent() { contains "$@"; [ $? -eq 1 ]; }
captured "$D/cap-tls" "$P" "IPUOF_TLS_CA_FILE=$D/ca.pem" &&
    ok "ipuof-run compiles and runs test_relu over TLS through a recording proxy" ||
    no "ipuof-run over TLS: $(cat "$D/run.out")"
n=$(wc -c <"$D/cap-tls")
[ "$n" -gt 2000 ] && ok "  ... the proxy recorded $n bytes" || no "  ... only $n bytes recorded"
absent "$D/cap-tls" str "$TOKEN" && ok "  ... in which the auth token does not appear" ||
    no "the token is in the TLS capture (or the search failed)"
absent "$D/cap-tls" file "$D/tensor.bin" && ok "  ... nor the input tensor's first 64 bytes" ||
    no "the input tensor's bytes are in the TLS capture (or the search failed)"
# The control: the same run against a plain daemon shows both (so the search can succeed).
printf '[server]\nauth_token = %s\n' "$TOKEN" >"$D/conf-plain"
"$B/bin/ipuofd" --listen 127.0.0.1:0 --port-file "$D/port2" --config "$D/conf-plain" \
    --admin-socket "" --foreground 2>"$D/log2" &
PID2=$!
i=0
while [ ! -s "$D/port2" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
captured "$D/cap-plain" "$(cat "$D/port2")" "" || no "plain ipuof-run: $(cat "$D/run.out")"
contains "$D/cap-plain" str "$TOKEN" && contains "$D/cap-plain" file "$D/tensor.bin" &&
    ok "control: without TLS the same capture holds the token and the tensor's bytes" ||
    no "control: the plain capture lacks the token or the tensor"
# Training and inference give the same numbers over TLS as over plain TCP: every input
# payload (2 training calls of 4000 samples, 50 test calls) through the TLS read path
# (daemon/conn/tls_read.c). Losses and accuracies compared; timings dropped.
mnist() { # server extra-env
    env $2 "$B/bin/ipuof-mnist" --server "$1" --epochs 1 --limit-train 8000 \
        --limit-test 400 2>&1 | grep -o 'loss=[0-9.]*, acc=[0-9.]*%'
}
mnist "127.0.0.1:$(cat "$D/port2")" "" >"$D/mnist-plain"
mnist "$S" "IPUOF_TLS_CA_FILE=$D/ca.pem" >"$D/mnist-tls"
[ "$(wc -l <"$D/mnist-plain")" -eq 2 ] && cmp -s "$D/mnist-plain" "$D/mnist-tls" &&
    ok "ipuof-mnist over TLS prints the losses and accuracies it prints in plain text: $(tr '\n' ' ' <"$D/mnist-tls")" ||
    no "ipuof-mnist over TLS: '$(cat "$D/mnist-tls")' against plain '$(cat "$D/mnist-plain")'"
# Records cut anywhere: a TLS proxy (rechunk.py) takes the client's TLS and sends its bytes
# on to the daemon over TLS in records of 1021 bytes, so records split frame heads, headers
# and payloads wherever they fall (the client's own records end with each frame). The
# numbers must not change. (Today's client sends nothing after a request's last payload
# until the reply, so tls_read.c's tls_pending_to_input still moves no byte here.)
cat >"$D/rechunk.py" <<'PY'
import socket, ssl, sys, threading, os
pf, target, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
sctx.load_cert_chain(d + "/srv.pem", d + "/srv.key")
cctx = ssl.create_default_context(cafile=d + "/ca.pem")
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0)); ls.listen(16)
open(pf + ".tmp", "w").write(str(ls.getsockname()[1])); os.rename(pf + ".tmp", pf)
def pipe(a, b, chunk):
    try:
        while True:
            data = a.recv(1 << 20)
            if not data:
                break
            for i in range(0, len(data), chunk):
                b.sendall(data[i:i + chunk])  # one TLS record per call
    except (OSError, ssl.SSLError):
        pass
    for s in (a, b):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
while True:
    c, _ = ls.accept()
    try:
        c = sctx.wrap_socket(c, server_side=True)
        u = cctx.wrap_socket(socket.create_connection(("127.0.0.1", target)),
                             server_hostname="localhost")
    except (OSError, ssl.SSLError):
        continue
    threading.Thread(target=pipe, args=(c, u, 1021), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c, 1 << 20), daemon=True).start()
PY
rm -f "$D/rport"
/usr/bin/python3 "$D/rechunk.py" "$D/rport" "$P" "$D" &
PROXY=$!
i=0
while [ ! -s "$D/rport" ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i + 1)); done   # up to 60 s: python3 starting on a loaded machine
mnist "127.0.0.1:$(cat "$D/rport")" "IPUOF_TLS_CA_FILE=$D/ca.pem" >"$D/mnist-rechunk"
kill "$PROXY" 2>/dev/null; wait "$PROXY" 2>/dev/null; PROXY=""
[ "$(wc -l <"$D/mnist-plain")" -eq 2 ] && cmp -s "$D/mnist-plain" "$D/mnist-rechunk" &&
    ok "  ... and through a proxy re-cutting the TLS stream into 1021-byte records (a record holding a payload's end and the next frame)" ||
    no "ipuof-mnist through the re-chunking TLS proxy: '$(cat "$D/mnist-rechunk")' against plain '$(cat "$D/mnist-plain")'"
kill "$PID2"; wait "$PID2" 2>/dev/null; PID2=""

# ---- each bad case: a clear error on both sides, and the daemon goes on -------------------
bad() { # description expected-rc client-grep log-grep env...
    desc=$1 want=$2 cg=$3 lg=$4
    shift 4
    : >"$D/log.mark"
    before=$(wc -l <"$D/log")
    env "$@" "$CTL" --server "$S" status >/dev/null 2>"$D/err"
    rc=$?
    sleep 0.3
    tail -n +"$((before + 1))" "$D/log" >"$D/log.new"
    if [ "$rc" = "$want" ] && grep -Eq "$cg" "$D/err" && grep -Eq "$lg" "$D/log.new"; then
        ok "$desc: client exit $rc, \"$(head -c 150 "$D/err")...\"; daemon: \"$(grep -Eo "$lg.*" "$D/log.new" | head -n 1 | head -c 120)\""
    else
        no "$desc: exit $rc (want $want); client: $(cat "$D/err"); daemon: $(cat "$D/log.new")"
    fi
    if [ "$GOOD" = admin ]; then
        "$CTL" --admin-socket "$D/admin.sock" health >/dev/null 2>&1
    else
        env $GOOD "$CTL" --server "$S" health >/dev/null 2>&1
    fi || no "  ... the daemon stopped serving after: $desc"
}
GOOD="IPUOF_TLS_CA_FILE=$D/ca.pem" # who must still be served after each bad case
bad "a plain-text client on the TLS port" 76 "serves TLS on this port" "plain-text hello on the TLS port"
bad "an unknown CA" 77 "not trusted: .*no CA in IPUOF_TLS_CA_FILE signed it" \
    "TLS handshake failed: .*(unknown ca|alert)" IPUOF_TLS_CA_FILE="$D/other.pem"
bad "a wrong host name" 77 "not trusted: [Hh]ostname mismatch: it names another host" \
    "TLS handshake failed" IPUOF_TLS_CA_FILE="$D/ca.pem" IPUOF_TLS_SERVER_NAME=ipu.example.com
printf 'not a certificate\n' >"$D/junk.pem"
IPUOF_TLS_CA_FILE="$D/junk.pem" "$CTL" --server "$S" status >/dev/null 2>"$D/err"
grep -q "IPUOF_TLS_CA_FILE=.*junk.pem: cannot read PEM" "$D/err" && ok "a CA file that is no PEM: $(head -c 120 "$D/err")" ||
    no "junk CA: $(cat "$D/err")"

# The expired certificate, loaded by a reload (SIGHUP, as systemctl reload sends).
reload() { # waits for the log line
    before=$(grep -c "$1" "$D/log")
    kill -HUP "$PID"
    i=0
    while [ "$(grep -c "$1" "$D/log")" -le "$before" ] && [ $i -lt 250 ]; do sleep 0.02; i=$((i + 1)); done
    [ "$(grep -c "$1" "$D/log")" -gt "$before" ]
}
conf old optional
GOOD=admin # nobody gets in over TLS with the expired certificate: the admin socket answers
reload "loaded again" && ok "SIGHUP re-reads the certificate files" || no "reload: $(tail -3 "$D/log")"
bad "an expired certificate" 77 "not trusted: certificate has expired: .*renew" \
    "TLS handshake failed" IPUOF_TLS_CA_FILE="$D/ca.pem"
printf 'broken\n' >"$D/broken.pem"
printf '[server]\nauth_token = %s\ntls_cert_file = %s\ntls_key_file = %s\ntls_ca_file = %s\ntls_auth_clients = yes\n' \
    "$TOKEN" "$D/broken.pem" "$D/srv2.key" "$D/ca.pem" >"$D/conf"
reload "reload refused" && grep -q "tls_cert_file = .*broken.pem: cannot use it as a PEM" "$D/log" &&
    ok "a reload with a broken certificate is refused, keeping the running one" || no "broken reload: $(tail -2 "$D/log")"

# Client certificates required (a reload changes tls_auth_clients too).
conf srv2 yes
reload "loaded again" || no "reload to tls_auth_clients = yes"
GOOD="IPUOF_TLS_CA_FILE=$D/ca.pem IPUOF_TLS_CERT_FILE=$D/user.pem IPUOF_TLS_KEY_FILE=$D/user.key"
IPUOF_TLS_CA_FILE="$D/ca.pem" "$CTL" --server "$S" health >/dev/null 2>"$D/err"
[ $? -ne 0 ] && ok "  ... srv2 is in use and asks for a client certificate" || no "health without a client certificate passed"
bad "a client without a required certificate" 77 "requires a client certificate.*IPUOF_TLS_CERT_FILE" \
    "TLS handshake failed: .*certificate" IPUOF_TLS_CA_FILE="$D/ca.pem" 2>/dev/null || true
bad "a client certificate of another CA" 77 "refused this client's certificate .*signed by a CA in the daemon's tls_ca_file" \
    "TLS handshake failed" IPUOF_TLS_CA_FILE="$D/ca.pem" IPUOF_TLS_CERT_FILE="$D/stranger.pem" IPUOF_TLS_KEY_FILE="$D/stranger.key"
U="IPUOF_TLS_CA_FILE=$D/ca.pem IPUOF_TLS_CERT_FILE=$D/user.pem IPUOF_TLS_KEY_FILE=$D/user.key"
O="IPUOF_TLS_CA_FILE=$D/ca.pem IPUOF_TLS_CERT_FILE=$D/operator.pem IPUOF_TLS_KEY_FILE=$D/operator.key"
env $U "$CTL" --server "$S" status >/dev/null 2>"$D/err" && ok "a client certificate of the CA gets in" ||
    no "user certificate: $(cat "$D/err")"
env $U "$CTL" --server "$S" reset --all >/dev/null 2>"$D/err"
[ $? -eq 77 ] && ok "  ... CN=user has no admin rights (reset: 77)" || no "user reset: $(cat "$D/err")"
env $O "$CTL" --server "$S" reset --all >"$D/out" 2>"$D/err" &&
    grep -q "admin rights by its certificate CN=operator" "$D/log" &&
    ok "CN=operator (tls_admin_subjects) resets over TLS without the admin token" ||
    no "operator reset: $(cat "$D/err")"

# A non-loopback listener: refused without a token or client certificates, as before.
printf '[server]\nlisten = 0.0.0.0:0\n' >"$D/c1"
"$B/bin/ipuofd" --config "$D/c1" --check-config >/dev/null 2>&1
[ $? -eq 78 ] && ok "a non-loopback listen without a token or TLS client certificates is refused" || no "non-loopback check"
printf '[server]\nlisten = 0.0.0.0:0\ntls_cert_file = %s\ntls_key_file = %s\ntls_ca_file = %s\ntls_auth_clients = yes\n' \
    "$D/srv.pem" "$D/srv.key" "$D/ca.pem" >"$D/c2"
"$B/bin/ipuofd" --config "$D/c2" --check-config >"$D/cc" 2>&1 &&
    ok "  ... and accepted with tls_auth_clients = yes" || no "tls yes check: $(cat "$D/cc")"
printf '[server]\ntls_cert_file = %s\ntls_auth_clients = maybe\n' "$D/srv.pem" >"$D/c3"
"$B/bin/ipuofd" --config "$D/c3" --check-config >"$D/cc" 2>&1
[ $? -eq 78 ] && grep -q "tls_auth_clients = maybe; give no" "$D/cc" && ok "a bad tls_auth_clients is named" ||
    no "bad tls_auth_clients: $(cat "$D/cc")"

echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
