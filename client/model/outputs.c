/*
 * outputs.c — where a run's output bytes go: the RunReply that carries them all, or the
 * RunOutputs frames that carry them as the run computes (RunRequest.stream_outputs) and
 * the RunReply that closes them. Parsing only, no I/O: each function checks one decoded
 * frame header against the model and the payload length, and points the payload at the
 * model's output buffers (m->out, grown only when a frame announces more) through
 * m->out_iov. Every offset and length is checked against the output's described size
 * before a byte is placed, and every output's pieces must arrive in order without gaps,
 * so the bytes of a run land exactly once each, and a RunReply after RunOutputs frames is
 * accepted only when every byte of every output came.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "wiremap.h"

/* Checks the output descriptions outs[0..n) against m and takes them into m->out (sizes,
 * shapes; buffers grown to fit; nothing received yet). *sum gets their bytes' total (more
 * than 2^64: UINT64_MAX). IPUOF_OK, or IPUOF_E_PROTO / IPUOF_E_NOMEM with a sentence. */
static int
take_descriptions(ipuof_model *m, const char *what, Ipuof__TensorInfo *const *outs, size_t n,
                  uint64_t *sum)
{
    ipuof_client *c = m->c;

    *sum = 0;
    if (n != m->n_outputs)
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s answered %s with %zu outputs; model '%s' has %zu",
                             c->address, what, n, m->name, m->n_outputs);
    for (size_t i = 0; i < n; i++) {
        const Ipuof__TensorInfo *o = outs[i];
        uint64_t bytes;

        if (o->n_dims > IPUOF_MAX_RANK ||
            ipuof_shape_bytes(ipuof_wm_from_wire(&ipuof_wm_dtype, o->dtype, 0), (int)o->n_dims,
                              o->dims, &bytes) != 0 ||
            bytes != o->bytes || bytes > SIZE_MAX)
            return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                                 "ipuofd at %s described output %zu of %s as %llu bytes of "
                                 "dtype %d with %zu dims, which do not agree",
                                 c->address, i, what, (unsigned long long)o->bytes,
                                 (int)o->dtype, o->n_dims);
        if (o->name != NULL && o->name[0] != '\0' && strcmp(o->name, m->outputs[i].name) != 0)
            return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                                 "ipuofd at %s returned output %zu of %s as '%s'; the model "
                                 "calls it '%s'",
                                 c->address, i, what, o->name, m->outputs[i].name);
        *sum = bytes > UINT64_MAX - *sum ? UINT64_MAX : *sum + bytes;
    }
    if (*sum > c->lim.max_payload)
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s described outputs of %llu bytes for %s; this "
                             "library accepts at most %u per run", c->address,
                             (unsigned long long)*sum, what, c->lim.max_payload);
    for (size_t i = 0; i < n; i++) {
        const Ipuof__TensorInfo *o = outs[i];
        struct ipuof_outbuf *ob = &m->out[i];

        if (ob->buf == NULL || o->bytes > ob->cap) {
            void *p = realloc(ob->buf, o->bytes != 0 ? (size_t)o->bytes : 1);

            if (p == NULL)
                return ipuof_err_set(c, IPUOF_E_NOMEM, "client",
                                     "out of memory for output '%s' (%llu bytes)",
                                     m->outputs[i].name, (unsigned long long)o->bytes);
            ob->buf = p;
            ob->cap = (size_t)o->bytes;
        }
        ob->dtype = ipuof_wm_from_wire(&ipuof_wm_dtype, o->dtype, 0);
        ob->rank = (int)o->n_dims;
        memset(ob->dims, 0, sizeof ob->dims);
        if (o->n_dims > 0)
            memcpy(ob->dims, o->dims, o->n_dims * sizeof *o->dims);
        ob->bytes = (size_t)o->bytes;
        ob->got = 0;
    }
    return IPUOF_OK;
}

void
ipuof_outputs_reset(ipuof_model *m)
{
    m->out_streamed = 0;
    m->out_refused = 0;
}

/* A RunReply: its payload is every output, tensor after tensor; or, after RunOutputs
 * frames, it is empty and every output must be complete. */
static int
place_reply(ipuof_model *m, const char *what, const Ipuof__RunReply *rr, uint32_t payload_len,
            struct iovec **iov, int *iovcnt)
{
    ipuof_client *c = m->c;
    uint64_t sum;
    int rc;

    if (m->out_streamed) {
        if (payload_len != 0)
            return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                                 "ipuofd at %s closed the streamed outputs of %s with a "
                                 "RunReply carrying %u payload bytes; it must carry none",
                                 c->address, what, payload_len);
        if (rr->n_outputs != m->n_outputs)
            return take_descriptions(m, what, rr->outputs, rr->n_outputs, &sum);
        for (size_t i = 0; i < m->n_outputs; i++) {
            const struct ipuof_outbuf *ob = &m->out[i];
            if (rr->outputs[i]->bytes != ob->bytes || ob->got != ob->bytes)
                return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                                     "ipuofd at %s ended %s with output %zu ('%s') at %llu "
                                     "bytes, having sent %zu of the %zu it announced",
                                     c->address, what, i, m->outputs[i].name,
                                     (unsigned long long)rr->outputs[i]->bytes, ob->got,
                                     ob->bytes);
        }
        return IPUOF_OK;
    }
    rc = take_descriptions(m, what, rr->outputs, rr->n_outputs, &sum);
    if (rc != IPUOF_OK)
        return rc;
    if (sum != payload_len)
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s answered %s with %u payload bytes but its outputs "
                             "add up to %s%llu bytes", c->address, what, payload_len,
                             sum == UINT64_MAX ? "more than " : "", (unsigned long long)sum);
    for (size_t i = 0; i < m->n_outputs; i++) {
        m->out[i].got = m->out[i].bytes;
        m->out_iov[i].iov_base = m->out[i].buf;
        m->out_iov[i].iov_len = m->out[i].bytes;
    }
    *iov = m->out_iov;
    *iovcnt = (int)m->n_outputs;
    return IPUOF_OK;
}

/* A RunOutputs frame: the first describes the outputs; each piece continues its output
 * where the last one stopped and stays inside it; the pieces add up to the payload. */
static int
place_pieces(ipuof_model *m, const char *what, const Ipuof__RunOutputs *ro,
             uint32_t payload_len, struct iovec **iov, int *iovcnt)
{
    ipuof_client *c = m->c;
    uint64_t sum = 0, described;
    int rc;

    if (!m->out_streamed) {
        if (ro->n_outputs == 0)
            return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                                 "ipuofd at %s began the streamed outputs of %s without "
                                 "describing them", c->address, what);
        rc = take_descriptions(m, what, ro->outputs, ro->n_outputs, &described);
        if (rc != IPUOF_OK)
            return rc;
        m->out_streamed = 1;
    } else if (ro->n_outputs != 0) {
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s described the outputs of %s a second time",
                             c->address, what);
    }
    if (ro->n_pieces > m->n_outputs)
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s sent %zu pieces of output in one frame of %s; at "
                             "most %zu (one per output) are allowed", c->address, ro->n_pieces,
                             what, m->n_outputs);
    for (size_t k = 0; k < ro->n_pieces; k++) {
        const Ipuof__OutputPiece *p = ro->pieces[k];
        struct ipuof_outbuf *ob;

        if (p->output >= m->n_outputs)
            return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                                 "ipuofd at %s sent a piece of output %u of %s; model '%s' "
                                 "has %zu outputs", c->address, p->output, what, m->name,
                                 m->n_outputs);
        ob = &m->out[p->output];
        if (p->offset != ob->got || p->length > ob->bytes - ob->got ||
            p->length > payload_len - sum)
            return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                                 "ipuofd at %s sent bytes [%llu, +%llu) of output %u ('%s') "
                                 "of %s; the next are [%zu, +%zu at most) of a payload with "
                                 "%llu left", c->address, (unsigned long long)p->offset,
                                 (unsigned long long)p->length, p->output,
                                 m->outputs[p->output].name, what, ob->got,
                                 ob->bytes - ob->got,
                                 (unsigned long long)(payload_len - sum));
        m->out_iov[k].iov_base = (char *)ob->buf + ob->got;
        m->out_iov[k].iov_len = (size_t)p->length;
        ob->got += (size_t)p->length;
        sum += p->length;
    }
    if (sum != payload_len)
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s sent a RunOutputs frame of %s with %u payload "
                             "bytes whose pieces add up to %llu", c->address, what,
                             payload_len, (unsigned long long)sum);
    *iov = m->out_iov;
    *iovcnt = (int)ro->n_pieces;
    return IPUOF_OK;
}

int
ipuof_outputs_place(void *arg, ipuof_client *c, const char *what, const Ipuof__Header *h,
                    uint32_t payload_len, struct iovec **iov, int *iovcnt)
{
    ipuof_model *m = arg;

    (void)c;
    *iovcnt = 0;
    if (h->body_case == IPUOF__HEADER__BODY_RUN_OUTPUTS) {
        int rc = place_pieces(m, what, h->run_outputs, payload_len, iov, iovcnt);
        m->out_refused = rc != IPUOF_OK;
        return rc;
    }
    if (h->body_case == IPUOF__HEADER__BODY_RUN_REPLY)
        return place_reply(m, what, h->run_reply, payload_len, iov, iovcnt);
    return IPUOF_OK; /* another body: the caller's (its payload is discarded) */
}
