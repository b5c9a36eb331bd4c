/*
 * hot.h — SIM_HOT marks a kernel's inner-loop function: it is compiled with the loop
 * vectorizer's dynamic cost model (the -O2 default refuses loops that need a remainder or
 * an alias check, which is nearly every kernel loop) and, on x86-64, in two versions, AVX2
 * and the baseline, picked at load time by the CPU (GCC/clang function multi-versioning).
 * Floating-point contraction stays off (ISO C mode), so both versions round alike except
 * where a vectorized sum is reordered. errno is not set by math calls in these functions
 * (sqrtf becomes one instruction; results are unchanged: IEEE square roots are exact).
 */
#ifndef SIM_HOT_H
#define SIM_HOT_H

#define SIM_HOT_OPT optimize("tree-vectorize", "vect-cost-model=dynamic", "no-math-errno")

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define SIM_HOT __attribute__((SIM_HOT_OPT, target_clones("avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define SIM_HOT __attribute__((SIM_HOT_OPT))
#else
#define SIM_HOT
#endif

#endif
