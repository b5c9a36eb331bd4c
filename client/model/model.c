/*
 * model.c — a compiled model's lifetime and what the daemon reported about it: whether it
 * can still run (same connection, same partition), freeing it here and on the daemon, and
 * the information accessors. Compiling is compile.c's job, running run.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

int
ipuof_model_usable(ipuof_model *m)
{
    ipuof_client *c = m->c;
    int poll_rc;
    int rc;

    rc = ipuof_require_connection(c);
    if (rc != IPUOF_OK)
        return rc;
    if (m->conn_gen != c->conn_gen)
        return ipuof_err_set(c, IPUOF_E_STATE, "client",
                             "model '%s' was compiled on an earlier connection to ipuofd; "
                             "compile it again on this one",
                             m->name);
    poll_rc = ipuof_conn_poll_notices(c);
    if (!c->attached) {
        rc = ipuof_take_notice(c);
        if (rc != IPUOF_OK)
            return rc;
        if (poll_rc != IPUOF_OK)
            return poll_rc;
        return ipuof_err_set(c, IPUOF_E_NOT_ATTACHED, "client",
                             "model '%s' belongs to a partition this connection no longer "
                             "holds; attach and compile it again",
                             m->name);
    }
    if (m->attach_gen != c->attach_gen)
        return ipuof_err_set(c, IPUOF_E_NOT_ATTACHED, "client",
                             "model '%s' was compiled for an earlier partition; compile it "
                             "again for partition '%s'",
                             m->name, c->partition);
    return poll_rc;
}

int
ipuof_model_settle(ipuof_client *c, int rc)
{
    if (rc != IPUOF_OK && c->notice_pending && c->notice.code == rc)
        c->notice_pending = 0;
    return rc;
}

void
ipuof_model_forget(ipuof_client *c, uint32_t id)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__FreeModelRequest fr = IPUOF__FREE_MODEL_REQUEST__INIT;
    Ipuof__Header *reply = NULL;
    struct ipuof_err_info saved;

    if (c->fd < 0)
        return;
    saved = c->err;
    fr.model_id = id;
    req.body_case = IPUOF__HEADER__BODY_FREE_MODEL;
    req.free_model = &fr;
    (void)ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_FREE_MODEL_REPLY, c->request_ms, NULL,
                          NULL, &reply);
    ipuof_frame_header_free(reply);
    c->err = saved;
}

void
ipuof_model_destroy(ipuof_model *m)
{
    for (size_t i = 0; m->inputs != NULL && i < m->n_inputs; i++)
        ipuof_tinfo_fini(&m->inputs[i]);
    for (size_t i = 0; m->outputs != NULL && i < m->n_outputs; i++)
        ipuof_tinfo_fini(&m->outputs[i]);
    for (size_t i = 0; m->out != NULL && i < m->n_outputs; i++)
        free(m->out[i].buf);
    for (size_t i = 0; m->weights != NULL && i < m->n_weights; i++)
        ipuof_tinfo_fini(&m->weights[i].t);
    free(m->weights);
    free(m->pred_report);
    free(m->pred_json);
    free(m->inputs);
    free(m->outputs);
    free(m->memory);
    free(m->order);
    free(m->req_info);
    free(m->req_ptrs);
    free(m->in_iov);
    free(m->out);
    free(m->out_iov);
    free(m->name);
    free(m->trace_path);
    free(m);
}

void
ipuof_model_free(ipuof_model *m)
{
    ipuof_client *c;

    if (m == NULL)
        return;
    c = m->c;
    if (c->fd >= 0 && m->conn_gen == c->conn_gen && c->attached &&
        m->attach_gen == c->attach_gen)
        ipuof_model_forget(c, m->id);
    ipuof_model_destroy(m);
}

/* ---- what the daemon reported ------------------------------------------------------- */

/* Describes ti[i] of n in *t (strings borrowed from the model) and its step shape in
 * step_dims (IPUOF_MAX_RANK entries, -1 past its rank; may be NULL). */
static int
describe(const struct ipuof_tinfo *ti, size_t n, size_t i, struct ipuof_tensor *t,
         int64_t *step_dims)
{
    if (ti == NULL || i >= n || t == NULL)
        return IPUOF_E_INVAL;
    memset(t, 0, sizeof *t);
    t->name = ti[i].name;
    t->dtype = ti[i].dtype;
    t->rank = ti[i].rank;
    memcpy(t->dims, ti[i].dims, sizeof t->dims);
    t->bytes = (size_t)ti[i].bytes;
    if (step_dims != NULL) {
        for (int d = 0; d < IPUOF_MAX_RANK; d++)
            step_dims[d] = d < ti[i].step_rank ? ti[i].step_dims[d] : -1;
    }
    return IPUOF_OK;
}

size_t
ipuof_model_input_count(const ipuof_model *m)
{
    return m != NULL ? m->n_inputs : 0;
}

size_t
ipuof_model_output_count(const ipuof_model *m)
{
    return m != NULL ? m->n_outputs : 0;
}

int
ipuof_model_input_info(const ipuof_model *m, size_t i, struct ipuof_tensor *t,
                       int64_t *step_dims)
{
    return m != NULL ? describe(m->inputs, m->n_inputs, i, t, step_dims) : IPUOF_E_INVAL;
}

int
ipuof_model_output_info(const ipuof_model *m, size_t i, struct ipuof_tensor *t,
                        int64_t *step_dims)
{
    return m != NULL ? describe(m->outputs, m->n_outputs, i, t, step_dims) : IPUOF_E_INVAL;
}

long
ipuof_model_input_index(const ipuof_model *m, const char *name)
{
    return m != NULL ? ipuof_tinfo_index(m->inputs, m->n_inputs, name) : -1;
}

long
ipuof_model_output_index(const ipuof_model *m, const char *name)
{
    return m != NULL ? ipuof_tinfo_index(m->outputs, m->n_outputs, name) : -1;
}

int
ipuof_model_cached(const ipuof_model *m)
{
    return m != NULL && m->cached;
}

uint64_t
ipuof_model_compile_us(const ipuof_model *m)
{
    return m != NULL ? m->compile_us : 0;
}

unsigned
ipuof_model_device_iterations(const ipuof_model *m)
{
    return m != NULL ? m->device_iterations : 0;
}

unsigned
ipuof_model_replicas(const ipuof_model *m)
{
    return m != NULL ? m->replicas : 0;
}

unsigned
ipuof_model_micro_batch(const ipuof_model *m)
{
    return m != NULL ? m->micro_batch : 0;
}

size_t
ipuof_model_ipu_count(const ipuof_model *m)
{
    return m != NULL ? m->n_memory : 0;
}

uint64_t
ipuof_model_host_bytes(const ipuof_model *m)
{
    return m != NULL ? m->host_bytes : 0;
}

int
ipuof_model_memory(const ipuof_model *m, size_t i, unsigned *ipu_id, uint64_t *weights,
                   uint64_t *activations, uint64_t *code, uint64_t *total, uint64_t *capacity)
{
    const struct ipuof_mem *r;

    if (m == NULL || i >= m->n_memory)
        return IPUOF_E_INVAL;
    r = &m->memory[i];
    if (ipu_id != NULL)
        *ipu_id = r->ipu;
    if (weights != NULL)
        *weights = r->weights;
    if (activations != NULL)
        *activations = r->activations;
    if (code != NULL)
        *code = r->code;
    if (total != NULL)
        *total = r->total;
    if (capacity != NULL)
        *capacity = r->capacity;
    return IPUOF_OK;
}
