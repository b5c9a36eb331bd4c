/*
 * cost.c — the simulated clock: the rates an IPU's work is charged at, and the figures and
 * trace of the last run. The rates default to the GC200's published figures (Graphcore,
 * "IPU-M2000 / GC200 datasheet"): 62.5 TFLOPS FP32 peak, 47.5 TB/s on-chip memory
 * bandwidth, 8 TB/s IPU-Exchange, 320 GB/s IPU-Links per IPU, PCIe Gen4 x16 64 GB/s to the
 * host. The executor charges steps at these rates; this file holds the defaults and the
 * accessors.
 */
#include "exe.h"

void
sim_cost_cfg_init(struct sim_cost_cfg *c)
{
    c->flops_per_s = 62.5e12;
    c->mem_bytes_per_s = 47.5e12;
    c->exchange_bytes_per_s = 8e12;
    c->link_bytes_per_s = 320e9;
    c->host_bytes_per_s = 64e9;
    c->sync_s = 1e-6;
    c->efficiency = 0.25;
}

int
sim_exe_cost(const struct sim_exe *e, struct sim_cost_report *rep)
{
    (void)e;
    (void)rep;
    return IPUOF_E_UNSUPPORTED;
}

int
sim_exe_trace_json(const struct sim_exe *e, char **json, size_t *len, struct sim_err *err)
{
    (void)e;
    *json = NULL;
    *len = 0;
    return sim_err_set(err, IPUOF_E_UNSUPPORTED, "execution traces are not recorded yet");
}
