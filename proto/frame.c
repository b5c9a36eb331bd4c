/*
 * frame.c — frame head codec and bounded protobuf-c unpacking. No I/O, no globals.
 *
 * protobuf-c has no size or nesting limit of its own, so this file supplies both: the
 * head's lengths are checked before the caller buffers anything, the unpack runs under an
 * allocator with a byte budget proportional to the header length, and the decoded message
 * is walked (depth-bounded) to check every string and repeated field against the limits.
 */
#include "frame.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipuof/status.h"

/* The unpacked message may use at most this many bytes per header byte, plus a floor. */
#define UNPACK_BUDGET_FACTOR 16u
#define UNPACK_BUDGET_FLOOR (64u * 1024u)
#define MAX_NESTING 8

static void
seterr(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static uint32_t
get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void
put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void
ipuof_frame_limits_default(struct ipuof_frame_limits *lim)
{
    lim->max_header = IPUOF_DEFAULT_MAX_HEADER;
    lim->max_payload = IPUOF_DEFAULT_MAX_PAYLOAD;
    lim->max_string = IPUOF_DEFAULT_MAX_STRING;
    lim->max_repeated = IPUOF_DEFAULT_MAX_REPEATED;
}

int
ipuof_frame_head_decode(const uint8_t *buf, size_t len, const struct ipuof_frame_limits *lim,
                        struct ipuof_frame_head *out, char *err, size_t errlen)
{
    uint32_t magic;

    if (len < IPUOF_FRAME_HEAD_LEN)
        return IPUOF_FRAME_NEED_MORE;
    magic = get_be32(buf);
    out->version = (uint16_t)(buf[4] << 8 | buf[5]);
    out->flags = (uint16_t)(buf[6] << 8 | buf[7]);
    out->header_len = get_be32(buf + 8);
    out->payload_len = get_be32(buf + 12);
    if (magic != IPUOF_FRAME_MAGIC) {
        seterr(err, errlen,
               "bad frame magic 0x%08x (expected 0x%08x \"IPUF\"): not an ipuofd client",
               magic, IPUOF_FRAME_MAGIC);
        return IPUOF_E_PROTO;
    }
    if (out->version != IPUOF_PROTOCOL_VERSION) {
        seterr(err, errlen, "protocol version %u is not supported; this peer speaks version %u",
               out->version, IPUOF_PROTOCOL_VERSION);
        return IPUOF_E_VERSION;
    }
    if (out->flags != 0) {
        seterr(err, errlen, "frame flags 0x%04x are reserved and must be 0", out->flags);
        return IPUOF_E_PROTO;
    }
    if (out->header_len == 0) {
        seterr(err, errlen, "frame has an empty header; every frame carries a Header message");
        return IPUOF_E_PROTO;
    }
    if (out->header_len > lim->max_header) {
        seterr(err, errlen, "frame header of %u bytes is over the limit of %u bytes",
               out->header_len, lim->max_header);
        return IPUOF_E_TOO_LARGE;
    }
    if (out->payload_len > lim->max_payload) {
        seterr(err, errlen,
               "frame payload of %u bytes is over the limit of %u bytes; send it in chunks",
               out->payload_len, lim->max_payload);
        return IPUOF_E_TOO_LARGE;
    }
    return IPUOF_OK;
}

void
ipuof_frame_head_encode(uint8_t *out, uint32_t header_len, uint32_t payload_len)
{
    put_be32(out, IPUOF_FRAME_MAGIC);
    out[4] = (uint8_t)(IPUOF_PROTOCOL_VERSION >> 8);
    out[5] = (uint8_t)IPUOF_PROTOCOL_VERSION;
    out[6] = 0;
    out[7] = 0;
    put_be32(out + 8, header_len);
    put_be32(out + 12, payload_len);
}

/* ---- bounded unpack ------------------------------------------------------------------- */

struct budget {
    size_t left;
};

static void *
budget_alloc(void *data, size_t size)
{
    struct budget *b = data;

    if (size > b->left)
        return NULL;
    b->left -= size;
    return malloc(size);
}

static void
budget_free(void *data, void *ptr)
{
    (void)data;
    free(ptr);
}

static int
check_message(const ProtobufCMessage *m, const struct ipuof_frame_limits *lim, int depth,
              char *err, size_t errlen)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;

    if (depth > MAX_NESTING) {
        seterr(err, errlen, "message nesting deeper than %d levels", MAX_NESTING);
        return IPUOF_E_PROTO;
    }
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m;
        size_t count = 1;
        const void *elems;

        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which = *(const uint32_t *)(base + f->quantifier_offset);
            if (which != f->id)
                continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            count = *(const size_t *)(base + f->quantifier_offset);
            if (count > lim->max_repeated) {
                seterr(err, errlen, "field %s.%s has %zu elements; the limit is %u", d->name,
                       f->name, count, lim->max_repeated);
                return IPUOF_E_TOO_LARGE;
            }
            elems = *(const void *const *)(base + f->offset);
        } else {
            elems = base + f->offset;
        }
        for (size_t k = 0; k < count; k++) {
            if (f->type == PROTOBUF_C_TYPE_STRING) {
                const char *s = ((const char *const *)elems)[k];
                size_t n = s ? strlen(s) : 0;
                if (n > lim->max_string) {
                    seterr(err, errlen, "string %s.%s is %zu bytes long; the limit is %u",
                           d->name, f->name, n, lim->max_string);
                    return IPUOF_E_TOO_LARGE;
                }
            } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
                const ProtobufCMessage *sub = ((const ProtobufCMessage *const *)elems)[k];
                int rc;
                if (sub == NULL)
                    continue;
                rc = check_message(sub, lim, depth + 1, err, errlen);
                if (rc != IPUOF_OK)
                    return rc;
            }
        }
    }
    return IPUOF_OK;
}

Ipuof__Header *
ipuof_frame_header_unpack(const uint8_t *buf, size_t len, const struct ipuof_frame_limits *lim,
                          char *err, size_t errlen)
{
    struct budget b = {.left = len * UNPACK_BUDGET_FACTOR + UNPACK_BUDGET_FLOOR};
    ProtobufCAllocator alloc = {.alloc = budget_alloc, .free = budget_free, .allocator_data = &b};
    Ipuof__Header *h;

    if (len > lim->max_header) {
        seterr(err, errlen, "frame header of %zu bytes is over the limit of %u bytes", len,
               lim->max_header);
        return NULL;
    }
    h = ipuof__header__unpack(&alloc, len, buf);
    if (h == NULL) {
        seterr(err, errlen, "frame header (%zu bytes) is not a valid ipuof.Header message", len);
        return NULL;
    }
    if (check_message(&h->base, lim, 0, err, errlen) != IPUOF_OK) {
        ipuof__header__free_unpacked(h, &alloc);
        return NULL;
    }
    return h;
}

void
ipuof_frame_header_free(Ipuof__Header *h)
{
    /* The budget allocator frees with free(); the default allocator does the same. */
    if (h != NULL)
        ipuof__header__free_unpacked(h, NULL);
}

int
ipuof_frame_pack(const Ipuof__Header *h, uint32_t payload_len, uint8_t **out, size_t *outlen)
{
    size_t n = ipuof__header__get_packed_size(h);
    uint8_t *buf;

    *out = NULL;
    *outlen = 0;
    if (n > UINT32_MAX)
        return IPUOF_E_TOO_LARGE;
    buf = malloc(IPUOF_FRAME_HEAD_LEN + n);
    if (buf == NULL)
        return IPUOF_E_NOMEM;
    ipuof_frame_head_encode(buf, (uint32_t)n, payload_len);
    ipuof__header__pack(h, buf + IPUOF_FRAME_HEAD_LEN);
    *out = buf;
    *outlen = IPUOF_FRAME_HEAD_LEN + n;
    return IPUOF_OK;
}

int
ipuof_frame_parse(const uint8_t *buf, size_t len, const struct ipuof_frame_limits *lim,
                  struct ipuof_frame_head *head, Ipuof__Header **hdr, size_t *consumed,
                  char *err, size_t errlen)
{
    int rc;

    *hdr = NULL;
    *consumed = 0;
    rc = ipuof_frame_head_decode(buf, len, lim, head, err, errlen);
    if (rc != IPUOF_OK)
        return rc;
    if (len - IPUOF_FRAME_HEAD_LEN < head->header_len)
        return IPUOF_FRAME_NEED_MORE;
    *hdr = ipuof_frame_header_unpack(buf + IPUOF_FRAME_HEAD_LEN, head->header_len, lim, err,
                                     errlen);
    if (*hdr == NULL)
        return IPUOF_E_PROTO;
    *consumed = IPUOF_FRAME_HEAD_LEN + (size_t)head->header_len;
    return IPUOF_OK;
}

const char *
ipuof_frame_body_name(const Ipuof__Header *h)
{
    const ProtobufCFieldDescriptor *f;

    if (h->body_case == IPUOF__HEADER__BODY__NOT_SET)
        return "(empty)";
    f = protobuf_c_message_descriptor_get_field(&ipuof__header__descriptor, h->body_case);
    return f != NULL ? f->name : "(unknown)";
}
