/*
 * tensor_pb.c — ONNX TensorProto <-> host tensor conversion, and the .pb file helpers.
 *
 * Does: validate dims, dtype and data length of a TensorProto before copying its data
 * (raw_data or typed fields) into an aligned buffer; encode a tensor as raw_data.
 * Does not: handle external data, segments, strings or dtypes sim does not compute with.
 * Assumes a little-endian host, as ONNX raw_data is little-endian.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pb_int.h"
#include "sim_int.h"
#include "tensor_pb.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "sim assumes a little-endian host (ONNX raw_data is little-endian)"
#endif

void
sim_const_free(struct sim_const *c)
{
    if (c == NULL)
        return;
    if (!c->view)
        free(c->data);
    free(c);
}

/* Copies n typed elements (converted to dtype) from a protobuf repeated field. */
static int
copy_typed(struct sim_const *c, const Onnx__TensorProto *t, const char *what,
           struct sim_err *err)
{
    int64_t n = c->numel;

    switch (c->dtype) {
    case SIM_DTYPE_FLOAT:
        if ((int64_t)t->n_float_data != n)
            goto count;
        if (n > 0)
            memcpy(c->data, t->float_data, (size_t)n * sizeof(float));
        return 0;
    case SIM_DTYPE_INT64:
        if ((int64_t)t->n_int64_data != n)
            goto count;
        if (n > 0)
            memcpy(c->data, t->int64_data, (size_t)n * sizeof(int64_t));
        return 0;
    case SIM_DTYPE_INT32: case SIM_DTYPE_INT8: case SIM_DTYPE_UINT8: case SIM_DTYPE_BOOL:
        if ((int64_t)t->n_int32_data != n)
            goto count;
        for (int64_t i = 0; i < n; i++)
            sim_put_i64(c->dtype, c->data, i, t->int32_data[i]);
        return 0;
    case SIM_DTYPE_FLOAT16:     /* ONNX: int32_data holds each half's 16 bits */
        if ((int64_t)t->n_int32_data != n)
            goto count;
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)c->data)[i] = (uint16_t)t->int32_data[i];
        return 0;
    default:
        break;
    }
count:
    return sim_err_set(err, IPUOF_E_INVAL,
                       "%s: holds %lld elements but its shape needs %lld and it has no "
                       "raw_data", what,
                       (long long)(c->dtype == SIM_DTYPE_FLOAT ? (long long)t->n_float_data
                                   : c->dtype == SIM_DTYPE_INT64 ? (long long)t->n_int64_data
                                   : (long long)t->n_int32_data),
                       (long long)n);
}

/* The elements t carries in the typed field that holds dtype. */
static uint64_t
typed_count(const Onnx__TensorProto *t, int dtype)
{
    switch (dtype) {
    case SIM_DTYPE_FLOAT: return t->n_float_data;
    case SIM_DTYPE_INT64: return t->n_int64_data;
    case SIM_DTYPE_INT32: case SIM_DTYPE_INT8: case SIM_DTYPE_UINT8: case SIM_DTYPE_BOOL:
    case SIM_DTYPE_FLOAT16:
        return t->n_int32_data;
    default: return 0;
    }
}

/* Validates dtype, location, rank, dims and the length of the data t carries (raw_data or
 * its typed field) against them; fills c's dtype, shape, numel and bytes. */
static int
pb_header(const Onnx__TensorProto *t, const char *what, struct sim_const *c,
          struct sim_err *err)
{
    int dtype = t->has_data_type ? t->data_type : 0;
    uint64_t bytes;

    if (!sim_dtype_ok(dtype))
        return sim_err_set(err, IPUOF_E_UNSUPPORTED,
                           "%s: dtype %s (%d) is not supported (float, float16, uint8, int8, "
                           "int32, int64 and bool are)", what, sim_onnx_dtype_name(dtype), dtype);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return sim_err_set(err, IPUOF_E_UNSUPPORTED,
                           "%s: external data is not supported; save the model with its "
                           "tensors inline", what);
    if (t->segment != NULL)
        return sim_err_set(err, IPUOF_E_UNSUPPORTED, "%s: segmented tensors are not supported",
                           what);
    if (t->n_dims > SIM_MAX_RANK)
        return sim_err_set(err, IPUOF_E_TOO_LARGE, "%s: rank %zu exceeds the limit of %d", what,
                           t->n_dims, SIM_MAX_RANK);
    c->dtype = dtype;
    c->shape.rank = (int)t->n_dims;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return sim_err_set(err, IPUOF_E_INVAL, "%s: dim %zu is negative (%lld)", what, i,
                               (long long)t->dims[i]);
        c->shape.d[i] = t->dims[i];
    }
    if (!sim_shape_numel(&c->shape, &c->numel))
        return sim_err_set(err, IPUOF_E_TOO_LARGE, "%s: more than %lld elements", what,
                           (long long)SIM_MAX_ELEMS);
    bytes = (uint64_t)c->numel * sim_dtype_size(dtype);
    if (t->has_raw_data && t->raw_data.len != bytes)
        return sim_err_set(err, IPUOF_E_INVAL,
                           "%s: raw_data holds %zu bytes but shape and dtype need %llu", what,
                           t->raw_data.len, (unsigned long long)bytes);
    /* The data must be there before anyone allocates for it: a few bytes of dims must not
     * make the loader ask for gigabytes. */
    if (!t->has_raw_data && typed_count(t, dtype) != (uint64_t)c->numel)
        return sim_err_set(err, IPUOF_E_INVAL,
                           "%s: holds %llu elements but its shape needs %lld and it has no "
                           "raw_data", what, (unsigned long long)typed_count(t, dtype),
                           (long long)c->numel);
    c->bytes = (size_t)bytes;
    return 0;
}

size_t
sim_pb_tensor_bytes(const Onnx__TensorProto *t)
{
    struct sim_const c = { 0 };

    return pb_header(t, "", &c, NULL) == 0 ? c.bytes : 0;
}

int
sim_const_from_pb(const Onnx__TensorProto *t, const char *what, void *dest,
                  struct sim_const **out, struct sim_err *err)
{
    struct sim_const *c = calloc(1, sizeof(*c));
    int rc;

    *out = NULL;
    if (c == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "%s: out of memory", what);
    rc = pb_header(t, what, c, err);
    if (rc != 0)
        goto fail;
    if (dest != NULL) {
        c->data = dest;
        c->view = true;
    } else {
        c->data = sim_aligned_alloc(c->bytes);
        if (c->data == NULL) {
            rc = sim_err_set(err, IPUOF_E_NOMEM, "%s: out of memory", what);
            goto fail;
        }
    }
    if (t->has_raw_data) {
        if (c->bytes > 0)
            memcpy(c->data, t->raw_data.data, c->bytes);
    } else {
        rc = copy_typed(c, t, what, err);
        if (rc != 0)
            goto fail;
    }
    *out = c;
    return 0;
fail:
    sim_const_free(c);
    return rc;
}

void
sim_host_tensor_fini(struct sim_host_tensor *t)
{
    if (t == NULL)
        return;
    free(t->name);
    free(t->data);
    memset(t, 0, sizeof(*t));
}

int
sim_tensor_pb_decode(const void *buf, size_t len, struct sim_host_tensor *out,
                     struct sim_err *err)
{
    Onnx__TensorProto *t = NULL;
    struct sim_const *c = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    if (len > SIM_MAX_MODEL_BYTES)
        return sim_err_set(err, IPUOF_E_TOO_LARGE, "tensor file of %zu bytes is over the "
                           "%zu-byte limit", len, SIM_MAX_MODEL_BYTES);
    t = onnx__tensor_proto__unpack(NULL, len, buf);
    if (t == NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "not a serialized ONNX TensorProto");
    rc = sim_const_from_pb(t, "tensor", NULL, &c, err);
    if (rc != 0)
        goto out;
    out->name = sim_strdup(t->name);
    if (out->name == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        goto out;
    }
    out->dtype = c->dtype;
    out->rank = c->shape.rank;
    memcpy(out->dims, c->shape.d, sizeof(out->dims));
    out->numel = c->numel;
    out->bytes = c->bytes;
    out->data = c->data;
    c->data = NULL;
out:
    sim_const_free(c);
    onnx__tensor_proto__free_unpacked(t, NULL);
    if (rc != 0)
        sim_host_tensor_fini(out);
    return rc;
}

/* Reads a whole file into a malloc'd buffer; caps the size at SIM_MAX_MODEL_BYTES. */
static int
read_file(const char *path, void **buf, size_t *len, struct sim_err *err)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    unsigned char *p = NULL;
    int rc = 0;

    *buf = NULL;
    *len = 0;
    if (f == NULL)
        return sim_err_set(err, IPUOF_E_IO, "cannot open %s: %s", path, strerror(errno));
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = sim_err_set(err, IPUOF_E_IO, "%s is not a regular file", path);
        goto out;
    }
    if ((uint64_t)st.st_size > SIM_MAX_MODEL_BYTES) {
        rc = sim_err_set(err, IPUOF_E_TOO_LARGE, "%s is over the %zu-byte limit", path,
                         SIM_MAX_MODEL_BYTES);
        goto out;
    }
    p = malloc((size_t)st.st_size + 1);
    if (p == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory reading %s", path);
        goto out;
    }
    if (fread(p, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        rc = sim_err_set(err, IPUOF_E_IO, "cannot read %s", path);
        free(p);
        p = NULL;
        goto out;
    }
    *buf = p;
    *len = (size_t)st.st_size;
out:
    fclose(f);
    return rc;
}

int
sim_tensor_pb_read_file(const char *path, struct sim_host_tensor *out, struct sim_err *err)
{
    void *buf;
    size_t len;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = read_file(path, &buf, &len, err);
    if (rc != 0)
        return rc;
    rc = sim_tensor_pb_decode(buf, len, out, err);
    if (rc != 0)
        sim_err_prefix(err, "%s: ", path);
    free(buf);
    return rc;
}

int
sim_tensor_pb_encode(const char *name, int dtype, int rank, const int64_t *dims,
                     const void *data, void **out, size_t *len, struct sim_err *err)
{
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    struct sim_shape s;
    int64_t numel;
    int64_t dimcopy[SIM_MAX_RANK];
    size_t n;
    void *buf;

    *out = NULL;
    *len = 0;
    if (!sim_dtype_ok(dtype))
        return sim_err_set(err, IPUOF_E_UNSUPPORTED, "cannot encode dtype %d", dtype);
    if (rank < 0 || rank > SIM_MAX_RANK)
        return sim_err_set(err, IPUOF_E_INVAL, "rank %d out of range", rank);
    s.rank = rank;
    for (int i = 0; i < rank; i++) {
        s.d[i] = dims[i];
        dimcopy[i] = dims[i];
    }
    if (!sim_shape_numel(&s, &numel))
        return sim_err_set(err, IPUOF_E_TOO_LARGE, "tensor shape is invalid or too large");
    t.n_dims = (size_t)rank;
    t.dims = dimcopy;
    t.has_data_type = 1;
    t.data_type = dtype;
    t.name = (char *)(name != NULL ? name : "");
    t.has_raw_data = 1;
    t.raw_data.len = (size_t)numel * sim_dtype_size(dtype);
    t.raw_data.data = (uint8_t *)data;
    n = onnx__tensor_proto__get_packed_size(&t);
    buf = malloc(n > 0 ? n : 1);
    if (buf == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory encoding a tensor");
    onnx__tensor_proto__pack(&t, buf);
    *out = buf;
    *len = n;
    return 0;
}

int
sim_tensor_pb_write_file(const char *path, const char *name, int dtype, int rank,
                         const int64_t *dims, const void *data, struct sim_err *err)
{
    void *buf;
    size_t len;
    FILE *f;
    int rc = sim_tensor_pb_encode(name, dtype, rank, dims, data, &buf, &len, err);

    if (rc != 0)
        return rc;
    f = fopen(path, "wb");
    if (f == NULL) {
        rc = sim_err_set(err, IPUOF_E_IO, "cannot create %s: %s", path, strerror(errno));
        goto out;
    }
    if (fwrite(buf, 1, len, f) != len)
        rc = sim_err_set(err, IPUOF_E_IO, "cannot write %s", path);
    if (fclose(f) != 0 && rc == 0)
        rc = sim_err_set(err, IPUOF_E_IO, "cannot write %s", path);
out:
    free(buf);
    return rc;
}
