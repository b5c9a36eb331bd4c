#!/usr/bin/python3
"""The fault soak (issue 22; `make soak-faults`, not part of `make test`): a real ipuofd with
4 IPUs, 4 client processes training a small model with PopTorch's package, each recovering
from whatever it meets as a program would (destroy the model, reset what the daemon's
status says is in error at the level it needs, re-create the model with the weights it
saved, retry the step), and a controller injecting N random faults (seeded: the same kinds,
triggers, IPUs and waits on every run) through `ipuctl fault inject`, at most a few armed at
once. It prints the faults injected and fired, the errors the clients met and recovered
from, the time to recover (from the error to the next step that trained; median, max), and
the daemon's resident memory and open file descriptors before the clients started (after
one warm-up step) and after they ended (all IPUs reset, faults cleared). It exits 1 when a
client did not recover, the daemon died, or the file descriptors did not come back.

daemon-kill is left out (the soak measures one daemon's memory and descriptors; test_faults
and test_faults_more check it). Usage:
    tests/soak/soak_faults.py [--build build] [--faults 1000] [--clients 4] [--seed 1]
"""
import argparse
import copy
import json
import multiprocessing
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

KINDS = ["recoverable:IPU_RESET", "recoverable:LINK_RESET", "recoverable:PARTITION_RESET",
         "recoverable:FULL_RESET", "unrecoverable", "soc-error", "host-sync-timeout", "hang",
         "tile-oom", "stream-oom", "fabric-disconnect"]
TRIGGERS = ["attach", "compile", "load", "weights", "run"]
ARMED_MAX = 8          # faults armed and not fired at once
FAULT_LIFE = "3s"      # --duration: a fault nobody met in time expires (an attach fault
                       # armed while nobody attaches would otherwise wait for ever)


def ipuctl(build, admin, *args):
    return subprocess.run([os.path.join(build, "bin", "ipuctl"), "--admin-socket", admin,
                           *args], capture_output=True, text=True)


def daemon_usage(pid):
    """(VmRSS in KiB, open file descriptors) of process pid."""
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def heal(build, admin):
    """Resets every IPU in error that nobody holds, at the level it needs (what an operator
    or a program's recovery does after reading `ipuctl status`)."""
    r = ipuctl(build, admin, "status", "--json")
    if r.returncode != 0:
        return
    for ipu in json.loads(r.stdout)["ipus"]:
        if ipu.get("state") != "error":
            continue
        rec = ipu.get("recovery")
        err = ipu.get("error") or ""
        if ipu.get("unrecoverable") or rec == "FULL_RESET":
            args = ("--all", "--force")
        elif rec in ("PARTITION_RESET", "LINK_RESET") and "partition '" in err:
            args = ("--partition", err.split("partition '")[1].split("'")[0])
        else:
            args = ("--ipu", str(ipu["id"]))
        ipuctl(build, admin, "reset", *args)


def make_model():
    """A linear classifier of 6 features into 2 classes with its loss."""
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(6, 2)
            self.loss = torch.nn.CrossEntropyLoss()

        def forward(self, x, target):
            y = self.fc(x)
            return y, self.loss(y, target)

    return Model()


def client(idx, build, admin, addr, stop, out):
    """One training program: steps until stop is set, recovering from every error."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.environ["IPUOF_SERVER"] = addr
    os.environ["IPUOF_REQUEST_TIMEOUT_MS"] = "2000"   # its host-sync timeout: ends a hang
    os.environ["IPUOF_CLIENT_LIB"] = os.path.join(build, "lib", "libipuof-client.so")
    import torch
    import poptorch

    torch.manual_seed(idx)
    model = make_model()
    x, t = torch.rand(4, 6), torch.randint(0, 2, (4,))
    saved = copy.deepcopy(model.state_dict())
    pm, steps, errors, recover_ms, failed_since = None, 0, {}, [], None
    deadline = None
    while True:
        if stop.is_set():   # a client in the middle of a recovery finishes it first
            if failed_since is None:
                break
            deadline = deadline or time.monotonic() + 30
            if time.monotonic() > deadline:
                break
        try:
            if pm is None:
                model.load_state_dict(saved)
                pm = poptorch.trainingModel(model, poptorch.Options(),
                                            torch.optim.SGD(model.parameters(), lr=0.01))
            pm(x, t)
            if steps % 10 == 9:
                pm.copyWeightsToDevice()     # a weights write: the 'weights' trigger
            pm.copyWeightsToHost()
            saved = copy.deepcopy(model.state_dict())
            steps += 1
            if failed_since is not None:
                recover_ms.append((time.monotonic() - failed_since) * 1000.0)
                failed_since = None
        except poptorch.Error as e:
            name = type(e).__name__ + (f":{e.recovery_action}"
                                       if isinstance(e, poptorch.RecoverableError) else "")
            errors[name] = errors.get(name, 0) + 1
            if failed_since is None:
                failed_since = time.monotonic()
            if pm is not None:
                try:
                    pm.destroy()
                except poptorch.Error:
                    pass
                pm = None
            heal(build, admin)
            time.sleep(0.01)
    if pm is not None:
        pm.destroy()
    out.put({"client": idx, "steps": steps, "errors": errors, "recover_ms": recover_ms,
             "unrecovered": failed_since is not None})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--faults", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="ipuof-soak-")
    admin = os.path.join(tmp, "admin.sock")
    port_file = os.path.join(tmp, "port")
    conf = os.path.join(tmp, "ipuofd.conf")
    with open(conf, "w") as f:
        f.write(f"[devices]\nipus = {a.clients}\n[log]\nlevel = warn\n")
    log = open(os.path.join(tmp, "log"), "wb")
    d = subprocess.Popen([os.path.join(build, "bin", "ipuofd"), "--config", conf, "--listen",
                          "127.0.0.1:0", "--port-file", port_file, "--foreground",
                          "--admin-socket", admin], stdout=log, stderr=subprocess.STDOUT)
    rc = 1
    try:
        for _ in range(500):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.02)
        addr = "127.0.0.1:" + open(port_file).read().strip()
        # warm-up: one clean step (the executable cache holds the model from now on)
        ctx = multiprocessing.get_context("spawn")
        warm = ctx.Process(target=warm_step, args=(build, addr))
        warm.start()
        warm.join()
        if warm.exitcode != 0:
            raise SystemExit("soak: the warm-up step failed")
        before = daemon_usage(d.pid)
        stop, out = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=client, args=(i, build, admin, addr, stop, out))
                 for i in range(a.clients)]
        t0 = time.monotonic()
        for p in procs:
            p.start()
        rng = random.Random(a.seed)
        injected, fired, by_kind, armed = 0, 0, {}, set()
        while fired < a.faults and d.poll() is None:
            r = ipuctl(build, admin, "fault", "list", "--json")
            listed = json.loads(r.stdout) if r.returncode == 0 else []
            for f in listed:
                if f["state"] != "armed":       # fired or expired: counted, then cleared
                    fired += f["fired"] > 0
                    armed.discard(f["id"])
                    ipuctl(build, admin, "fault", "clear", "--id", str(f["id"]))
            while len(armed) < ARMED_MAX and fired + len(armed) < a.faults:
                kind, at = rng.choice(KINDS), rng.choice(TRIGGERS)
                if kind in ("hang", "tile-oom", "stream-oom") and at == "attach":
                    at = "run"
                args = ["fault", "inject", "--ipu", str(rng.randrange(a.clients)), "--kind",
                        kind, "--at", at, "--duration", FAULT_LIFE]
                if kind == "host-sync-timeout":
                    args += ["--wait", f"{rng.randrange(0, 500)}ms"]
                r = ipuctl(build, admin, *args)
                if r.returncode != 0:
                    raise SystemExit(f"soak: inject failed: {r.stderr}")
                armed.add(int(r.stdout.split("armed fault ")[1].split(":")[0]))
                injected += 1
                by_kind[kind] = by_kind.get(kind, 0) + 1
            time.sleep(0.02)
        stop.set()
        ipuctl(build, admin, "fault", "clear")   # what is still armed would stop a recovery
        results = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(60)
        elapsed = time.monotonic() - t0
        ipuctl(build, admin, "fault", "clear")
        heal(build, admin)
        ipuctl(build, admin, "reset", "--all", "--force")
        time.sleep(0.5)
        after = daemon_usage(d.pid)
        ms = sorted(m for r in results for m in r["recover_ms"])
        errors = {}
        for r in results:
            for k, v in r["errors"].items():
                errors[k] = errors.get(k, 0) + v
        unrecovered = [r["client"] for r in results if r["unrecovered"]]
        print(f"soak-faults: seed {a.seed}, {a.clients} clients, {elapsed:.0f} s")
        print(f"faults injected {injected}, fired {fired} (the rest expired unmet); by kind: "
              + ", ".join(f"{k} {v}" for k, v in sorted(by_kind.items())))
        print(f"client errors {sum(errors.values())}: "
              + ", ".join(f"{k} {v}" for k, v in sorted(errors.items())))
        print(f"recovered {len(ms)} times (from a client's first error to its next step "
              f"that trained); time to recover: median {statistics.median(ms):.0f} ms, max "
              f"{max(ms):.0f} ms" if ms else "recovered 0 times")
        print(f"steps trained {sum(r['steps'] for r in results)}")
        print(f"daemon RSS {before[0]} KiB before, {after[0]} KiB after; "
              f"file descriptors {before[1]} before, {after[1]} after")
        ok = d.poll() is None and not unrecovered and after[1] == before[1]
        if unrecovered:
            print(f"clients that did not recover: {unrecovered}")
        rc = 0 if ok else 1
    finally:
        if d.poll() is None:
            d.send_signal(signal.SIGTERM)
            try:
                d.wait(30)
            except subprocess.TimeoutExpired:
                d.kill()
        print(f"daemon exit status {d.returncode}")
        log.close()
        if rc == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"soak: the daemon's log is kept in {tmp}/log")
    return rc


def warm_step(build, addr):
    """One clean training step, so the executable cache is warm before 'before'."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.environ["IPUOF_SERVER"] = addr
    os.environ["IPUOF_CLIENT_LIB"] = os.path.join(build, "lib", "libipuof-client.so")
    import torch
    import poptorch

    model = make_model()
    pm = poptorch.trainingModel(model, poptorch.Options(),
                                torch.optim.SGD(model.parameters(), lr=0.01))
    pm(torch.rand(4, 6), torch.randint(0, 2, (4,)))
    pm.destroy()


if __name__ == "__main__":
    sys.exit(main())
