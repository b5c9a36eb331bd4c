/*
 * sim_int.h — internal helpers shared by every sim/ file: errors, dtypes, shapes with
 * overflow-checked element counts, tensor views and a small string -> index map.
 *
 * Nothing here allocates per step or touches protobuf. Not part of the public API.
 */
#ifndef SIM_SIM_INT_H
#define SIM_SIM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "sim.h"

#if defined(__GNUC__)
#define SIM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SIM_PRINTF(a, b)
#endif

/* Seconds on clock clk (clock_gettime: CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...): the
 * step log's host times (ipus.c) and the in-process benches' (bench/ipuof-train.c,
 * bench/ipuof-cpu.c). */
double sim_now_s(clockid_t clk);

/* Byte alignment of every arena block and every run buffer. */
#define SIM_ALIGN 64

/*
 * Sets err (when not NULL) to code and the formatted sentence; returns code, so callers
 * write `return sim_err_set(err, IPUOF_E_SHAPE, "...")`.
 */
int sim_err_set(struct sim_err *err, int code, const char *fmt, ...) SIM_PRINTF(3, 4);

/* Prefixes err->msg with the formatted text (for adding context on the way up). */
void sim_err_prefix(struct sim_err *err, const char *fmt, ...) SIM_PRINTF(2, 3);

/* 1 when dtype is one of enum sim_dtype. */
bool sim_dtype_ok(int dtype);

/* Name of any ONNX dtype number, supported or not ("double", "float16", ...). */
const char *sim_onnx_dtype_name(int dtype);

/* a * b into *out; returns false on overflow. */
static inline bool
sim_mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* A shape: rank dims, each >= 0. Rank 0 is a scalar (one element). */
struct sim_shape {
    int rank;
    int64_t d[SIM_MAX_RANK];
};

/*
 * Element count of s into *n. Returns false when a dim is negative or the product of the
 * non-zero dims exceeds SIM_MAX_ELEMS (checked without overflow), so every partial product
 * of a shape that passed is safe to compute.
 */
bool sim_shape_numel(const struct sim_shape *s, int64_t *n);

/* Element count of an already validated shape (no checks). */
int64_t sim_shape_count(const struct sim_shape *s);

/* Product of dims [from, to). */
int64_t sim_shape_span(const struct sim_shape *s, int from, int to);

/* Same rank and dims. */
bool sim_shape_eq(const struct sim_shape *a, const struct sim_shape *b);

/* Writes "[2, 3, 4]" (or "[]" for a scalar) into buf, truncating to n bytes. Returns buf. */
char *sim_shape_fmt(const struct sim_shape *s, char *buf, size_t n);

/* ONNX (numpy) multidirectional broadcasting of a and b into *out; false when they do
 * not broadcast. */
bool sim_shape_broadcast(const struct sim_shape *a, const struct sim_shape *b,
                         struct sim_shape *out);

/* Normalizes axis (may be negative) for rank; false when out of [-rank, rank). */
bool sim_axis(int64_t axis, int rank, int *out);

/* A tensor view: dtype, shape and data borrowed from whoever owns the storage. */
struct sim_tensor {
    int dtype;
    struct sim_shape shape;
    int64_t numel;
    void *data;
};

/* Reads element i of a numeric tensor as double / int64 (any supported dtype). */
double sim_get_f64(int dtype, const void *data, int64_t i);
int64_t sim_get_i64(int dtype, const void *data, int64_t i);

/* Stores v into element i of a tensor of dtype, converting as a C cast would (bool: v != 0). */
void sim_put_f64(int dtype, void *data, int64_t i, double v);
void sim_put_i64(int dtype, void *data, int64_t i, int64_t v);

/* Aligned allocation rounded up to SIM_ALIGN; free with free(). NULL on failure or n == 0
 * (n == 0 returns a valid minimal block). */
void *sim_aligned_alloc(size_t n);

/* Zeroed memory of n bytes (page aligned) that takes no host memory until written: an
 * anonymous mapping, so an executable's arenas (one per pipeline slot) cost the host only
 * the pages a run touches (a compile alone touches none). Free with sim_zeroed_free(p, n),
 * the same n. NULL on failure. */
void *sim_zeroed_alloc(size_t n);
void sim_zeroed_free(void *p, size_t n);

/* strdup that treats NULL as "". */
char *sim_strdup(const char *s);

/* Open-addressing map from borrowed strings to indices. */
struct sim_strmap {
    size_t cap;
    const char **keys;
    int *vals;
};

/* Sizes the map for at most `expected` keys (false when out of memory); fini frees it. */
bool sim_strmap_init(struct sim_strmap *m, size_t expected);
void sim_strmap_fini(struct sim_strmap *m);
/* Inserts key -> val; returns false if key is already present (val untouched). */
bool sim_strmap_put(struct sim_strmap *m, const char *key, int val);
/* Value for key or -1. */
int sim_strmap_get(const struct sim_strmap *m, const char *key);

#endif /* SIM_SIM_INT_H */
