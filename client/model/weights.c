/*
 * weights.c — a model's weights on the daemon: read one into the caller's buffer, write
 * one from it (PopTorch's copyWeightsToHost / copyWeightsToDevice), copy all of them from
 * one model to another inside the daemon, and save the model as ONNX bytes whose
 * initializers hold the current values.
 *
 * Bytes never pass through an intermediate buffer: a write sends the caller's buffer as the
 * request's payload, a read receives the reply's payload straight into the caller's buffer
 * after its description was checked (run.c's sink pattern), and a save receives into one
 * allocation that becomes the caller's. A weight known from the CompileReply is checked
 * (name, size) before anything is sent.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "freshfile.h"
#include "model_internal.h"
#include "wiremap.h"

/* strerror() may share a buffer between threads; the GNU strerror_r() writes to ours. */
#define ERRTEXT(e) strerror_r((e), (char[128]){0}, 128)

/* The weight of m called name, or NULL. */
static const struct ipuof_tinfo *
find_weight(const ipuof_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_weights; i++)
        if (strcmp(m->weights[i].t.name, name) == 0)
            return &m->weights[i].t;
    return NULL;
}

/*
 * Checks a read or write of bytes bytes of weight name against what the compile reported:
 * IPUOF_E_NOTFOUND for a name the model does not have, IPUOF_E_SHAPE for a size that is not
 * the weight's. A model whose compile listed no weights is left to the daemon. *w receives
 * the weight's description, or NULL.
 */
static int
check_weight(ipuof_model *m, const char *name, size_t bytes, const struct ipuof_tinfo **w)
{
    ipuof_client *c = m->c;
    char shape[256];

    *w = NULL;
    if (m->n_weights == 0)
        return IPUOF_OK;
    *w = find_weight(m, name);
    if (*w == NULL)
        return ipuof_err_set(c, IPUOF_E_NOTFOUND, "client",
                             "model '%s' has no weight '%s' (it has %zu; "
                             "ipuof_model_weight_info() lists them)",
                             m->name, name, m->n_weights);
    if ((*w)->bytes != bytes) {
        ipuof_shape_format(shape, sizeof shape, (*w)->rank, (*w)->dims);
        return ipuof_err_set(c, IPUOF_E_SHAPE, "client",
                             "weight '%s' of model '%s' is %s of %s, %llu bytes, but the "
                             "buffer given holds %zu",
                             name, m->name, shape, ipuof_dtype_name((*w)->dtype),
                             (unsigned long long)(*w)->bytes, bytes);
    }
    return IPUOF_OK;
}

#define STATE_PREFIX "optimizer:"
#define STATE_STEP STATE_PREFIX "step"

/* Checks that name is an optimizer state name of a training model (the daemon checks the
 * rest: which exist, their sizes). */
static int
check_state(ipuof_model *m, const char *name)
{
    if (!m->training)
        return ipuof_err_set(m->c, IPUOF_E_INVAL, "client",
                             "model '%s' does not train, so it has no optimizer state",
                             m->name);
    if (strncmp(name, STATE_PREFIX, strlen(STATE_PREFIX)) != 0)
        return ipuof_err_set(m->c, IPUOF_E_NOTFOUND, "client",
                             "'%s' is not an optimizer state name: they are '" STATE_STEP
                             "' and '" STATE_PREFIX "<slot>:<weight>'", name);
    return IPUOF_OK;
}

/* See model_internal.h. */
int
ipuof_model_call(ipuof_model *m, Ipuof__Header *req, Ipuof__Header__BodyCase want,
     const struct ipuof_sink *sink, const struct iovec *payload, int n_payload,
     Ipuof__Header **reply)
{
    ipuof_client *c = m->c;
    struct ipuof_xchg x;
    Ipuof__Header *h = NULL;
    int rc;

    *reply = NULL;
    rc = ipuof_xchg_begin(c, &x, req, c->request_ms);
    if (rc == IPUOF_OK)
        rc = ipuof_xchg_send(&x, req, payload, n_payload);
    if (rc != IPUOF_OK)
        goto out;
    ipuof_io_rearm(&x.io); /* the timeout bounds the wait for the reply, not the upload */
    rc = ipuof_xchg_recv(&x, sink, 0, &h);
    if (rc != IPUOF_OK)
        goto out;
    if (h->body_case != want) {
        rc = ipuof_xchg_unexpected(&x, h);
        goto out;
    }
    *reply = h;
    h = NULL;
out:
    ipuof_frame_header_free(h);
    return ipuof_xchg_end(&x, rc);
}

/* ---- read ------------------------------------------------------------------------------ */

/* Where a ReadWeightsReply's payload goes: the caller's buffer, once the reply was checked. */
struct read_sink {
    ipuof_model *m;
    const char *name;
    void *dst;                       /* borrowed from the caller */
    size_t bytes;
    struct iovec iov;
};

/* place() of a read: the reply must describe one weight, called name, of exactly the
 * caller's size, and carry that many bytes. Frames of another body are left to the caller. */
static int
place_weight(void *arg, ipuof_client *c, const char *what, const Ipuof__Header *h,
             uint32_t payload_len, struct iovec **iov, int *iovcnt)
{
    struct read_sink *rs = arg;
    const Ipuof__ReadWeightsReply *rr;
    const Ipuof__TensorInfo *w;
    uint64_t bytes;

    *iovcnt = 0;
    if (h->body_case != IPUOF__HEADER__BODY_READ_WEIGHTS_REPLY)
        return IPUOF_OK;
    rr = h->read_weights_reply;
    if (rr->n_weights != 1 || rr->weights[0] == NULL)
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s answered %s with %zu weights; one was asked for",
                             c->address, what, rr->n_weights);
    w = rr->weights[0];
    if ((w->name != NULL && w->name[0] != '\0' && strcmp(w->name, rs->name) != 0) ||
        w->n_dims > IPUOF_MAX_RANK ||
        ipuof_shape_bytes(ipuof_wm_from_wire(&ipuof_wm_dtype, w->dtype, 0), (int)w->n_dims,
                          w->dims, &bytes) != 0 ||
        bytes != w->bytes || w->bytes != payload_len)
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s answered %s for weight '%s' with a description "
                             "('%s', %llu bytes) that does not match its %u payload bytes",
                             c->address, what, rs->name, w->name != NULL ? w->name : "",
                             (unsigned long long)w->bytes, payload_len);
    if (w->bytes != rs->bytes) {
        char shape[256];

        ipuof_shape_format(shape, sizeof shape, (int)w->n_dims, w->dims);
        return ipuof_err_set(c, IPUOF_E_SHAPE, "client",
                             "weight '%s' of model '%s' is %s of %s, %llu bytes, but the "
                             "buffer given holds %zu",
                             rs->name, rs->m->name, shape,
                             ipuof_dtype_name(ipuof_wm_from_wire(&ipuof_wm_dtype, w->dtype, 0)),
                             (unsigned long long)w->bytes, rs->bytes);
    }
    rs->iov.iov_base = rs->dst;
    rs->iov.iov_len = payload_len;
    *iov = &rs->iov;
    *iovcnt = payload_len > 0 ? 1 : 0;
    return IPUOF_OK;
}

#define GRADIENT_PREFIX "gradient:"
#define GRADIENT_NAME_MAX 1024

/* A read of weight or state tensor name; weights are checked against the compile's list
 * first, state is left to the daemon (the client does not list it). is_state 2: the
 * gradient of weight name, asked for as "gradient:<name>" of a training model. */
static int
read_named(ipuof_model *m, const char *name, void *dst, size_t bytes, int is_state)
{
    char gname[GRADIENT_NAME_MAX];
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__ReadWeightsRequest rw = IPUOF__READ_WEIGHTS_REQUEST__INIT;
    struct read_sink rs = {.m = m, .name = name, .dst = dst, .bytes = bytes};
    struct ipuof_sink sink = {.place = place_weight, .arg = &rs};
    const struct ipuof_tinfo *w = NULL;
    Ipuof__Header *reply = NULL;
    ipuof_client *c;
    char *names[1];
    int rc;

    if (m == NULL)
        return IPUOF_E_INVAL;
    c = m->c;
    ipuof_err_clear(c);
    if (name == NULL || (dst == NULL && bytes > 0))
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "ipuof_model_read_%s() needs a name and a buffer",
                             is_state ? "state" : "weight");
    if (is_state == 2) {
        if (!m->training)
            return ipuof_err_set(c, IPUOF_E_INVAL, "client", "model '%s' does not train, so "
                                 "it has no gradients", m->name);
        if (strlen(name) + strlen(GRADIENT_PREFIX) >= sizeof gname)
            return ipuof_err_set(c, IPUOF_E_INVAL, "client", "weight name of %zu bytes: at "
                                 "most %zu", strlen(name),
                                 sizeof gname - strlen(GRADIENT_PREFIX) - 1);
    }
    rc = is_state == 1 ? check_state(m, name) : check_weight(m, name, bytes, &w);
    if (rc == IPUOF_OK)
        rc = ipuof_model_usable(m);
    if (rc != IPUOF_OK)
        return ipuof_model_settle(c, rc);
    if (is_state == 2) {
        snprintf(gname, sizeof gname, GRADIENT_PREFIX "%s", name);
        name = gname;
        rs.name = gname;
    }
    names[0] = (char *)name;
    rw.model_id = m->id;
    rw.n_names = 1;
    rw.names = names;
    req.body_case = IPUOF__HEADER__BODY_READ_WEIGHTS;
    req.read_weights = &rw;
    rc = ipuof_model_call(m, &req, IPUOF__HEADER__BODY_READ_WEIGHTS_REPLY, &sink, NULL, 0,
                          &reply);
    ipuof_frame_header_free(reply);
    return ipuof_model_settle(c, rc);
}

int
ipuof_model_read_weight(ipuof_model *m, const char *name, void *dst, size_t bytes)
{
    return read_named(m, name, dst, bytes, 0);
}

int
ipuof_model_read_state(ipuof_model *m, const char *name, void *dst, size_t bytes)
{
    return read_named(m, name, dst, bytes, 1);
}

int
ipuof_model_read_gradient(ipuof_model *m, const char *weight, void *dst, size_t bytes)
{
    return read_named(m, weight, dst, bytes, 2);
}

/* ---- write and copy ------------------------------------------------------------------- */

/* A write of weight or state tensor name (as read_named). A state tensor's dtype is the
 * daemon's to check: the step count is int64, the rest float32. */
static int
write_named(ipuof_model *m, const char *name, const void *src, size_t bytes, int is_state)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__WriteWeightsRequest ww = IPUOF__WRITE_WEIGHTS_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT;
    Ipuof__TensorInfo *tis[1] = {&ti};
    const struct ipuof_tinfo *w = NULL;
    struct iovec payload;
    Ipuof__Header *reply = NULL;
    ipuof_client *c;
    int rc;

    if (m == NULL)
        return IPUOF_E_INVAL;
    c = m->c;
    ipuof_err_clear(c);
    if (name == NULL || (src == NULL && bytes > 0))
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "ipuof_model_write_%s() needs a name and its bytes",
                             is_state ? "state" : "weight");
    rc = is_state ? check_state(m, name) : check_weight(m, name, bytes, &w);
    if (rc == IPUOF_OK)
        rc = ipuof_model_usable(m);
    if (rc != IPUOF_OK)
        return ipuof_model_settle(c, rc);
    ti.name = (char *)name;
    ti.bytes = bytes;
    if (w != NULL) {
        ti.dtype = (Ipuof__DType)ipuof_wm_to_wire(&ipuof_wm_dtype, w->dtype,
                                                  IPUOF__DTYPE__DTYPE_UNDEFINED);
        ti.n_dims = (size_t)w->rank;
        ti.dims = (int64_t *)w->dims;
    } else if (is_state) {
        ti.dtype = strcmp(name, STATE_STEP) == 0 ? IPUOF__DTYPE__DTYPE_INT64
                                                 : IPUOF__DTYPE__DTYPE_FLOAT;
    }
    ww.model_id = m->id;
    ww.n_weights = 1;
    ww.weights = tis;
    req.body_case = IPUOF__HEADER__BODY_WRITE_WEIGHTS;
    req.write_weights = &ww;
    payload.iov_base = (void *)src;
    payload.iov_len = bytes;
    rc = ipuof_model_call(m, &req, IPUOF__HEADER__BODY_WRITE_WEIGHTS_REPLY, NULL, &payload,
                          bytes > 0 ? 1 : 0, &reply);
    ipuof_frame_header_free(reply);
    return ipuof_model_settle(c, rc);
}

int
ipuof_model_write_weight(ipuof_model *m, const char *name, const void *src, size_t bytes)
{
    return write_named(m, name, src, bytes, 0);
}

int
ipuof_model_write_state(ipuof_model *m, const char *name, const void *src, size_t bytes)
{
    return write_named(m, name, src, bytes, 1);
}

int
ipuof_model_copy_weights(ipuof_model *dst, ipuof_model *src)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__CopyWeightsRequest cw = IPUOF__COPY_WEIGHTS_REQUEST__INIT;
    Ipuof__Header *reply = NULL;
    ipuof_client *c;
    int rc;

    if (dst == NULL)
        return IPUOF_E_INVAL;
    c = dst->c;
    ipuof_err_clear(c);
    if (src == NULL || src->c != c)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "ipuof_model_copy_weights() copies between two models of one "
                             "client handle%s",
                             src == NULL ? "; the source is NULL"
                                         : "; for models of two handles, read the weights "
                                           "from one and write them to the other");
    rc = ipuof_model_usable(dst);
    if (rc == IPUOF_OK)
        rc = ipuof_model_usable(src);
    if (rc != IPUOF_OK)
        return ipuof_model_settle(c, rc);
    cw.dst_model_id = dst->id;
    cw.src_model_id = src->id;
    req.body_case = IPUOF__HEADER__BODY_COPY_WEIGHTS;
    req.copy_weights = &cw;
    rc = ipuof_model_call(dst, &req, IPUOF__HEADER__BODY_COPY_WEIGHTS_REPLY, NULL, NULL, 0,
                          &reply);
    ipuof_frame_header_free(reply);
    return ipuof_model_settle(c, rc);
}

/* ---- one sized payload ------------------------------------------------------------------ */

/* Where a reply's one payload goes (a SaveModelReply's model, a TraceReply's trace): one
 * allocation of the size the reply announces plus a NUL, owned by the sink until the caller
 * takes it. */
struct bytes_sink {
    Ipuof__Header__BodyCase want;
    const char *noun;            /* "model", "trace": what the bytes are, for errors */
    char *buf;
    size_t len;
    struct iovec iov;
};

/* The byte count a reply of the sink's kind announces. */
static uint64_t
announced_bytes(const Ipuof__Header *h)
{
    switch (h->body_case) {
    case IPUOF__HEADER__BODY_SAVE_MODEL_REPLY:
        return h->save_model_reply->bytes;
    case IPUOF__HEADER__BODY_TRACE_REPLY:
        return h->trace_reply->bytes;
    default:
        return 0;
    }
}

/* place() of a sized payload: the reply's byte count must be its payload's; the buffer is
 * allocated to fit. Frames of another body are left to the caller. */
static int
place_bytes(void *arg, ipuof_client *c, const char *what, const Ipuof__Header *h,
            uint32_t payload_len, struct iovec **iov, int *iovcnt)
{
    struct bytes_sink *bs = arg;

    *iovcnt = 0;
    if (h->body_case != bs->want)
        return IPUOF_OK;
    if (announced_bytes(h) != payload_len || payload_len == 0)
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                             "ipuofd at %s answered %s announcing %llu %s bytes with %u "
                             "payload bytes", c->address, what,
                             (unsigned long long)announced_bytes(h), bs->noun, payload_len);
    free(bs->buf);
    bs->buf = malloc((size_t)payload_len + 1);
    if (bs->buf == NULL)
        return ipuof_err_set(c, IPUOF_E_NOMEM, "client",
                             "out of memory for %u %s bytes", payload_len, bs->noun);
    bs->buf[payload_len] = '\0';
    bs->len = payload_len;
    bs->iov.iov_base = bs->buf;
    bs->iov.iov_len = payload_len;
    *iov = &bs->iov;
    *iovcnt = 1;
    return IPUOF_OK;
}

/* See model_internal.h. */
int
ipuof_model_fetch_bytes(ipuof_model *m, Ipuof__Header *req, Ipuof__Header__BodyCase want,
                        const char *noun, char **bytes, size_t *len)
{
    struct bytes_sink bs = {.want = want, .noun = noun};
    struct ipuof_sink sink = {.place = place_bytes, .arg = &bs};
    Ipuof__Header *reply = NULL;
    int rc = ipuof_model_call(m, req, want, &sink, NULL, 0, &reply);

    if (rc == IPUOF_OK && bs.buf == NULL)
        rc = ipuof_err_set(m->c, IPUOF_E_PROTO, "protocol",
                           "ipuofd at %s answered without the %s bytes", m->c->address, noun);
    if (rc == IPUOF_OK) {
        *bytes = bs.buf;
        *len = bs.len;
        bs.buf = NULL;
    }
    free(bs.buf);
    ipuof_frame_header_free(reply);
    return rc;
}

/* ---- save ------------------------------------------------------------------------------ */

int
ipuof_model_save_onnx_buffer(ipuof_model *m, void **bytes, size_t *len)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__SaveModelRequest sm = IPUOF__SAVE_MODEL_REQUEST__INIT;
    char *buf = NULL;
    ipuof_client *c;
    int rc;

    if (bytes != NULL)
        *bytes = NULL;
    if (len != NULL)
        *len = 0;
    if (m == NULL)
        return IPUOF_E_INVAL;
    c = m->c;
    ipuof_err_clear(c);
    if (bytes == NULL || len == NULL)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "ipuof_model_save_onnx_buffer() needs places for the bytes and "
                             "their length");
    rc = ipuof_model_usable(m);
    if (rc == IPUOF_OK) {
        sm.model_id = m->id;
        req.body_case = IPUOF__HEADER__BODY_SAVE_MODEL;
        req.save_model = &sm;
        rc = ipuof_model_fetch_bytes(m, &req, IPUOF__HEADER__BODY_SAVE_MODEL_REPLY, "model",
                                     &buf, len);
    }
    if (rc == IPUOF_OK)
        *bytes = buf;
    return ipuof_model_settle(c, rc);
}

/* See model_internal.h. */
int
ipuof_file_write(ipuof_client *c, const char *path, const void *buf, size_t len)
{
    const char *step = "create";

    if (freshfile_write(path, buf, len, &step) == 0)
        return IPUOF_OK;
    return ipuof_err_set(c, errno == ENOENT ? IPUOF_E_NOTFOUND : IPUOF_E_IO, "client",
                         "cannot %s '%s': %s", step, path, ERRTEXT(errno));
}

int
ipuof_model_save_onnx(ipuof_model *m, const char *path)
{
    void *buf = NULL;
    size_t len = 0;
    int rc;

    if (m == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(m->c);
    if (path == NULL)
        return ipuof_err_set(m->c, IPUOF_E_INVAL, "client",
                             "ipuof_model_save_onnx() needs a file name");
    rc = ipuof_model_save_onnx_buffer(m, &buf, &len);
    if (rc == IPUOF_OK)
        rc = ipuof_file_write(m->c, path, buf, len);
    free(buf);
    return rc;
}
