/*
 * half.h — IEEE 754 binary16 (float16) conversions: the storage format of the simulator's
 * float16 tensors (SIM_DTYPE_FLOAT16), as the IPU stores half.
 *
 * float16 -> float is exact. float -> float16 rounds to nearest, ties to even; overflow
 * gives +-inf, NaN stays NaN (quiet, sign and top payload bits kept), subnormal halves are
 * produced and read (no flush to zero). The array forms use the CPU's F16C instructions
 * when the simulator's ISA level (hot.h) is avx2 or higher and the CPU has F16C, and a
 * portable bit-level path otherwise; both give the same bits for every input (the
 * conversion is defined exactly), which test_sim_half checks over every half and a sweep
 * of floats at each level.
 */
#ifndef SIM_HALF_H
#define SIM_HALF_H

#include <stdbool.h>
#include <stdint.h>

/* One element, portable. */
float sim_half_to_float(uint16_t h);
uint16_t sim_half_from_float(float f);

/* n elements (src and dst do not overlap), F16C when the level allows it. */
void sim_half_to_float_n(const uint16_t *src, float *dst, int64_t n);
void sim_half_from_float_n(const float *src, uint16_t *dst, int64_t n);

/* Rounds n floats in place to the nearest float16 value (the float they would read back
 * as after storing as half): an op's float32 result stored in a float16 tensor. */
void sim_half_round_n(float *x, int64_t n);

/* Stochastic rounding (PopTorch's Precision.enableStochasticRounding; half_sr.c): f rounds
 * to the float16 above it in magnitude with probability equal to its fraction of the way
 * there (to within 2^-31), else to the one below, so the rounding is unbiased. The draw of
 * element i is a hash of (key, i): counter-based, no state between elements, the same bits
 * at every ISA level and for the same key every time. Exact values (zeros with their sign),
 * NaN and magnitudes past 65504 round as sim_half_from_float does. */
uint16_t sim_half_from_float_sr(float f, uint64_t key, uint64_t i);
void sim_half_from_float_sr_n(const float *src, uint16_t *dst, int64_t n, uint64_t key);
/* x[i] (i < n) rounded in place as sim_half_from_float_sr(x[i], key, i) and read back. */
void sim_half_round_sr_n(float *x, int64_t n, uint64_t key);
/* The key of stream tag under a generator state (a node's draw for a micro-batch, a
 * step's): a 64-bit mix, so nearby states and tags give unrelated keys. */
uint64_t sim_half_sr_key(uint64_t state, uint64_t tag);

/* Whether the array forms use F16C in this process (for tests and logs). */
bool sim_half_uses_f16c(void);

/* The portable array forms, whatever the level (tests compare them with the above). */
void sim_half_to_float_n_portable(const uint16_t *src, float *dst, int64_t n);
void sim_half_from_float_n_portable(const float *src, uint16_t *dst, int64_t n);

#endif /* SIM_HALF_H */
