#!/bin/sh
# /metrics through a real Prometheus (Debian's prometheus package, which tools/deps.sh
# installs): an ipuofd with metrics_listen on an ephemeral loopback port is trained on with
# ipuof-mnist; Prometheus scrapes it every second; the values queried through Prometheus's
# HTTP API match `ipuctl status --json`; `promtool check metrics` passes on the exposition.
# Prometheus missing is a failure, not a skip (run make deps).
# Usage: sh tests/integ/test_metrics.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
testd_sh_init metrics-test
no() { not_ok "$1"; }
DATA=${IPUOF_MNIST_DATA:-/usr/share/datasets/fashion-mnist}

for p in prometheus promtool curl; do
    command -v $p >/dev/null 2>&1 || {
        echo "not ok - $p is not installed: run make deps (tools/deps.sh installs prometheus)"
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
    }
done

printf '[server]\nmetrics_listen = 127.0.0.1:0\n' >"$D/conf"
testd_sh_must_start "$B" "$D" --config "$D/conf" --admin-socket "$D/admin.sock"
S=$IPUOF_SERVER
M=$(sed -n 's|.*serving /metrics on http://\([^/]*\)/metrics.*|\1|p' "$D/log" | head -n 1)
[ -n "$M" ] && ok "ipuofd logs its metrics address ($M)" || no "no metrics address in the log"

# Off unless set: a daemon without metrics_listen opens no HTTP port (its log says nothing).
grep -q "serving /metrics" "$D/log" && ok "metrics_listen set: the listener is up" || no "listener"

curl -sf "http://$M/metrics" >"$D/m0.txt" && ok "GET /metrics answers 200" || no "GET /metrics"
promtool check metrics <"$D/m0.txt" >"$D/lint" 2>&1 &&
    ok "promtool check metrics passes on an idle daemon" || no "promtool: $(head -5 "$D/lint")"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$M/nothing")
[ "$code" = 404 ] && ok "another path is 404" || no "another path gave $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$M/metrics")
[ "$code" = 405 ] && ok "POST /metrics is 405" || no "POST /metrics gave $code"

# Prometheus on a free loopback port, scraping every second.
PP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$D/prom.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ipuofd
    static_configs:
      - targets: ['$M']
EOF
prometheus --config.file="$D/prom.yml" --storage.tsdb.path="$D/tsdb" \
    --web.listen-address="127.0.0.1:$PP" >"$D/prom.log" 2>&1 &
KIDS=$!     # prometheus

# Training (10 optimizer steps), an error (a reset without admin rights), then the values.
"$B/bin/ipuof-mnist" --server "$S" --data "$DATA" --epochs 1 --limit-train 320 \
    --limit-test 80 --batch-size 8 --device-iterations 5 --gradient-accumulation 2 \
    --quiet >"$D/mnist.out" 2>&1
rc=$?
[ $rc -eq 0 ] && ok "ipuof-mnist trains on the daemon" || no "ipuof-mnist exit $rc: $(tail -c 300 "$D/mnist.out")"
"$B/bin/ipuctl" --server "$S" reset --all >/dev/null 2>&1
[ $? -ne 0 ] && ok "a reset without admin rights is refused (an IPUOF_E_AUTH error)" || no "reset"
curl -sf "http://$M/metrics" >"$D/m1.txt"
promtool check metrics <"$D/m1.txt" >"$D/lint" 2>&1 &&
    ok "promtool check metrics passes after training" || no "promtool: $(head -5 "$D/lint")"
"$B/bin/ipuctl" --server "$S" status --json >"$D/status.json" || no "ipuctl status --json"

python3 - "$PP" "$D/status.json" <<'PY' && ok "Prometheus's values match ipuctl status --json and the training" || no "Prometheus's values"
import json, sys, time, urllib.parse, urllib.request
port, st = sys.argv[1], json.load(open(sys.argv[2]))

def q(expr):
    url = "http://127.0.0.1:%s/api/v1/query?query=%s" % (port, urllib.parse.quote(expr))
    with urllib.request.urlopen(url, timeout=5) as r:
        d = json.load(r)
    assert d["status"] == "success", d
    return {tuple(sorted((k, v) for k, v in s["metric"].items() if k not in ("job", "instance"))):
            float(s["value"][1]) for s in d["data"]["result"]}

def one(expr):
    r = q(expr)
    assert len(r) == 1, (expr, r)
    return list(r.values())[0]

def checks():
    bad = []
    def eq(what, got, want):
        if got != want:
            bad.append("%s: Prometheus %r, status %r" % (what, got, want))
    if one('up{job="ipuofd"}') != 1:
        return ["target not up yet"]
    for x in st["ipus"]:
        i = str(x["id"])
        eq("ipu %s steps" % i, one('ipuofd_ipu_steps_total{ipu="%s"}' % i), x["steps_run"])
        eq("ipu %s memory used" % i, one('ipuofd_ipu_memory_used_bytes{ipu="%s"}' % i),
           x["memory_used_bytes"])
        eq("ipu %s capacity" % i, one('ipuofd_ipu_memory_capacity_bytes{ipu="%s"}' % i),
           x["memory_capacity_bytes"])
        eq("ipu %s state" % i, one('ipuofd_ipu_state{ipu="%s",state="%s"}' % (i, x["state"])), 1)
    eq("queue", one("ipuofd_attach_queue_length"), st["waiting"])
    eq("cache bytes", one("ipuofd_compile_cache_bytes"), st["cache_bytes"])
    eq("cache limit", one("ipuofd_compile_cache_limit_bytes"), st["cache_budget_bytes"])
    eq("arena bytes", one("ipuofd_compile_cache_arena_bytes"), st["arena_bytes"])
    eq("arena limit", one("ipuofd_compile_cache_arena_limit_bytes"), st["arena_budget_bytes"])
    steps0 = st["ipus"][0]["steps_run"]
    if steps0 <= 0:
        bad.append("status shows no steps on IPU 0")
    runs = one("ipuofd_runs_total")
    eq("run histogram count", one("ipuofd_run_duration_seconds_count"), runs)
    eq("+Inf bucket", one('ipuofd_run_duration_seconds_bucket{le="+Inf"}'), runs)
    if runs < 2:   # 320 samples / (8 x 5 x 2) = 4 training calls, and the test calls
        bad.append("runs_total %r" % runs)
    if not one('ipuofd_ipu_busy_seconds_total{ipu="0",clock="host"}') > 0:
        bad.append("no host busy time on IPU 0")
    if not one('ipuofd_ipu_busy_seconds_total{ipu="0",clock="simulated"}') > 0:
        bad.append("no simulated busy time on IPU 0")
    if one("ipuofd_compiles_total") < 1:
        bad.append("no compile counted")
    if one('ipuofd_errors_total{code="IPUOF_E_AUTH"}') != 1:
        bad.append("IPUOF_E_AUTH errors: %r" % one('ipuofd_errors_total{code="IPUOF_E_AUTH"}'))
    if one('ipuofd_requests_total{request="run"}') < runs:
        bad.append("run requests below runs")
    if one("ipuofd_received_bytes_total") < 320 * 28 * 28 * 4:
        bad.append("received bytes below the 320 images' bytes")
    if not one("ipuofd_sent_bytes_total") > 0:
        bad.append("no bytes sent")
    if one("ipuofd_attach_wait_seconds_count") < 1:
        bad.append("no attach counted")
    if one('ipuofd_connections_accepted_total') < 3:
        bad.append("accepted connections")
    for fam in ("ipuofd_faults_injected_total", "ipuofd_faults_fired_total",
                "ipuofd_pod_collectives_total", "ipuofd_pod_collective_seconds_total",
                'ipuofd_connections{kind="client"}', 'ipuofd_connections{kind="pod"}'):
        one(fam)
    return bad

deadline = time.time() + 60
while True:
    try:
        bad = checks()
    except Exception as e:  # not scraped yet
        bad = [repr(e)]
    if not bad:
        print("# steps on IPU 0: %d; runs %d" % (st["ipus"][0]["steps_run"], one("ipuofd_runs_total")))
        sys.exit(0)
    if time.time() > deadline:
        print("\n".join("# " + b for b in bad))
        sys.exit(1)
    time.sleep(0.5)
PY

testd_sh_end
