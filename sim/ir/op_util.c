/*
 * op_util.c — the helpers the op families' infer functions share: the dtype lists, attribute
 * getters, error formatting, compile-time constant operands, node labels, pooling windows;
 * and the strided copy that Slice and Transpose run.
 * Below every op_*.c file and ops.c (the registry); it uses neither.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

const int sim_dt_float[] = { SIM_DTYPE_FLOAT, 0 };
const int sim_dt_numeric[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_UINT8, SIM_DTYPE_INT8,
                               SIM_DTYPE_INT32, SIM_DTYPE_INT64, 0 };
const int sim_dt_index[] = { SIM_DTYPE_INT32, SIM_DTYPE_INT64, 0 };
const int sim_dt_any[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_UINT8, SIM_DTYPE_INT8,
                           SIM_DTYPE_INT32, SIM_DTYPE_INT64, SIM_DTYPE_BOOL, 0 };

int
sim_infer_fail(struct sim_infer *c, int code, const char *fmt, ...)
{
    char text[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    return sim_err_set(c->err, code, "%s: %s", c->label, text);
}

int
sim_infer_unsupported(struct sim_infer *c, const char *fmt, ...)
{
    char text[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    return sim_err_set(c->err, IPUOF_E_UNSUPPORTED,
                       "%s: unsupported variant: %s. Supported ops: %s", c->label, text,
                       c->supported_ops != NULL ? c->supported_ops : "?");
}

static const struct sim_attr *
attr_typed(struct sim_infer *c, const char *name, int type, int *rc)
{
    const struct sim_attr *a = sim_attr_find(c->mn, name);

    *rc = 0;
    if (a != NULL && a->type != type) {
        *rc = sim_infer_fail(c, IPUOF_E_INVAL, "attribute '%s' has the wrong type (%d, "
                             "expected %d)", name, a->type, type);
        return NULL;
    }
    return a;
}

int
sim_ia_int(struct sim_infer *c, const char *name, int64_t def, int64_t *out)
{
    int rc;
    const struct sim_attr *a = attr_typed(c, name, SIM_ATTR_INT, &rc);

    *out = a != NULL ? a->i : def;
    return rc;
}

int
sim_ia_float(struct sim_infer *c, const char *name, float def, float *out)
{
    int rc;
    const struct sim_attr *a = attr_typed(c, name, SIM_ATTR_FLOAT, &rc);

    *out = a != NULL ? a->f : def;
    return rc;
}

int
sim_ia_str(struct sim_infer *c, const char *name, const char *def, const char **out)
{
    int rc;
    const struct sim_attr *a = attr_typed(c, name, SIM_ATTR_STRING, &rc);

    *out = a != NULL ? a->s : def;
    return rc;
}

int
sim_ia_ints(struct sim_infer *c, const char *name, const int64_t **v, int *n)
{
    int rc;
    const struct sim_attr *a = attr_typed(c, name, SIM_ATTR_INTS, &rc);

    *v = a != NULL ? a->ints : NULL;
    *n = a != NULL ? (int)a->n : -1;
    return rc;
}

int
sim_in_const_ints(struct sim_infer *c, int i, const char *what, int64_t *v, int max, int *n)
{
    const struct sim_tinfo *t = c->in[i];

    if (t->cdata == NULL)
        return sim_infer_fail(c, IPUOF_E_UNSUPPORTED,
                              "input %d (%s) must be known at compile time (an initializer, "
                              "a Constant, computed from shapes, or a frozen graph input), "
                              "but it is only known at run time", i, what);
    if (t->dtype != SIM_DTYPE_INT64 && t->dtype != SIM_DTYPE_INT32)
        return sim_infer_fail(c, IPUOF_E_DTYPE, "input %d (%s) must be int64 or int32, not %s",
                              i, what, sim_dtype_name(t->dtype));
    if (t->shape.rank > 1)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input %d (%s) must be 1-D, not rank %d", i,
                              what, t->shape.rank);
    if (t->numel > max)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input %d (%s) has %lld values, more than %d",
                              i, what, (long long)t->numel, max);
    for (int64_t k = 0; k < t->numel; k++)
        v[k] = sim_get_i64(t->dtype, t->cdata, k);
    *n = (int)t->numel;
    return 0;
}

int
sim_in_dtype(struct sim_infer *c, int i, const int *allowed)
{
    int dt = c->in[i]->dtype;
    char list[128];
    size_t used = 0;

    for (const int *a = allowed; *a != 0; a++)
        if (*a == dt)
            return 0;
    list[0] = '\0';
    for (const int *a = allowed; *a != 0 && used < sizeof(list); a++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
                                 a == allowed ? "" : ", ", sim_dtype_name(*a));
    return sim_infer_fail(c, IPUOF_E_DTYPE, "input %d has dtype %s; supported: %s", i,
                          sim_dtype_name(dt), list);
}

int
sim_set_out(struct sim_infer *c, int i, int dtype, const struct sim_shape *s)
{
    struct sim_tinfo *o = &c->out[i];
    char buf[128];

    o->dtype = dtype;
    o->shape = *s;
    o->cdata = NULL;
    if (!sim_shape_numel(s, &o->numel))
        return sim_infer_fail(c, IPUOF_E_TOO_LARGE, "output %d shape %s has more than %lld "
                              "elements or a negative dim", i, sim_shape_fmt(s, buf, sizeof(buf)),
                              (long long)SIM_MAX_ELEMS);
    return 0;
}

void *
sim_params(struct sim_infer *c, size_t n)
{
    free(c->params);
    c->params = calloc(1, n);
    if (c->params == NULL)
        sim_err_set(c->err, IPUOF_E_NOMEM, "%s: out of memory", c->label);
    return c->params;
}

const struct sim_attr *
sim_attr_find(const struct sim_mnode *n, const char *name)
{
    for (int i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i].name, name) == 0)
            return &n->attr[i];
    return NULL;
}

char *
sim_node_label(const struct sim_model *m, int node, char *buf, size_t n)
{
    const struct sim_mnode *nd = &m->nodes[node];

    if (nd->name[0] != '\0')
        snprintf(buf, n, "node %d '%s' (%s)", node, nd->name, nd->op_type);
    else
        snprintf(buf, n, "node %d (%s)", node, nd->op_type);
    return buf;
}

/* Reads an ints attribute of exactly n entries (or absent: def for each). */
static int
window_attr(struct sim_infer *c, const char *name, int n, int64_t def, int64_t *out)
{
    const int64_t *v;
    int cnt, rc = sim_ia_ints(c, name, &v, &cnt);

    if (rc != 0)
        return rc;
    if (cnt >= 0 && cnt != n)
        return sim_infer_fail(c, IPUOF_E_INVAL, "attribute '%s' has %d values, expected %d",
                              name, cnt, n);
    for (int i = 0; i < n; i++)
        out[i] = cnt >= 0 ? v[i] : def;
    return 0;
}

int
sim_window_infer(struct sim_infer *c, int nsp, const int64_t *in, const int64_t *k,
                 bool ceil_mode, bool allow_dilations, struct sim_window *w)
{
    const char *auto_pad;
    int64_t pads[6];
    int rc;

    memset(w, 0, sizeof(*w));
    w->nsp = nsp;
    rc = sim_ia_str(c, "auto_pad", "NOTSET", &auto_pad);
    if (rc == 0)
        rc = window_attr(c, "strides", nsp, 1, w->s);
    if (rc == 0)
        rc = window_attr(c, "dilations", nsp, 1, w->d);
    if (rc == 0)
        rc = window_attr(c, "pads", 2 * nsp, 0, pads);
    if (rc != 0)
        return rc;
    for (int i = 0; i < nsp; i++) {
        int64_t span, total, num;
        w->in[i] = in[i];
        w->k[i] = k[i];
        if (k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || pads[i] < 0 || pads[nsp + i] < 0)
            return sim_infer_fail(c, IPUOF_E_INVAL, "kernel, strides and dilations must be "
                                  ">= 1 and pads >= 0 (spatial dim %d)", i);
        if (k[i] > (1 << 20) || w->s[i] > (1 << 20) || w->d[i] > (1 << 20) ||
            pads[i] > (1 << 20) || pads[nsp + i] > (1 << 20))
            return sim_infer_fail(c, IPUOF_E_TOO_LARGE, "window attributes over 2^20");
        if (!allow_dilations && w->d[i] != 1)
            return sim_infer_unsupported(c, "dilations other than 1");
        span = (k[i] - 1) * w->d[i] + 1;
        if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
            w->out[i] = (in[i] + w->s[i] - 1) / w->s[i];
            total = (w->out[i] - 1) * w->s[i] + span - in[i];
            if (total < 0)
                total = 0;
            w->pb[i] = auto_pad[5] == 'U' ? total / 2 : total - total / 2;
            w->pe[i] = total - w->pb[i];
            continue;
        }
        if (strcmp(auto_pad, "VALID") == 0) {
            w->pb[i] = w->pe[i] = 0;
        } else if (strcmp(auto_pad, "NOTSET") == 0) {
            w->pb[i] = pads[i];
            w->pe[i] = pads[nsp + i];
        } else {
            return sim_infer_fail(c, IPUOF_E_INVAL, "auto_pad '%s' is not one of NOTSET, "
                                  "SAME_UPPER, SAME_LOWER, VALID", auto_pad);
        }
        num = in[i] + w->pb[i] + w->pe[i] - span;
        if (num < 0)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "the window (%lld wide) is larger than "
                                  "the padded input (%lld) in spatial dim %d", (long long)span,
                                  (long long)(in[i] + w->pb[i] + w->pe[i]), i);
        w->out[i] = (ceil_mode ? (num + w->s[i] - 1) / w->s[i] : num / w->s[i]) + 1;
        if (ceil_mode && (w->out[i] - 1) * w->s[i] >= in[i] + w->pb[i])
            w->out[i]--;
    }
    return 0;
}

/* Elements of the dense side of a strided walk: the product of dims[0..rank). */
static inline int64_t
strided_numel(int rank, const int64_t *dims)
{
    int64_t n = 1;

    for (int d = 0; d < rank; d++)
        n *= dims[d];
    return n;
}

/*
 * The walk sim_strided_copy and sim_strided_add_f32 share: the source offset of the next
 * row (the dims before `last`, row-major, counted in idx) after the one at off.
 */
static inline int64_t
strided_next(int64_t *idx, const int64_t *dims, const int64_t *str, int last, int64_t off)
{
    for (int d = last - 1; d >= 0; d--) {
        idx[d]++;
        off += str[d];
        if (idx[d] < dims[d])
            break;
        off -= str[d] * dims[d];
        idx[d] = 0;
    }
    return off;
}

void
sim_strided_copy(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
                 const int64_t *str, int64_t off)
{
    const char *x = src;
    char *y = dst;
    int64_t idx[SIM_MAX_RANK] = { 0 }, n = strided_numel(rank, dims);
    int last = rank - 1;

    if (n == 0)
        return;
    if (rank == 0) {
        memcpy(y, x + off * (int64_t)es, es);
        return;
    }
    for (int64_t o = 0; o < n; o += dims[last]) {
        int64_t s = str[last];

        if (s == 1) {
            memcpy(y + o * (int64_t)es, x + off * (int64_t)es, (size_t)dims[last] * es);
        } else if (es == 4) { /* bits, not floats: every 4-byte dtype copies the same */
            const uint32_t *xw = (const uint32_t *)x + off;
            uint32_t *yw = (uint32_t *)y + o;
            for (int64_t i = 0; i < dims[last]; i++)
                yw[i] = xw[i * s];
        } else {
            for (int64_t i = 0; i < dims[last]; i++)
                memcpy(y + (o + i) * (int64_t)es, x + (off + i * s) * (int64_t)es, es);
        }
        off = strided_next(idx, dims, str, last, off);
    }
}

void
sim_strided_add_f32(float *dst, const float *src, int rank, const int64_t *dims,
                    const int64_t *str, int64_t off)
{
    int64_t idx[SIM_MAX_RANK] = { 0 }, n = strided_numel(rank, dims);
    int last = rank - 1;

    if (n == 0)
        return;
    if (rank == 0) {
        dst[off] += src[0];
        return;
    }
    for (int64_t o = 0; o < n; o += dims[last]) {
        int64_t s = str[last];

        for (int64_t i = 0; i < dims[last]; i++)
            dst[off + i * s] += src[o + i];
        off = strided_next(idx, dims, str, last, off);
    }
}
