#!/usr/bin/python3
"""How much of the simulator's IPU threads' CPU time runs inside the host pool's jobs
(bench/README.md, "Training in process"): the part a second core can share, and Amdahl's
bound it puts on a pool of 2. Reads `perf script -F tid,ip,sym` output of a run recorded
with DWARF call graphs, e.g.

  IPUOF_SIM_THREADS=2 perf record --call-graph dwarf,32768 -o t.perf build/bench/ipuof-train 2
  perf script -i t.perf -F tid,ip,sym > t.txt
  /usr/bin/python3 bench/pool_share.py t.txt

A sample is an IPU thread's when its stack holds ipu_job, inside a pool job when it also
holds run_pieces (sim/kernels/pool.c: the caller's and the workers' share of a split
op); the rest of an IPU thread's samples are serial, listed by the innermost function
under the step. Works on CPU-clock samples, which load moves little.
"""
import collections
import sys

STEP = ('ipu_job', 'run_step', 'bwd_step', 'fwd_step', 'run_seg', 'sim_exec_node_forward',
        'sim_exec_node_backward', 'worker', 'start_thread', 'clone3')


def samples(path):
    """[(tid, [frames innermost first])] of a perf script file."""
    out, cur = [], None
    with open(path) as f:
        for line in f:
            if not line.strip():
                if cur:
                    out.append(cur)
                cur = None
            elif not line.startswith((' ', '\t')):
                cur = (line.split()[0], [])
            elif cur is not None:
                parts = line.split()
                cur[1].append(parts[1] if len(parts) > 1 else '?')
    if cur:
        out.append(cur)
    return out


def main(paths):
    if not paths:
        sys.exit("usage: pool_share.py PERF_SCRIPT.txt... (see the header)")
    for p in paths:
        s = samples(p)
        ipu = [x for x in s if 'ipu_job' in x[1]]
        if not ipu:
            sys.exit("%s: no sample has ipu_job in its stack (recorded with --call-graph dwarf?)" % p)
        shared = [x for x in ipu if 'run_pieces' in x[1]]
        workers = [x for x in s if 'worker_main' in x[1]]
        serial = collections.Counter()
        for tid, frames in ipu:
            if 'run_pieces' in frames:
                continue
            key = None
            for fr in frames:
                if fr in STEP:
                    break
                if not fr.startswith(('0x', '[unknown]')):
                    key = fr
            serial[key] += 1
        f = len(shared) / len(ipu)
        print("%s: IPU threads %d samples, %.1f %% inside pool jobs (Amdahl on 2 threads: %.2fx);"
              " pool workers %d samples, %d in pieces" %
              (p, len(ipu), 100 * f, 1 / ((1 - f) + f / 2), len(workers),
               sum(1 for x in workers if 'run_pieces' in x[1])))
        print("  serial: " + ", ".join("%s %d" % kv for kv in serial.most_common(12)))


if __name__ == "__main__":
    main(sys.argv[1:])
