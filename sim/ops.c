/*
 * ops.c — the op registry (the family tables gathered in one place, lookup by op_type, the
 * supported-op list) and the helpers infer functions share: attribute getters, error
 * formatting, compile-time constant operands.
 *
 * Op semantics live in the op_*.c family files, not here.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

struct family {
    const struct sim_op *ops;
    const int *count;
};

static const struct family families[] = {
    { sim_ops_elementwise, &sim_ops_elementwise_count },
    { sim_ops_unary, &sim_ops_unary_count },
    { sim_ops_activation, &sim_ops_activation_count },
    { sim_ops_matmul, &sim_ops_matmul_count },
    { sim_ops_conv, &sim_ops_conv_count },
    { sim_ops_pool, &sim_ops_pool_count },
    { sim_ops_reduce, &sim_ops_reduce_count },
    { sim_ops_norm, &sim_ops_norm_count },
    { sim_ops_shape, &sim_ops_shape_count },
    { sim_ops_select, &sim_ops_select_count },
    { sim_ops_loss, &sim_ops_loss_count },
    { sim_ops_logic, &sim_ops_logic_count },
    { sim_ops_pad, &sim_ops_pad_count },
    { sim_ops_gen, &sim_ops_gen_count },
    { sim_ops_split, &sim_ops_split_count },
    /* ConvTranspose, Resize, LSTM and GRU */
    { sim_ops_convt, &sim_ops_convt_count },
    { sim_ops_resize, &sim_ops_resize_count },
    { sim_ops_rnn, &sim_ops_rnn_count },
    /* the ops of PyTorch's layers beyond those: InstanceNormalization, Max Min PRelu Selu
     * Celu Sign Round IsNaN, Tile DepthToSpace SpaceToDepth Trilu, CumSum TopK */
    { sim_ops_instnorm, &sim_ops_instnorm_count },
    { sim_ops_arith, &sim_ops_arith_count },
    { sim_ops_layout, &sim_ops_layout_count },
    { sim_ops_scan, &sim_ops_scan_count },
};

#define N_FAMILIES (sizeof(families) / sizeof(families[0]))

const int sim_dt_float[] = { SIM_DTYPE_FLOAT, 0 };
const int sim_dt_numeric[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_UINT8, SIM_DTYPE_INT8,
                               SIM_DTYPE_INT32, SIM_DTYPE_INT64, 0 };
const int sim_dt_index[] = { SIM_DTYPE_INT32, SIM_DTYPE_INT64, 0 };
const int sim_dt_any[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_UINT8, SIM_DTYPE_INT8,
                           SIM_DTYPE_INT32, SIM_DTYPE_INT64, SIM_DTYPE_BOOL, 0 };

const struct sim_op *
sim_op_find(const char *op_type)
{
    return sim_op_find_in("", op_type);
}

const struct sim_op *
sim_op_find_in(const char *domain, const char *op_type)
{
    bool dflt = domain == NULL || domain[0] == '\0' || strcmp(domain, "ai.onnx") == 0;

    for (size_t f = 0; f < N_FAMILIES; f++)
        for (int i = 0; i < *families[f].count; i++) {
            const struct sim_op *op = &families[f].ops[i];
            if (strcmp(op->name, op_type) != 0)
                continue;
            if (dflt ? op->domain == NULL : op->domain != NULL && strcmp(op->domain, domain) == 0)
                return op;
        }
    return NULL;
}

void
sim_op_foreach(void (*fn)(const struct sim_op *op, void *ud), void *ud)
{
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (int i = 0; i < *families[f].count; i++)
            fn(&families[f].ops[i], ud);
}

static char supported_list[2048], gradient_list[2048];
static pthread_once_t supported_once = PTHREAD_ONCE_INIT, gradient_once = PTHREAD_ONCE_INIT;

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Writes the sorted names of every op (only those with a gradient rule when grad_only) into
 * buf as "A, B, C"; custom-domain ops as domain.op. */
static void
build_list(char *buf, size_t cap, bool grad_only)
{
    static char custom[2][16][64];
    const char *names[256];
    size_t n = 0, n_custom = 0, used = 0;

    for (size_t f = 0; f < N_FAMILIES; f++)
        for (int i = 0; i < *families[f].count && n < 256; i++) {
            const struct sim_op *op = &families[f].ops[i];
            if (grad_only && op->backward == NULL)
                continue;
            if (op->domain == NULL) {
                names[n++] = op->name;
            } else if (n_custom < 16) {
                char *c = custom[grad_only][n_custom++];
                snprintf(c, sizeof(custom[0][0]), "%s.%s", op->domain, op->name);
                names[n++] = c;
            }
        }
    qsort(names, n, sizeof(names[0]), cmp_str);
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", names[i]);
}

static void build_supported(void) { build_list(supported_list, sizeof(supported_list), false); }
static void build_gradient(void) { build_list(gradient_list, sizeof(gradient_list), true); }

const char *
sim_supported_ops(void)
{
    pthread_once(&supported_once, build_supported);
    return supported_list;
}

const char *
sim_gradient_ops(void)
{
    pthread_once(&gradient_once, build_gradient);
    return gradient_list;
}

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
                       sim_supported_ops());
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

bool
sim_model_mark_const_inputs(struct sim_model *m)
{
    unsigned char *need = calloc((size_t)m->n_vals + 1, 1);

    if (need == NULL)
        return false;
    /* Walk nodes backwards: a value needed at compile time makes its producer's inputs
     * needed too (except through Shape, which only needs a shape). */
    for (int k = m->n_nodes - 1; k >= 0; k--) {
        const struct sim_mnode *nd = &m->nodes[k];
        const struct sim_op *op = sim_op_find_in(nd->domain, nd->op_type);
        bool out_needed = false;

        for (int j = 0; j < nd->n_out; j++)
            if (nd->out[j] >= 0 && need[nd->out[j]])
                out_needed = true;
        if (op != NULL && (op->flags & SIM_OPF_SHAPE_ONLY))
            out_needed = false;
        for (int j = 0; j < nd->n_in; j++) {
            if (nd->in[j] < 0)
                continue;
            if (out_needed || (op != NULL && j < 32 && (op->const_inputs & (1u << j))))
                need[nd->in[j]] = 1;
        }
    }
    for (int i = 0; i < m->n_in; i++)
        m->in_needs_const[i] = need[m->inputs[i]];
    free(need);
    return true;
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
