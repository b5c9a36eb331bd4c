/*
 * compat.c — the old layouts of public structs that grew, kept working for programs built
 * against an older header (glibc's way: the old symbol version converts to and from the
 * new struct and calls the default one).
 *
 * Rule (docs/architecture.md, client library): a public struct only grows with a new
 * symbol version. Functions whose argument layout changed in IPUOF_CLIENT_0.7:
 *   struct ipuof_fault (duration_ms .. host added):
 *     ipuof_fault_inject, ipuof_fault_list                         old: IPUOF_CLIENT_0.4
 *   struct ipuof_optimizer (alpha .. groups added), and so struct ipuof_training_opts that
 *   holds one:
 *     ipuof_optimizer_init, ipuof_model_set_optimizer,
 *     ipuof_model_compile_training, ipuof_model_compile_training_file   old: IPUOF_CLIENT_0
 * The static library has only the new layouts (its users compile against this header).
 */
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

/* The layouts as of IPUOF_CLIENT_0.4 (commit 7878cef). */
struct fault_v04 {
    unsigned id;
    int has_ipu;
    unsigned ipu;
    char partition[IPUOF_FAULT_NAME_MAX];
    char kind[IPUOF_FAULT_NAME_MAX];
    char at[16];
    unsigned after_runs;
    unsigned count;
    double probability;
    uint64_t seed;
    unsigned fired, seen;
};

struct optimizer_v0 {
    int kind;
    float lr;
    float weight_decay;
    float momentum;
    float dampening;
    int nesterov;
    float beta1, beta2;
    float eps;
};

struct training_opts_v0 {
    const char *loss;
    struct optimizer_v0 optimizer;
    unsigned gradient_accumulation;
    int accumulation_reduction;
    uint64_t seed;
    const char *const *frozen_weights;
    size_t n_frozen_weights;
};

/* The fields common to both layouts; the new ones zero (their defaults: armed until
 * cleared, no wait, no re-arm, the daemon's own host). */
static void
fault_from_v04(struct ipuof_fault *f, const struct fault_v04 *o)
{
    memset(f, 0, sizeof *f);
    f->id = o->id;
    f->has_ipu = o->has_ipu;
    f->ipu = o->ipu;
    memcpy(f->partition, o->partition, sizeof f->partition);
    memcpy(f->kind, o->kind, sizeof f->kind);
    memcpy(f->at, o->at, sizeof f->at);
    f->after_runs = o->after_runs;
    f->count = o->count;
    f->probability = o->probability;
    f->seed = o->seed;
    f->fired = o->fired;
    f->seen = o->seen;
}

static void
fault_to_v04(struct fault_v04 *o, const struct ipuof_fault *f)
{
    memset(o, 0, sizeof *o);
    o->id = f->id;
    o->has_ipu = f->has_ipu;
    o->ipu = f->ipu;
    memcpy(o->partition, f->partition, sizeof o->partition);
    memcpy(o->kind, f->kind, sizeof o->kind);
    memcpy(o->at, f->at, sizeof o->at);
    o->after_runs = f->after_runs;
    o->count = f->count;
    o->probability = f->probability;
    o->seed = f->seed;
    o->fired = f->fired;
    o->seen = f->seen;
}

/* Zero for every field the old layout lacks is the old behaviour: no RMSprop/LAMB fields,
 * bias correction on, loss and velocity scaling 1 (0 means 1), no clipping, no groups. */
static void
optimizer_from_v0(struct ipuof_optimizer *n, const struct optimizer_v0 *o)
{
    memset(n, 0, sizeof *n);
    n->kind = o->kind;
    n->lr = o->lr;
    n->weight_decay = o->weight_decay;
    n->momentum = o->momentum;
    n->dampening = o->dampening;
    n->nesterov = o->nesterov;
    n->beta1 = o->beta1;
    n->beta2 = o->beta2;
    n->eps = o->eps;
}

static void
training_from_v0(struct ipuof_training_opts *n, const struct training_opts_v0 *o)
{
    memset(n, 0, sizeof *n);
    n->loss = o->loss;
    optimizer_from_v0(&n->optimizer, &o->optimizer);
    n->gradient_accumulation = o->gradient_accumulation;
    n->accumulation_reduction = o->accumulation_reduction;
    n->seed = o->seed;
    n->frozen_weights = o->frozen_weights;
    n->n_frozen_weights = o->n_frozen_weights;
}

/* Old declarations, to keep -Wmissing-prototypes quiet; exported only by .symver. */
int ipuof_fault_inject_v04(ipuof_client *c, const struct fault_v04 *f, unsigned *id);
int ipuof_fault_list_v04(ipuof_client *c, struct fault_v04 *out, size_t max, size_t *n);
int ipuof_optimizer_init_v0(struct optimizer_v0 *o, int kind);
int ipuof_model_set_optimizer_v0(ipuof_model *m, const struct optimizer_v0 *o);
int ipuof_model_compile_training_v0(ipuof_client *c, const void *onnx, size_t len,
                                    const struct ipuof_model_opts *opts,
                                    const struct training_opts_v0 *t, ipuof_model **out);
int ipuof_model_compile_training_file_v0(ipuof_client *c, const char *path,
                                         const struct ipuof_model_opts *opts,
                                         const struct training_opts_v0 *t, ipuof_model **out);

__asm__(".symver ipuof_fault_inject_v04, ipuof_fault_inject@IPUOF_CLIENT_0.4");
__asm__(".symver ipuof_fault_list_v04, ipuof_fault_list@IPUOF_CLIENT_0.4");
__asm__(".symver ipuof_optimizer_init_v0, ipuof_optimizer_init@IPUOF_CLIENT_0");
__asm__(".symver ipuof_model_set_optimizer_v0, ipuof_model_set_optimizer@IPUOF_CLIENT_0");
__asm__(".symver ipuof_model_compile_training_v0, ipuof_model_compile_training@IPUOF_CLIENT_0");
__asm__(".symver ipuof_model_compile_training_file_v0, "
        "ipuof_model_compile_training_file@IPUOF_CLIENT_0");

/* ipuof_fault_inject on the 0.4 layout: reads sizeof(struct fault_v04) bytes only. */
int
ipuof_fault_inject_v04(ipuof_client *c, const struct fault_v04 *f, unsigned *id)
{
    struct ipuof_fault nf;

    if (f == NULL)
        return ipuof_fault_inject(c, NULL, id);
    fault_from_v04(&nf, f);
    return ipuof_fault_inject(c, &nf, id);
}

/* ipuof_fault_list on the 0.4 layout: writes at most max old-sized entries. */
int
ipuof_fault_list_v04(ipuof_client *c, struct fault_v04 *out, size_t max, size_t *n)
{
    struct ipuof_fault *tmp = NULL;
    size_t got = 0;
    int rc;

    if (out == NULL || max == 0)
        return ipuof_fault_list(c, NULL, 0, n);
    if (max > SIZE_MAX / sizeof *tmp || (tmp = calloc(max, sizeof *tmp)) == NULL)
        return c != NULL ? ipuof_err_set(c, IPUOF_E_NOMEM, "client",
                                         "fault list: no memory for %zu entries", max)
                         : IPUOF_E_NOMEM;
    rc = ipuof_fault_list(c, tmp, max, &got);
    if (rc == IPUOF_OK)
        for (size_t i = 0; i < got && i < max; i++)
            fault_to_v04(&out[i], &tmp[i]);
    if (n != NULL)
        *n = got;
    free(tmp);
    return rc;
}

/* ipuof_optimizer_init on the old layout: the old kinds only (SGD, Adam, AdamW), as then. */
int
ipuof_optimizer_init_v0(struct optimizer_v0 *o, int kind)
{
    struct ipuof_optimizer n;
    int rc;

    if (o == NULL || kind < IPUOF_OPTIMIZER_SGD || kind > IPUOF_OPTIMIZER_ADAMW)
        return IPUOF_E_INVAL;
    rc = ipuof_optimizer_init(&n, kind);
    if (rc != IPUOF_OK)
        return rc;
    memset(o, 0, sizeof *o);
    o->kind = n.kind;
    o->lr = n.lr;
    o->weight_decay = n.weight_decay;
    o->momentum = n.momentum;
    o->dampening = n.dampening;
    o->nesterov = n.nesterov;
    o->beta1 = n.beta1;
    o->beta2 = n.beta2;
    o->eps = n.eps;
    return IPUOF_OK;
}

int
ipuof_model_set_optimizer_v0(ipuof_model *m, const struct optimizer_v0 *o)
{
    struct ipuof_optimizer n;

    if (o == NULL)
        return ipuof_model_set_optimizer(m, NULL);
    optimizer_from_v0(&n, o);
    return ipuof_model_set_optimizer(m, &n);
}

int
ipuof_model_compile_training_v0(ipuof_client *c, const void *onnx, size_t len,
                                const struct ipuof_model_opts *opts,
                                const struct training_opts_v0 *t, ipuof_model **out)
{
    struct ipuof_training_opts n;

    if (t == NULL)
        return ipuof_model_compile_training(c, onnx, len, opts, NULL, out);
    training_from_v0(&n, t);
    return ipuof_model_compile_training(c, onnx, len, opts, &n, out);
}

int
ipuof_model_compile_training_file_v0(ipuof_client *c, const char *path,
                                     const struct ipuof_model_opts *opts,
                                     const struct training_opts_v0 *t, ipuof_model **out)
{
    struct ipuof_training_opts n;

    if (t == NULL)
        return ipuof_model_compile_training_file(c, path, opts, NULL, out);
    training_from_v0(&n, t);
    return ipuof_model_compile_training_file(c, path, opts, &n, out);
}
