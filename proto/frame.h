/*
 * frame.h — the ipuofd frame codec, shared by the daemon and the client library.
 *
 * It does no I/O: callers hand it bytes and get back a decoded frame head or protobuf
 * header, or an error sentence. Every length is checked against the caller's limits
 * before anything is allocated, and the protobuf unpack runs under a byte budget so a
 * small hostile header cannot expand into a large allocation.
 *
 * Frame layout (all integers big-endian), see proto/ipuof.proto:
 *   magic "IPUF" | version u16 | flags u16 | header_len u32 | payload_len u32 | header | payload
 */
#ifndef IPUOF_FRAME_H
#define IPUOF_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "ipuof.pb-c.h"

#define IPUOF_PROTOCOL_VERSION 1
#define IPUOF_FRAME_MAGIC 0x49505546u /* "IPUF" */
#define IPUOF_FRAME_HEAD_LEN 16

/* Returned by ipuof_frame_head_decode() when fewer than IPUOF_FRAME_HEAD_LEN bytes are given. */
#define IPUOF_FRAME_NEED_MORE (-1)

struct ipuof_frame_limits {
    uint32_t max_header;     /* largest protobuf header accepted */
    uint32_t max_payload;    /* largest raw payload accepted */
    uint32_t max_string;     /* longest string field accepted (bytes) */
    uint32_t max_repeated;   /* most elements in one repeated field */
};

/* Limits used by a peer that has not configured its own. */
#define IPUOF_DEFAULT_MAX_HEADER (1u << 20)
#define IPUOF_DEFAULT_MAX_PAYLOAD (256u << 20)
#define IPUOF_DEFAULT_MAX_STRING 4096u
#define IPUOF_DEFAULT_MAX_REPEATED 65536u

void ipuof_frame_limits_default(struct ipuof_frame_limits *lim);

struct ipuof_frame_head {
    uint16_t version;
    uint16_t flags;
    uint32_t header_len;
    uint32_t payload_len;
};

/*
 * Decodes and checks a frame head from buf[0..len). Returns IPUOF_OK, IPUOF_FRAME_NEED_MORE
 * when len < IPUOF_FRAME_HEAD_LEN, IPUOF_E_PROTO (bad magic, flags, empty header),
 * IPUOF_E_VERSION (the head's version is written to out->version so the caller can name
 * it) or IPUOF_E_TOO_LARGE. On error a sentence goes to err (may be NULL).
 */
int ipuof_frame_head_decode(const uint8_t *buf, size_t len, const struct ipuof_frame_limits *lim,
                            struct ipuof_frame_head *out, char *err, size_t errlen);

/* Writes a frame head for the given lengths into out[0..IPUOF_FRAME_HEAD_LEN). */
void ipuof_frame_head_encode(uint8_t *out, uint32_t header_len, uint32_t payload_len);

/*
 * Unpacks a protobuf Header of len bytes and checks every string and repeated field
 * against lim. Returns the message (free with ipuof_frame_header_free()) or NULL with a
 * sentence in err. The unpack allocates at most a fixed multiple of len.
 */
Ipuof__Header *ipuof_frame_header_unpack(const uint8_t *buf, size_t len,
                                         const struct ipuof_frame_limits *lim, char *err,
                                         size_t errlen);
void ipuof_frame_header_free(Ipuof__Header *h);

/*
 * Encodes a whole frame head + header (without the payload, which the caller sends
 * after it) into a malloc'd buffer *out of *outlen bytes, caller-owned.
 * Returns IPUOF_OK, IPUOF_E_NOMEM or IPUOF_E_TOO_LARGE (header over 4 GiB).
 */
int ipuof_frame_pack(const Ipuof__Header *h, uint32_t payload_len, uint8_t **out, size_t *outlen);

/*
 * Parses one complete frame head + header from buf[0..len) (the payload is not consumed).
 * Returns IPUOF_OK with *hdr set (caller frees) and *consumed = head + header bytes,
 * IPUOF_FRAME_NEED_MORE, or an error status with a sentence in err.
 */
int ipuof_frame_parse(const uint8_t *buf, size_t len, const struct ipuof_frame_limits *lim,
                      struct ipuof_frame_head *head, Ipuof__Header **hdr, size_t *consumed,
                      char *err, size_t errlen);

/* Name of the body carried by a header ("attach", "status", ...), for logs and errors. */
const char *ipuof_frame_body_name(const Ipuof__Header *h);

#endif /* IPUOF_FRAME_H */
