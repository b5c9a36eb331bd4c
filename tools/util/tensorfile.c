/*
 * tensorfile.c — reading and writing ONNX TensorProto files for the tools (see tensorfile.h).
 *
 * Every count is checked before anything is allocated from it: the rank, each dimension, the
 * element count against the bytes the data fields actually hold. The unpacked protobuf
 * message is freed here, in the function that unpacked it. Assumes a little-endian host, as
 * ONNX raw_data is little-endian.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "freshfile.h"
#include "ipuof/client.h"
#include "onnx.pb-c.h"
#include "tensorfile.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tensorfile assumes a little-endian host (ONNX raw_data is little-endian)"
#endif

#define ERRTEXT(e) strerror_r((e), (char[128]){0}, 128)

/* Writes a printf-style sentence to err[0..errlen) and returns -1. */
static int seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
seterr(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ONNX's name of data type v ("DOUBLE"), or "?". Static. */
static const char *
onnx_type_name(int v)
{
    const ProtobufCEnumValue *e =
        protobuf_c_enum_descriptor_get_value(&onnx__tensor_proto__data_type__descriptor, v);

    return e != NULL ? e->name : "?";
}

/* Reads the whole file at path into *buf (caller-owned) of *len bytes. */
static int
slurp(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    uint8_t *data = NULL;
    int rc = -1;

    *buf = NULL;
    *len = 0;
    if (f == NULL || fstat(fileno(f), &st) != 0) {
        seterr(err, errlen, "cannot read %s: %s", path, ERRTEXT(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        seterr(err, errlen, "%s is not a regular file", path);
        goto out;
    }
    data = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
    if (data == NULL) {
        seterr(err, errlen, "out of memory reading %s (%lld bytes)", path,
               (long long)st.st_size);
        goto out;
    }
    if (st.st_size > 0 && fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        seterr(err, errlen, "cannot read %s: %s", path,
               ferror(f) ? ERRTEXT(errno) : "it shrank while being read");
        goto out;
    }
    *buf = data;
    *len = (size_t)st.st_size;
    data = NULL;
    rc = 0;
out:
    if (f != NULL)
        fclose(f);
    free(data);
    return rc;
}

/* Copies n typed values from the int32_data field into data as dtype's elements. */
static void
from_int32(int dtype, const int32_t *src, size_t n, void *data)
{
    for (size_t i = 0; i < n; i++) {
        if (dtype == IPUOF_DTYPE_INT32)
            ((int32_t *)data)[i] = src[i];
        else if (dtype == IPUOF_DTYPE_INT8)
            ((int8_t *)data)[i] = (int8_t)src[i];
        else if (dtype == IPUOF_DTYPE_BOOL)
            ((uint8_t *)data)[i] = src[i] != 0;
        else if (dtype == IPUOF_DTYPE_FLOAT16)  /* ONNX: the half's 16 bits */
            ((uint16_t *)data)[i] = (uint16_t)src[i];
        else
            ((uint8_t *)data)[i] = (uint8_t)src[i];
    }
}

/* Fills t->data (allocated here, t->bytes long) from tp's raw_data or typed field. */
static int
copy_data(const Onnx__TensorProto *tp, struct tensorfile *t, uint64_t numel, const char *path,
          char *err, size_t errlen)
{
    size_t have;

    t->data = malloc(t->bytes > 0 ? t->bytes : 1);
    if (t->data == NULL)
        return seterr(err, errlen, "out of memory for the %zu bytes of %s", t->bytes, path);
    if (tp->has_raw_data) {
        if (tp->raw_data.len != t->bytes)
            return seterr(err, errlen, "%s: raw_data holds %zu bytes but its shape and dtype "
                          "need %zu", path, tp->raw_data.len, t->bytes);
        if (t->bytes > 0)
            memcpy(t->data, tp->raw_data.data, t->bytes);
        return 0;
    }
    switch (t->dtype) {
    case IPUOF_DTYPE_FLOAT:
        have = tp->n_float_data;
        if (have == numel && numel > 0)
            memcpy(t->data, tp->float_data, t->bytes);
        break;
    case IPUOF_DTYPE_INT64:
        have = tp->n_int64_data;
        if (have == numel && numel > 0)
            memcpy(t->data, tp->int64_data, t->bytes);
        break;
    default:
        have = tp->n_int32_data;
        if (have == numel)
            from_int32(t->dtype, tp->int32_data, have, t->data);
        break;
    }
    if (have != numel)
        return seterr(err, errlen, "%s: its data field holds %zu values but its shape needs "
                      "%llu", path, have, (unsigned long long)numel);
    return 0;
}

/* Checks tp's dtype, storage and shape and fills t's description (not its data). */
static int
describe(const Onnx__TensorProto *tp, struct tensorfile *t, uint64_t *numel, const char *path,
         char *err, size_t errlen)
{
    int dt = tp->has_data_type ? tp->data_type : 0;
    uint64_t n = 1;
    size_t size;

    size = ipuof_dtype_size(dt);
    if (size == 0)
        return seterr(err, errlen, "%s: data type %d (%s) is not supported; use float, float16, "
                      "uint8, int8, int32, int64 or bool", path, dt, onnx_type_name(dt));
    if (tp->has_data_location &&
        tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return seterr(err, errlen, "%s: tensors with external data are not supported", path);
    if (tp->segment != NULL)
        return seterr(err, errlen, "%s: segmented tensors are not supported", path);
    if (tp->n_dims > TENSORFILE_MAX_RANK)
        return seterr(err, errlen, "%s: %zu dims; at most %d are supported", path, tp->n_dims,
                      TENSORFILE_MAX_RANK);
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            return seterr(err, errlen, "%s: dim %zu is negative (%lld)", path, i,
                          (long long)tp->dims[i]);
        if (tp->dims[i] != 0 && n > (SIZE_MAX / size) / (uint64_t)tp->dims[i])
            return seterr(err, errlen, "%s: the shape is too large", path);
        n *= (uint64_t)tp->dims[i];
        t->dims[i] = tp->dims[i];
    }
    t->dtype = dt;
    t->rank = (int)tp->n_dims;
    t->bytes = (size_t)(n * size);
    *numel = n;
    return 0;
}

int
tensorfile_read(const char *path, struct tensorfile *t, char *err, size_t errlen)
{
    Onnx__TensorProto *tp = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    uint64_t numel = 0;
    int rc = -1;

    memset(t, 0, sizeof *t);
    if (slurp(path, &buf, &len, err, errlen) != 0)
        goto out;
    tp = onnx__tensor_proto__unpack(NULL, len, buf);
    if (tp == NULL) {
        seterr(err, errlen, "%s is not an ONNX TensorProto file", path);
        goto out;
    }
    if (describe(tp, t, &numel, path, err, errlen) != 0 ||
        copy_data(tp, t, numel, path, err, errlen) != 0)
        goto out;
    t->name = strdup(tp->name != NULL ? tp->name : "");
    if (t->name == NULL) {
        seterr(err, errlen, "out of memory reading %s", path);
        goto out;
    }
    rc = 0;
out:
    if (rc != 0)
        tensorfile_free(t);
    if (tp != NULL)
        onnx__tensor_proto__free_unpacked(tp, NULL);
    free(buf);
    return rc;
}

int
tensorfile_write(const char *path, const char *name, int dtype, int rank, const int64_t *dims,
                const void *data, size_t bytes, char *err, size_t errlen)
{
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    uint8_t *buf = NULL;
    size_t len;
    const char *step = "create";
    int rc = -1;

    if (ipuof_dtype_size(dtype) == 0 || rank < 0 || rank > TENSORFILE_MAX_RANK)
        return seterr(err, errlen, "cannot write %s: dtype %d with %d dims is not supported",
                      path, dtype, rank);
    tp.n_dims = (size_t)rank;
    tp.dims = (int64_t *)dims;
    tp.has_data_type = 1;
    tp.data_type = dtype;
    tp.name = (char *)(name != NULL ? name : "");
    tp.has_raw_data = 1;
    tp.raw_data.len = bytes;
    tp.raw_data.data = (uint8_t *)data;
    len = onnx__tensor_proto__get_packed_size(&tp);
    buf = malloc(len > 0 ? len : 1);
    if (buf == NULL) {
        seterr(err, errlen, "out of memory encoding %s (%zu bytes)", path, len);
        goto out;
    }
    onnx__tensor_proto__pack(&tp, buf);
    rc = freshfile_write(path, buf, len, &step); /* never through a symlink at path */
    if (rc != 0)
        seterr(err, errlen, "cannot %s %s: %s", step, path, ERRTEXT(errno));
out:
    free(buf);
    return rc != 0 ? -1 : 0;
}

void
tensorfile_free(struct tensorfile *t)
{
    free(t->name);
    free(t->data);
    memset(t, 0, sizeof *t);
}
