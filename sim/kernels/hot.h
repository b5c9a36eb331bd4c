/*
 * hot.h — the simulator's hot kernels and the instruction set they run with.
 *
 * A hot kernel is a function whose inner loops are the simulator's time: it is compiled
 * with the loop vectorizer's dynamic cost model (SIM_HOT_OPT: the -O2 default refuses loops
 * that need a remainder or an alias check, which is nearly every kernel loop) and, on
 * x86-64 with GCC, once per instruction-set level it can use, one copy being picked at each
 * call by the level in use.
 *
 * The contract, in one place:
 * - Levels (enum sim_isa, sim.h): baseline (x86-64: SSE2), avx2, avx512 (AVX-512F).
 * - The level in use is the CPU's best, capped by IPUOF_SIM_ISA=baseline|avx2|avx512 when
 *   set; a cap above what the CPU has gives the CPU's best (sim_isa_describe says so). It is
 *   fixed at the first use in the process (a kernel call, a compile, sim_isa_check) and never
 *   changes after: setting the variable later has no effect. A value that is not a level is
 *   refused by sim_isa_check and sim_compile; kernels called before either (unit tests
 *   calling sim_act_range) use the CPU's best.
 * - SIM_HOT_FN(name, (params), (args)) { body } defines `static void name(params)`: the body
 *   compiled for baseline and for AVX2, name() calling the one the level allows. args are
 *   the parameters' names, in order. SIM_HOT_WIDE_FN adds an AVX-512 copy of the same
 *   body. A kernel written with GCC's vector types wants a vector of each level's width
 *   instead (a 16-float vector compiled for AVX2 becomes per-lane scalar code where it
 *   converts or compares): act.c's Sigmoid/SiLU has a copy per level by hand, 4, 8 and 16
 *   floats wide, dispatched on sim_isa_level() as these macros do.
 * - oneDNN (conv_dnnl*.c) is capped at the same level through dnnl_set_max_cpu_isa before
 *   its engine is made (baseline: SSE4.1, oneDNN's lowest); with IPUOF_SIM_ISA unset it
 *   chooses for itself (ONEDNN_MAX_CPU_ISA is honoured then). OpenBLAS is not capped: it
 *   picks its kernels by the CPU (OPENBLAS_CORETYPE).
 * - Every copy does the same float operations in the same order (floating-point contraction
 *   stays off in ISO C mode; a float sum the vectorizer cannot reorder), so a kernel's
 *   results are the same bits at every level; tests run under each level to hold that.
 * - Elsewhere (clang, sanitizer builds, other CPUs) a hot kernel is one plain function and
 *   IPUOF_SIM_ISA caps only oneDNN (sim_isa_dispatches() is false).
 * errno is not set by math calls in these functions (sqrtf becomes one instruction; results
 * are unchanged: IEEE square roots are exact).
 */
#ifndef SIM_HOT_H
#define SIM_HOT_H

#include <stdatomic.h>

#include "sim.h"

#define SIM_HOT_OPT optimize("tree-vectorize", "vect-cost-model=dynamic", "no-math-errno")

/* The level in use, 0 until it is fixed (isa.c). */
extern atomic_int sim_isa_now;

/* Fixes the level in use (once, thread-safe) and returns it. */
enum sim_isa sim_isa_fix(void);

/* The level of the copy a SIM_HOT_WIDE_FN dispatcher calls now (for tests; 0 in builds
 * without copies). */
int sim_isa_probe(void);

/* The level the kernels run with: one relaxed load once fixed. */
static inline enum sim_isa
sim_isa_level(void)
{
    int l = atomic_load_explicit(&sim_isa_now, memory_order_relaxed);

    return l != 0 ? (enum sim_isa)l : sim_isa_fix();
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define SIM_ISA_DISPATCH 1
#define SIM_HOT_BODY_ static inline __attribute__((always_inline, SIM_HOT_OPT)) void
#define SIM_HOT_AT_(t) static __attribute__((noinline, SIM_HOT_OPT, target(t))) void
#define SIM_HOT_BASE_ static __attribute__((noinline, SIM_HOT_OPT)) void

/* Calls name##_avx2 or name##_base, or also name##_avx512 (WIDE), with args by the level. */
#define SIM_ISA_CALL_(name, args)                                                          \
    do {                                                                                   \
        if (sim_isa_level() >= SIM_ISA_AVX2)                                               \
            name##_avx2 args;                                                              \
        else                                                                               \
            name##_base args;                                                              \
    } while (0)
#define SIM_ISA_CALL_WIDE_(name, args)                                                     \
    do {                                                                                   \
        enum sim_isa l_ = sim_isa_level();                                                 \
        if (l_ >= SIM_ISA_AVX512)                                                          \
            name##_avx512 args;                                                            \
        else if (l_ >= SIM_ISA_AVX2)                                                       \
            name##_avx2 args;                                                              \
        else                                                                               \
            name##_base args;                                                              \
    } while (0)

#define SIM_HOT_FN(name, params, args)                                                     \
    SIM_HOT_BODY_ name##_body params;                                                      \
    SIM_HOT_AT_("avx2") name##_avx2 params { name##_body args; }                          \
    SIM_HOT_BASE_ name##_base params { name##_body args; }                                 \
    static void name params { SIM_ISA_CALL_(name, args); }                                 \
    SIM_HOT_BODY_ name##_body params

#define SIM_HOT_WIDE_FN(name, params, args)                                                \
    SIM_HOT_BODY_ name##_body params;                                                      \
    SIM_HOT_AT_("avx512f") name##_avx512 params { name##_body args; }                     \
    SIM_HOT_AT_("avx2") name##_avx2 params { name##_body args; }                          \
    SIM_HOT_BASE_ name##_base params { name##_body args; }                                 \
    static void name params { SIM_ISA_CALL_WIDE_(name, args); }                            \
    SIM_HOT_BODY_ name##_body params
#else
#define SIM_ISA_DISPATCH 0
#if defined(__GNUC__) && !defined(__clang__)
#define SIM_HOT_FN(name, params, args) static __attribute__((SIM_HOT_OPT)) void name params
#else
#define SIM_HOT_FN(name, params, args) static void name params
#endif
#define SIM_HOT_WIDE_FN SIM_HOT_FN
#endif

#endif
