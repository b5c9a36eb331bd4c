/*
 * isa.c — the instruction-set level the simulator's kernels and oneDNN run with (the
 * contract: hot.h): read from IPUOF_SIM_ISA and the CPU once per process, at first use.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <oneapi/dnnl/dnnl.h>

#include "hot.h"
#include "sim_int.h"

atomic_int sim_isa_now;

static pthread_once_t fix_once = PTHREAD_ONCE_INIT;
static struct {
    enum sim_isa cpu;       /* the CPU's best */
    enum sim_isa cap;       /* IPUOF_SIM_ISA's level, 0 when unset or not a level */
    char bad[48];           /* IPUOF_SIM_ISA's value when it is not a level ("" if fine) */
    int dnnl_rc;            /* dnnl_set_max_cpu_isa's status when a cap was given */
} isa;

static const char *const names[] = { [SIM_ISA_BASELINE] = "baseline",
                                     [SIM_ISA_AVX2] = "avx2",
                                     [SIM_ISA_AVX512] = "avx512" };

const char *
sim_isa_name(enum sim_isa level)
{
    return level >= SIM_ISA_BASELINE && level <= SIM_ISA_AVX512 ? names[level] : "?";
}

enum sim_isa
sim_isa_cpu_best(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return SIM_ISA_AVX512;
    if (__builtin_cpu_supports("avx2"))
        return SIM_ISA_AVX2;
#endif
    return SIM_ISA_BASELINE;
}

#if SIM_ISA_DISPATCH
/* A dispatcher as SIM_HOT_WIDE_FN makes, over copies that say which they are. */
static void probe_avx512(int *l) { *l = SIM_ISA_AVX512; }
static void probe_avx2(int *l) { *l = SIM_ISA_AVX2; }
static void probe_base(int *l) { *l = SIM_ISA_BASELINE; }
#endif

int
sim_isa_probe(void)
{
    int l = 0;

#if SIM_ISA_DISPATCH
    SIM_ISA_CALL_WIDE_(probe, (&l));
#endif
    return l;
}

int
sim_isa_dispatches(void)
{
    return SIM_ISA_DISPATCH;
}

/* Reads IPUOF_SIM_ISA and the CPU; caps oneDNN when a level was given. */
static void
fix(void)
{
    const char *v = getenv("IPUOF_SIM_ISA");
    enum sim_isa level;

    isa.cpu = sim_isa_cpu_best();
    if (v != NULL && *v != '\0') {
        for (int l = SIM_ISA_BASELINE; l <= SIM_ISA_AVX512; l++)
            if (strcasecmp(v, names[l]) == 0)
                isa.cap = (enum sim_isa)l;
        if (isa.cap == 0)
            snprintf(isa.bad, sizeof(isa.bad), "%s", v);
    }
    level = isa.cap != 0 && isa.cap < isa.cpu ? isa.cap : isa.cpu;
    if (isa.cap != 0) {
        /* before oneDNN's first use: conv_dnnl.c fixes the level before its engine */
        static const dnnl_cpu_isa_t dnnl_isa[] = {
            [SIM_ISA_BASELINE] = dnnl_cpu_isa_sse41,
            [SIM_ISA_AVX2] = dnnl_cpu_isa_avx2,
            [SIM_ISA_AVX512] = dnnl_cpu_isa_avx512_core,
        };
        isa.dnnl_rc = (int)dnnl_set_max_cpu_isa(dnnl_isa[level]);
    }
    atomic_store_explicit(&sim_isa_now, (int)level, memory_order_release);
}

enum sim_isa
sim_isa_fix(void)
{
    pthread_once(&fix_once, fix);
    return (enum sim_isa)atomic_load_explicit(&sim_isa_now, memory_order_relaxed);
}

enum sim_isa
sim_isa_current(void)
{
    return sim_isa_fix();
}

int
sim_isa_check(struct sim_err *err)
{
    sim_isa_fix();
    if (isa.bad[0] != '\0')
        return sim_err_set(err, IPUOF_E_INVAL,
                           "IPUOF_SIM_ISA=%s is not an instruction-set level: use baseline, "
                           "avx2 or avx512 (or leave it unset for this CPU's best, %s)",
                           isa.bad, sim_isa_name(isa.cpu));
    return 0;
}

const char *
sim_isa_describe(char *buf, size_t n)
{
    enum sim_isa l = sim_isa_fix();
    const char *kern = SIM_ISA_DISPATCH ? "" : "; this build's kernels have one copy: the "
                                               "level caps only oneDNN";

    if (isa.bad[0] != '\0')
        snprintf(buf, n, "%s (IPUOF_SIM_ISA=%s is not a level: this CPU's best%s)",
                 sim_isa_name(l), isa.bad, kern);
    else if (isa.cap == 0)
        snprintf(buf, n, "%s (this CPU's best%s)", sim_isa_name(l), kern);
    else if (isa.cap > isa.cpu)
        snprintf(buf, n, "%s (IPUOF_SIM_ISA=%s is above this CPU's best: using %s%s)",
                 sim_isa_name(l), sim_isa_name(isa.cap), sim_isa_name(l), kern);
    else
        snprintf(buf, n, "%s (IPUOF_SIM_ISA=%s; this CPU has %s%s%s)", sim_isa_name(l),
                 sim_isa_name(isa.cap), sim_isa_name(isa.cpu),
                 isa.dnnl_rc != (int)dnnl_success ? "; oneDNN could not be capped" : "",
                 kern);
    return buf;
}
