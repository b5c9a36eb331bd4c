#!/bin/sh
# ipuof-trace on synthetic traces: the tutorial's pipeline (4 IPUs, 8 micro-batches, forward
# and backward per stage) and a few bad inputs. The SVG's structure is checked: one row per
# IPU named after its thread, one rect per span in the class of its kind, F/B labels with
# the micro-batch number counted from 1, spans placed left to right in time, a time axis.
# Usage: sh tests/integ/test_ipuof_trace.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
testd_sh_init trace-test     # no daemon: the directory, the trap and the checks
T="$B/bin/ipuof-trace"

# The synthetic pipeline: stage i runs forward of micro-batch m at step m+i and its backward
# at step m+2N-1-i (steps of 10 us), as the tutorial's figure schedules them.
python3 - "$D/pipe.json" <<'PY'
import json, sys
N, M, step = 4, 8, 10.0
ev = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": i, "args": {"name": "IPU %d" % i}}
      for i in range(N)]
for i in range(N):
    for m in range(M):
        ev.append({"name": "F%d.%d" % (i, m), "ph": "X", "pid": 0, "tid": i,
                   "ts": (m + i) * step, "dur": 4.0, "args": {"stage": i, "mb": m, "kind": "fwd"}})
        ev.append({"name": "B%d.%d" % (i, m), "ph": "X", "pid": 0, "tid": i,
                   "ts": (m + 2 * N - 1 - i) * step + 5, "dur": 4.0,
                   "args": {"stage": i, "mb": m, "kind": "bwd"}})
    ev.append({"name": "weight-update", "ph": "X", "pid": 0, "tid": i,
               "ts": (M + 2 * N) * step, "dur": 3.0, "args": {"kind": "weight-update"}})
ev.append({"name": "exchange", "ph": "X", "pid": 0, "tid": 0, "ts": 4.2, "dur": 0.6,
           "args": {"kind": "exchange"}})
json.dump({"traceEvents": ev}, open(sys.argv[1], "w"))
PY

if "$T" -o "$D/pipe.svg" --title "pipeline \"test\" <4 IPUs>" "$D/pipe.json" 2>"$D/err"; then
    ok "renders the pipeline trace"
else
    not_ok "renders the pipeline trace: $(cat "$D/err")"
fi
if python3 - "$D/pipe.svg" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
rows = root.findall("s:g[@class='row']", ns)
assert len(rows) == 4, "rows: %d" % len(rows)
assert root.find("s:text[@class='title']", ns).text == 'pipeline "test" <4 IPUs>'
for i, g in enumerate(rows):
    assert g.get("data-tid") == str(i)
    assert g.find("s:text[@class='lane-name']", ns).text == "IPU %d" % i
    for kind, letter in (("fwd", "F"), ("bwd", "B")):
        rects = g.findall("s:rect[@class='%s']" % kind, ns)
        assert len(rects) == 8, (i, kind, len(rects))
        mbs = [int(r.get("data-mb")) for r in rects]
        assert sorted(mbs) == list(range(8)), mbs
        assert all(int(r.get("data-stage")) == i for r in rects)
        xs = {int(r.get("data-mb")): float(r.get("x")) for r in rects}
        assert all(xs[m] < xs[m + 1] for m in range(7)), xs
    labels = sorted(t.text for t in g.findall("s:text[@class='mb']", ns))
    want = sorted(["F%d" % m for m in range(1, 9)] + ["B%d" % m for m in range(1, 9)])
    assert labels == want, labels
    assert len(g.findall("s:rect[@class='update']", ns)) == 1
# forward of micro-batch 0 on IPU i starts one step after IPU i-1's: the ramp-up
f0 = [float(g.find("s:rect[@class='fwd'][@data-mb='0']", ns).get("x")) for g in rows]
assert f0 == sorted(f0) and len(set(f0)) == 4, f0
# the backward of a micro-batch runs on the last stage first
b0 = [float(g.find("s:rect[@class='bwd'][@data-mb='0']", ns).get("x")) for g in rows]
assert b0 == sorted(b0, reverse=True), b0
assert len(root.findall("s:g[@class='row']/s:rect[@class='exchange']", ns)) == 1
ticks = root.findall("s:g[@class='axis']/s:text[@class='tick-label']", ns)
assert len(ticks) >= 4 and ticks[0].text.endswith("\u00b5s"), [t.text for t in ticks]
legend = [t.text for t in root.findall("s:g[@class='legend']/s:text", ns)]
assert "forward" in legend and "backward" in legend and "weight update" in legend, legend
PY
then ok "the SVG has 4 IPU rows, 8 F and 8 B spans per row in order, labels F1..F8/B1..B8, the ramp-up, an axis"
else
    not_ok "SVG structure"
fi

# A window: only spans inside it (here the first three steps: F1 on IPUs 0-2, F2 on 0-1, F3 on 0).
"$T" --start 0 --end 29 -o "$D/win.svg" "$D/pipe.json" 2>"$D/err" &&
python3 - "$D/win.svg" <<'PY' && ok "--start/--end keep the spans of the window" || not_ok "--start/--end: $(cat "$D/err")"
import sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
n = len(root.findall("s:g[@class='row']/s:rect[@class='fwd']", ns))
assert n == 6, n
assert len(root.findall("s:g[@class='row']/s:rect[@class='bwd']", ns)) == 0
PY

# Bad input: a clear message and exit status 1; bad usage 64.
printf '{"traceEvents": [ {"ph":"X", "ts": 1, }' > "$D/bad.json"
"$T" "$D/bad.json" >/dev/null 2>"$D/err"; rc=$?
[ $rc -eq 1 ] && grep -q "line 1, column 39: expected a member name" "$D/err" && ok "broken JSON: $(cat "$D/err")" || not_ok "broken JSON ($rc): $(cat "$D/err")"
printf '{"events": []}' > "$D/none.json"
"$T" "$D/none.json" >/dev/null 2>"$D/err"; rc=$?
[ $rc -eq 1 ] && grep -q "traceEvents" "$D/err" && ok "no traceEvents: $(cat "$D/err")" || not_ok "no traceEvents ($rc)"
printf '{"traceEvents": [{"ph":"X","name":"F0.0","tid":0,"ts":"soon","dur":1}]}' > "$D/ts.json"
"$T" "$D/ts.json" >/dev/null 2>"$D/err"; rc=$?
[ $rc -eq 1 ] && grep -q "F0.0" "$D/err" && ok "event without a numeric ts: $(cat "$D/err")" || not_ok "ts ($rc)"
python3 -c 'print("[" * 100 + "]" * 100)' > "$D/deep.json"
"$T" "$D/deep.json" >/dev/null 2>"$D/err"; rc=$?
[ $rc -eq 1 ] && grep -q "nested more than 64 deep" "$D/err" && ok "nesting limit: $(cat "$D/err")" || not_ok "nesting ($rc): $(cat "$D/err")"
"$T" --width 10 "$D/pipe.json" >/dev/null 2>"$D/err"; rc=$?
[ $rc -eq 64 ] && ok "--width 10 refused: $(cat "$D/err")" || not_ok "--width ($rc)"
"$T" --start 500 "$D/pipe.json" >/dev/null 2>"$D/err"; rc=$?
[ $rc -eq 64 ] && grep -q "empty" "$D/err" && ok "an empty window refused" || not_ok "window ($rc)"
# Times so large that adding a tick step no longer changes them: the axis still ends.
printf '{"traceEvents":[{"ph":"X","ts":5e15,"dur":1,"tid":0,"name":"F0.0"}]}' >"$D/late.json"
timeout 20 "$T" -o "$D/late.svg" "$D/late.json" 2>"$D/err"; rc=$?
[ $rc -eq 0 ] && ok "a trace at 5e15 us renders (the axis loop ends)" || not_ok "late trace ($rc)"
"$T" "$D/missing.json" >/dev/null 2>"$D/err"; rc=$?
[ $rc -eq 1 ] && grep -q "cannot open" "$D/err" && ok "a missing file" || not_ok "missing ($rc)"
# -o through a planted symlink (issue 17, defect 6): the link is replaced by the SVG, its
# target keeps its bytes; a drawing that fails leaves neither the output nor a temporary.
printf 'precious' >"$D/victim"
ln -s "$D/victim" "$D/link.svg"
"$T" -o "$D/link.svg" "$D/pipe.json" 2>"$D/err"; rc=$?
if [ $rc -eq 0 ] && [ ! -L "$D/link.svg" ] && grep -q "<svg" "$D/link.svg" &&
    [ "$(cat "$D/victim")" = precious ]; then
    ok "-o replaces a symlink, its target untouched"
else
    not_ok "-o through a symlink ($rc): victim now $(head -c 40 "$D/victim")"
fi
mkdir "$D/fail"
"$T" --start 500 -o "$D/fail/out.svg" "$D/pipe.json" 2>/dev/null
[ -z "$(ls -A "$D/fail")" ] && ok "a failed drawing leaves no file" || not_ok "left: $(ls -A "$D/fail")"
testd_sh_end
