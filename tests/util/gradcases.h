/*
 * gradcases.h — the gradient-check cases of tests/unit/test_sim_train_grad.c, one table per
 * op family (gradcases_math.c, gradcases_layers.c, gradcases_shape.c), and what their
 * builders share: the weights a case declares and the generator that fills them.
 *
 * A builder adds nodes computing "y" to b; every float initializer it declares with
 * gc_param (or gc_param_vals) is a trainable weight whose gradient the harness checks. The
 * values come from one xorshift generator that gc_reset restarts, so a case built twice
 * with one seed is built the same.
 */
#ifndef IPUOF_TEST_GRADCASES_H
#define IPUOF_TEST_GRADCASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define GC_MAX_PARAMS 8
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }

/* Value distributions for weights. */
enum dist {
    D_ANY,          /* uniform in [-1, 1] */
    D_POS,          /* uniform in [0.5, 1.5] */
    D_AWAY,         /* |x| in [0.2, 1], random sign: away from kinks at 0 */
    D_DISTINCT      /* a shuffled ramp with steps of 0.05: a unique maximum per window */
};

struct gcase {
    const char *op;             /* the op whose gradient rule the case checks */
    const char *what;
    void (*build)(struct sim_ob *b);
    float eps, tol;
};

/* The three tables and their lengths. */
extern const struct gcase gradcases_math[], gradcases_layers[], gradcases_shape[];
extern const size_t gradcases_math_n, gradcases_layers_n, gradcases_shape_n;

/* Restarts the generator at seed and forgets the declared weights (before a build). */
void gc_reset(uint64_t seed);

/* Whether the builds that follow feed each declared weight to the op through an Identity
 * (weight "NAME.w" -> Identity -> "NAME"), so the op's inputs are activations of the
 * arena, which the memory plan frees before the backward step when the op's gradient rule
 * does not read them (bwd_reads); off: the weights are the op's inputs. */
void gc_set_via_identity(bool on);

/* The weights declared since gc_reset (names borrowed from the builder's literals, or
 * "NAME.w" through an Identity), their count in *n. */
const char *const *gc_params(int *n);

/* A trainable weight of the case: an initializer whose gradient is checked. */
void gc_param(struct sim_ob *b, const char *name, int rank, const int64_t *d, enum dist dist);

/* A trainable weight with the given values (for inputs whose order must be controlled). */
void gc_param_vals(struct sim_ob *b, const char *name, int rank, const int64_t *d,
                   const float *v);

/* A float initializer that is not checked (running statistics, weights of a loss). */
void gc_fconst(struct sim_ob *b, const char *name, int rank, const int64_t *d, enum dist dist);

/* An int64 initializer with values v. */
void gc_ints(struct sim_ob *b, const char *name, int rank, const int64_t *d, const int64_t *v);

#endif /* IPUOF_TEST_GRADCASES_H */
