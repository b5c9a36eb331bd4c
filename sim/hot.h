/*
 * hot.h — SIM_HOT marks a kernel's inner-loop function: it is compiled with the loop
 * vectorizer's dynamic cost model (the -O2 default refuses loops that need a remainder or
 * an alias check, which is nearly every kernel loop) and, on x86-64, in two versions, AVX2
 * and the baseline, picked at load time by the CPU (GCC/clang function multi-versioning).
 * Floating-point contraction stays off (ISO C mode), so both versions round alike except
 * where a vectorized sum is reordered.
 */
#ifndef SIM_HOT_H
#define SIM_HOT_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define SIM_HOT __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"), \
                               target_clones("avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define SIM_HOT __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define SIM_HOT
#endif

#endif
