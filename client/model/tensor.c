/*
 * tensor.c — dtypes, shapes and the checks a run's inputs go through before anything is
 * sent: matching the caller's tensors to the model's inputs, then dtype, shape and size.
 *
 * Every failure leaves one sentence on the client that names the input, what was given and
 * what the model expects, so a caller can fix the call without reading the graph.
 *
 * Also the tensor lists of a CompileReply (the weights of a training model included): the
 * model's files (compile.c, train.c, model.c) call down into this one and it calls none of
 * them back.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "wiremap.h"

#define NAMES_MAX 512 /* room for a list of input names in a sentence */

const char *
ipuof_dtype_name(int dtype)
{
    switch (dtype) {
    case IPUOF_DTYPE_FLOAT: return "float";
    case IPUOF_DTYPE_UINT8: return "uint8";
    case IPUOF_DTYPE_INT8: return "int8";
    case IPUOF_DTYPE_INT32: return "int32";
    case IPUOF_DTYPE_INT64: return "int64";
    case IPUOF_DTYPE_BOOL: return "bool";
    case IPUOF_DTYPE_FLOAT16: return "float16";
    default: return "unknown";
    }
}

size_t
ipuof_dtype_size(int dtype)
{
    switch (dtype) {
    case IPUOF_DTYPE_FLOAT: return 4;
    case IPUOF_DTYPE_UINT8: return 1;
    case IPUOF_DTYPE_INT8: return 1;
    case IPUOF_DTYPE_INT32: return 4;
    case IPUOF_DTYPE_INT64: return 8;
    case IPUOF_DTYPE_BOOL: return 1;
    case IPUOF_DTYPE_FLOAT16: return 2;
    default: return 0;
    }
}

int
ipuof_shape_bytes(int dtype, int rank, const int64_t *dims, uint64_t *bytes)
{
    uint64_t n = ipuof_dtype_size(dtype);

    *bytes = 0;
    if (n == 0 || rank < 0 || rank > IPUOF_MAX_RANK)
        return -1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return -1;
        if (dims[i] != 0 && n > UINT64_MAX / (uint64_t)dims[i])
            return -1;
        n *= (uint64_t)dims[i];
    }
    *bytes = n;
    return 0;
}

/* Appends printf-style text at buf[used..len) and returns the new length, which stops at
 * len when the text was cut. */
static size_t appendf(char *buf, size_t len, size_t used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t
appendf(char *buf, size_t len, size_t used, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (used >= len)
        return used;
    va_start(ap, fmt);
    n = vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
    if (n < 0)
        return used;
    return (size_t)n < len - used ? used + (size_t)n : len;
}

void
ipuof_shape_format(char *buf, size_t len, int rank, const int64_t *dims)
{
    size_t used;

    if (len == 0)
        return;
    buf[0] = '\0';
    used = appendf(buf, len, 0, "[");
    for (int i = 0; i < rank; i++)
        used = appendf(buf, len, used, "%s%lld", i > 0 ? ", " : "", (long long)dims[i]);
    appendf(buf, len, used, "]");
}

int
ipuof_tinfo_from_wire(ipuof_client *c, struct ipuof_tinfo *dst, const Ipuof__TensorInfo *src,
                      const char *role, size_t index)
{
    const char *name = src->name != NULL ? src->name : "";
    uint64_t bytes;

    memset(dst, 0, sizeof *dst);
    dst->name = strdup(name);
    if (dst->name == NULL)
        return ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory copying the name of "
                             "%s %zu", role, index);
    if (ipuof_wm_from_wire(&ipuof_wm_dtype, src->dtype, 0) == 0)
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s described %s %zu ('%s') with dtype %d, which this "
                             "library does not know",
                             c->address, role, index, name, (int)src->dtype);
    if (src->n_dims > IPUOF_MAX_RANK || src->n_step_dims > IPUOF_MAX_RANK)
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s described %s %zu ('%s') with %zu dims; at most %d "
                             "are supported",
                             c->address, role, index, name,
                             src->n_dims > src->n_step_dims ? src->n_dims : src->n_step_dims,
                             IPUOF_MAX_RANK);
    dst->dtype = ipuof_wm_from_wire(&ipuof_wm_dtype, src->dtype, 0);
    dst->rank = (int)src->n_dims;
    dst->step_rank = (int)src->n_step_dims;
    if (src->n_dims > 0)
        memcpy(dst->dims, src->dims, src->n_dims * sizeof *src->dims);
    if (src->n_step_dims > 0)
        memcpy(dst->step_dims, src->step_dims, src->n_step_dims * sizeof *src->step_dims);
    if (ipuof_shape_bytes(dst->dtype, dst->rank, dst->dims, &bytes) != 0 ||
        bytes != src->bytes) {
        char shape[256];

        ipuof_shape_format(shape, sizeof shape, dst->rank, dst->dims);
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s described %s %zu ('%s') as %llu bytes, which does "
                             "not match its shape %s of %s",
                             c->address, role, index, name, (unsigned long long)src->bytes,
                             shape, ipuof_dtype_name(dst->dtype));
    }
    dst->bytes = bytes;
    if (src->mode != NULL) {
        dst->mode_kind = ipuof_wm_from_wire(&ipuof_wm_output_kind, src->mode->kind,
                                            IPUOF_OUTPUT_DEFAULT);
        dst->mode_n = src->mode->n;
    }
    return IPUOF_OK;
}

void
ipuof_tinfo_fini(struct ipuof_tinfo *t)
{
    free(t->name);
    t->name = NULL;
}

long
ipuof_tinfo_index(const struct ipuof_tinfo *ti, size_t n, const char *name)
{
    if (ti == NULL || name == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(ti[i].name, name) == 0)
            return (long)i;
    return -1;
}

/* Writes the names of m's inputs as "'x', 'y'" into buf[0..len), cut with "..." to fit. */
static void
input_names(const ipuof_model *m, char *buf, size_t len)
{
    size_t used = 0;

    snprintf(buf, len, "%s", m->n_inputs == 0 ? "none" : "");
    for (size_t i = 0; i < m->n_inputs; i++) {
        int n = snprintf(buf + used, len - used, "%s'%s'", i > 0 ? ", " : "",
                         m->inputs[i].name);

        if (n < 0 || (size_t)n >= len - used) {
            if (len > 4)
                memcpy(buf + len - 4, "...", 4);
            return;
        }
        used += (size_t)n;
    }
}

int
ipuof_inputs_match(ipuof_model *m, const struct ipuof_tensor *in, size_t n)
{
    ipuof_client *c = m->c;
    char names[NAMES_MAX];
    size_t named = 0;

    input_names(m, names, sizeof names);
    if (n > 0 && in == NULL)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "ipuof_model_run() was given %zu inputs but no array", n);
    if (n != m->n_inputs)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "model '%s' takes %zu input%s (%s) but %zu %s given", m->name,
                             m->n_inputs, m->n_inputs == 1 ? "" : "s", names, n,
                             n == 1 ? "was" : "were");
    for (size_t j = 0; j < n; j++)
        named += in[j].name != NULL;
    if (named == 0) {
        for (size_t i = 0; i < n; i++)
            m->order[i] = &in[i];
        return IPUOF_OK;
    }
    for (size_t i = 0; i < n; i++)
        m->order[i] = NULL;
    for (size_t j = 0; j < n; j++) {
        long k;

        if (in[j].name == NULL)
            return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                                 "input %zu of the call has no name while others do; name "
                                 "every input, or none to match them in order (%s)",
                                 j, names);
        k = ipuof_tinfo_index(m->inputs, m->n_inputs, in[j].name);
        if (k < 0)
            return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                                 "'%s' is not an input of model '%s'; its inputs are %s",
                                 in[j].name, m->name, names);
        if (m->order[k] != NULL)
            return ipuof_err_set(c, IPUOF_E_INVAL, "client", "input '%s' is given twice",
                                 in[j].name);
        m->order[k] = &in[j];
    }
    return IPUOF_OK;
}

/* Writes " (micro-batch B x D device iterations x R replicas)" into buf[0..len) when want's
 * dim 0 is the batch dimension those make up, else "". A training model's gradient
 * accumulation A is a factor too: its run takes B x D x A x R samples. */
static void
batch_arithmetic(const ipuof_model *m, const struct ipuof_tinfo *want, char *buf, size_t len)
{
    unsigned acc = m->gradient_accumulation != 0 ? m->gradient_accumulation : 1;
    uint64_t per_call = (uint64_t)m->device_iterations * acc * m->replicas;
    char acc_text[64] = "";

    buf[0] = '\0';
    if (want->rank < 1 || want->step_rank != want->rank || want->step_dims[0] <= 0)
        return;
    for (int d = 1; d < want->rank; d++)
        if (want->step_dims[d] != want->dims[d])
            return;
    if ((uint64_t)want->step_dims[0] * per_call != (uint64_t)want->dims[0])
        return;
    if (m->training || acc > 1)
        snprintf(acc_text, sizeof acc_text, " x %u gradient accumulation step%s", acc,
                 acc == 1 ? "" : "s");
    snprintf(buf, len, " (micro-batch %lld x %u device iteration%s%s x %u replica%s)",
             (long long)want->step_dims[0], m->device_iterations,
             m->device_iterations == 1 ? "" : "s", acc_text, m->replicas,
             m->replicas == 1 ? "" : "s");
}

int
ipuof_input_check(ipuof_model *m, size_t i, const struct ipuof_tensor *t)
{
    ipuof_client *c = m->c;
    const struct ipuof_tinfo *want = &m->inputs[i];
    char got_shape[256], want_shape[256], why[128];
    int same = t->rank == want->rank;

    if (t->dtype != want->dtype)
        return ipuof_err_set(c, IPUOF_E_DTYPE, "client",
                             "input '%s' has dtype %s but model '%s' expects %s", want->name,
                             ipuof_dtype_name(t->dtype), m->name,
                             ipuof_dtype_name(want->dtype));
    if (t->rank < 0 || t->rank > IPUOF_MAX_RANK)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "input '%s' has rank %d; a tensor has 0 to %d dims", want->name,
                             t->rank, IPUOF_MAX_RANK);
    for (int d = 0; same && d < t->rank; d++)
        same = t->dims[d] == want->dims[d];
    /* A scalar input's run shape is [D x R]; with one step per call the scalar itself fits. */
    if (!same && t->rank == 0 && want->rank == 1 && want->dims[0] == 1 && want->step_rank == 0)
        same = 1;
    if (!same) {
        ipuof_shape_format(got_shape, sizeof got_shape, t->rank, t->dims);
        ipuof_shape_format(want_shape, sizeof want_shape, want->rank, want->dims);
        batch_arithmetic(m, want, why, sizeof why);
        return ipuof_err_set(c, IPUOF_E_SHAPE, "client",
                             "input '%s' has shape %s but the model expects %s%s", want->name,
                             got_shape, want_shape, why);
    }
    if (t->bytes != want->bytes) {
        ipuof_shape_format(want_shape, sizeof want_shape, want->rank, want->dims);
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "input '%s' holds %zu bytes but its shape %s of %s takes %llu",
                             want->name, t->bytes, want_shape, ipuof_dtype_name(want->dtype),
                             (unsigned long long)want->bytes);
    }
    if (t->data == NULL && t->bytes > 0)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client", "input '%s' has no data (NULL)",
                             want->name);
    return IPUOF_OK;
}

/* ---- a compile reply's training fields (compile.c reads the rest) ---- */

int
ipuof_model_take_training(ipuof_client *c, ipuof_model *m, const Ipuof__CompileReply *cr)
{
    m->training = cr->training;
    m->gradient_accumulation = cr->gradient_accumulation != 0 ? cr->gradient_accumulation : 1;
    m->weights = calloc(cr->n_weights != 0 ? cr->n_weights : 1, sizeof *m->weights);
    if (m->weights == NULL)
        return ipuof_err_set(c, IPUOF_E_NOMEM, "client",
                             "out of memory for the %zu weights of a compiled model",
                             cr->n_weights);
    m->n_weights = cr->n_weights;
    for (size_t i = 0; i < cr->n_weights; i++) {
        const Ipuof__WeightInfo *w = cr->weights[i];
        int rc;

        if (w->tensor == NULL)
            return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                                 "ipuofd at %s described weight %zu without a tensor",
                                 c->address, i);
        rc = ipuof_tinfo_from_wire(c, &m->weights[i].t, w->tensor, "weight", i);
        if (rc != IPUOF_OK)
            return rc;
        m->weights[i].kind = ipuof_wm_from_wire(&ipuof_wm_weight_kind, w->kind, 0);
    }
    return IPUOF_OK;
}
