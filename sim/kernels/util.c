/*
 * util.c — small helpers for the whole library (error formatting is err.c's): dtype tables, shape
 * arithmetic (element counts checked against SIM_MAX_ELEMS without overflow, numpy
 * broadcasting), typed element access and a string map.
 *
 * No op semantics and no protobuf here.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "half.h"
#include "sim_int.h"

bool
sim_dtype_ok(int dtype)
{
    switch (dtype) {
    case SIM_DTYPE_FLOAT: case SIM_DTYPE_UINT8: case SIM_DTYPE_INT8:
    case SIM_DTYPE_INT32: case SIM_DTYPE_INT64: case SIM_DTYPE_BOOL:
    case SIM_DTYPE_FLOAT16:
        return true;
    default:
        return false;
    }
}

size_t
sim_dtype_size(int dtype)
{
    switch (dtype) {
    case SIM_DTYPE_FLOAT: return 4;
    case SIM_DTYPE_UINT8: return 1;
    case SIM_DTYPE_INT8: return 1;
    case SIM_DTYPE_INT32: return 4;
    case SIM_DTYPE_INT64: return 8;
    case SIM_DTYPE_BOOL: return 1;
    case SIM_DTYPE_FLOAT16: return 2;
    default: return 0;
    }
}

const char *
sim_onnx_dtype_name(int dtype)
{
    static const char *const names[] = {
        "undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64",
        "string", "bool", "float16", "double", "uint32", "uint64", "complex64",
        "complex128", "bfloat16"
    };
    if (dtype >= 0 && dtype < (int)(sizeof(names) / sizeof(names[0])))
        return names[dtype];
    return "unknown";
}

const char *
sim_dtype_name(int dtype)
{
    return sim_dtype_ok(dtype) ? sim_onnx_dtype_name(dtype) : "unsupported";
}

bool
sim_shape_numel(const struct sim_shape *s, int64_t *n)
{
    uint64_t nonzero = 1;
    bool empty = false;

    if (s->rank < 0 || s->rank > SIM_MAX_RANK)
        return false;
    /* The product of the non-zero dims is bounded too, so that any partial product of a
     * validated shape (the spans ops compute) fits in int64_t even when a dim is 0. */
    for (int i = 0; i < s->rank; i++) {
        if (s->d[i] < 0)
            return false;
        if (s->d[i] == 0) {
            empty = true;
            continue;
        }
        if (!sim_mul_ok(nonzero, (uint64_t)s->d[i], &nonzero) ||
            nonzero > (uint64_t)SIM_MAX_ELEMS)
            return false;
    }
    *n = empty ? 0 : (int64_t)nonzero;
    return true;
}

int64_t
sim_shape_count(const struct sim_shape *s)
{
    return sim_shape_span(s, 0, s->rank);
}

int64_t
sim_shape_span(const struct sim_shape *s, int from, int to)
{
    int64_t n = 1;
    for (int i = from; i < to; i++)
        n *= s->d[i];
    return n;
}

bool
sim_shape_eq(const struct sim_shape *a, const struct sim_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i] != b->d[i])
            return false;
    return true;
}

char *
sim_shape_fmt(const struct sim_shape *s, char *buf, size_t n)
{
    size_t used = 0;

    if (n == 0)
        return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < s->rank && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld",
                                 (long long)s->d[i]);
    if (used < n)
        snprintf(buf + used, n - used, "]");
    return buf;
}

bool
sim_shape_broadcast(const struct sim_shape *a, const struct sim_shape *b,
                    struct sim_shape *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    struct sim_shape o;

    o.rank = r;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da == db || db == 1)
            o.d[i] = da;
        else if (da == 1)
            o.d[i] = db;
        else
            return false;
    }
    *out = o;
    return true;
}

bool
sim_axis(int64_t axis, int rank, int *out)
{
    if (axis < -(int64_t)rank || axis >= rank)
        return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

double
sim_get_f64(int dtype, const void *data, int64_t i)
{
    switch (dtype) {
    case SIM_DTYPE_FLOAT: return ((const float *)data)[i];
    case SIM_DTYPE_UINT8: return ((const uint8_t *)data)[i];
    case SIM_DTYPE_INT8: return ((const int8_t *)data)[i];
    case SIM_DTYPE_INT32: return ((const int32_t *)data)[i];
    case SIM_DTYPE_INT64: return (double)((const int64_t *)data)[i];
    case SIM_DTYPE_BOOL: return ((const uint8_t *)data)[i] != 0;
    case SIM_DTYPE_FLOAT16: return sim_half_to_float(((const uint16_t *)data)[i]);
    default: return 0.0;
    }
}

int64_t
sim_get_i64(int dtype, const void *data, int64_t i)
{
    switch (dtype) {
    case SIM_DTYPE_FLOAT: {
        float f = ((const float *)data)[i];
        if (!(f >= -9.2e18f && f <= 9.2e18f))
            return f > 0 ? INT64_MAX : (f < 0 ? INT64_MIN : 0);
        return (int64_t)f;
    }
    case SIM_DTYPE_UINT8: return ((const uint8_t *)data)[i];
    case SIM_DTYPE_INT8: return ((const int8_t *)data)[i];
    case SIM_DTYPE_INT32: return ((const int32_t *)data)[i];
    case SIM_DTYPE_INT64: return ((const int64_t *)data)[i];
    case SIM_DTYPE_BOOL: return ((const uint8_t *)data)[i] != 0;
    case SIM_DTYPE_FLOAT16: {
        float f = sim_half_to_float(((const uint16_t *)data)[i]);
        if (!(f >= -9.2e18f && f <= 9.2e18f))
            return f > 0 ? INT64_MAX : (f < 0 ? INT64_MIN : 0);
        return (int64_t)f;
    }
    default: return 0;
    }
}

/* Float to integer conversion that never invokes undefined behaviour: NaN gives 0 and
 * out-of-range values saturate. */
static int64_t
sat_i64(double v, double lo, double hi)
{
    if (v != v)
        return 0;
    if (v <= lo)
        return (int64_t)lo;
    if (v >= hi)
        return (int64_t)hi;
    return (int64_t)v;
}

void
sim_put_f64(int dtype, void *data, int64_t i, double v)
{
    switch (dtype) {
    case SIM_DTYPE_FLOAT: ((float *)data)[i] = (float)v; break;
    case SIM_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)sat_i64(v, 0, 255); break;
    case SIM_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)sat_i64(v, -128, 127); break;
    case SIM_DTYPE_INT32:
        ((int32_t *)data)[i] = (int32_t)sat_i64(v, -2147483648.0, 2147483647.0);
        break;
    case SIM_DTYPE_INT64:
        ((int64_t *)data)[i] = sat_i64(v, -9223372036854775808.0, 9223372036854774784.0);
        break;
    case SIM_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0.0; break;
    case SIM_DTYPE_FLOAT16: ((uint16_t *)data)[i] = sim_half_from_float((float)v); break;
    default: break;
    }
}

void
sim_put_i64(int dtype, void *data, int64_t i, int64_t v)
{
    switch (dtype) {
    case SIM_DTYPE_FLOAT: ((float *)data)[i] = (float)v; break;
    case SIM_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
    case SIM_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
    case SIM_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
    case SIM_DTYPE_INT64: ((int64_t *)data)[i] = v; break;
    case SIM_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; break;
    case SIM_DTYPE_FLOAT16: ((uint16_t *)data)[i] = sim_half_from_float((float)v); break;
    default: break;
    }
}

double
sim_now_s(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *
sim_aligned_alloc(size_t n)
{
    void *p = NULL;
    size_t rounded = (n + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;

    if (rounded < n)
        return NULL;
    if (rounded == 0)
        rounded = SIM_ALIGN;
    if (posix_memalign(&p, SIM_ALIGN, rounded) != 0)
        return NULL;
    return p;
}

void *
sim_zeroed_alloc(size_t n)
{
    void *p = mmap(NULL, n > 0 ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);

    return p == MAP_FAILED ? NULL : p;
}

void
sim_zeroed_free(void *p, size_t n)
{
    if (p != NULL)
        munmap(p, n > 0 ? n : 1);
}

char *
sim_strdup(const char *s)
{
    return strdup(s != NULL ? s : "");
}

static size_t
str_hash(const char *s)
{
    size_t h = 1469598103934665603ull;
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

bool
sim_strmap_init(struct sim_strmap *m, size_t expected)
{
    size_t cap = 16;

    while (cap < expected * 2 + 1)
        cap *= 2;
    m->cap = cap;
    m->keys = calloc(cap, sizeof(*m->keys));
    m->vals = calloc(cap, sizeof(*m->vals));
    if (m->keys == NULL || m->vals == NULL) {
        sim_strmap_fini(m);
        return false;
    }
    return true;
}

void
sim_strmap_fini(struct sim_strmap *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = 0;
}

bool
sim_strmap_put(struct sim_strmap *m, const char *key, int val)
{
    size_t i = str_hash(key) & (m->cap - 1);

    while (m->keys[i] != NULL) {
        if (strcmp(m->keys[i], key) == 0)
            return false;
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = key;
    m->vals[i] = val;
    return true;
}

int
sim_strmap_get(const struct sim_strmap *m, const char *key)
{
    size_t i;

    if (m->cap == 0)
        return -1;
    i = str_hash(key) & (m->cap - 1);
    while (m->keys[i] != NULL) {
        if (strcmp(m->keys[i], key) == 0)
            return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}
