/*
 * tensor_pb.h — ONNX TensorProto (.pb) files: decode one into dtype / shape / data, encode
 * one from them. Used by the ONNX importer (initializers), the conformance runners (the
 * ONNX backend test layout: test_data_set_N/input_K.pb, output_K.pb) and tools.
 *
 * Only dtypes sim supports are decoded (enum sim_dtype); others are refused with
 * IPUOF_E_UNSUPPORTED naming the dtype. Data comes from raw_data (little-endian) or the
 * typed fields; external data and segments are refused. Every count and size is checked
 * against the SIM_MAX_* limits before anything is allocated from it.
 * Does not: read models (onnx_load.c does) or convert between dtypes.
 */
#ifndef SIM_TENSOR_PB_H
#define SIM_TENSOR_PB_H

#include <stddef.h>
#include <stdint.h>

#include "sim.h"

/* A decoded tensor. data and name are owned by the struct: release with
 * sim_host_tensor_fini(). */
struct sim_host_tensor {
    char *name;                 /* TensorProto.name, "" when absent */
    int dtype;                  /* enum sim_dtype */
    int rank;
    int64_t dims[SIM_MAX_RANK];
    int64_t numel;
    size_t bytes;
    void *data;                 /* SIM_ALIGN-aligned, at least one byte */
};

/* Frees what t owns and zeroes it; accepts a zeroed struct. */
void sim_host_tensor_fini(struct sim_host_tensor *t);

/* Decodes serialized TensorProto bytes (borrowed for the call) into *out (fully
 * overwritten; on error left zeroed). Errors: IPUOF_E_INVAL (not a TensorProto, sizes
 * inconsistent), IPUOF_E_UNSUPPORTED (dtype, external data), IPUOF_E_TOO_LARGE, NOMEM. */
int sim_tensor_pb_decode(const void *buf, size_t len, struct sim_host_tensor *out,
                         struct sim_err *err);

/* Reads the file at path and decodes it as above. IPUOF_E_IO when it cannot be read. */
int sim_tensor_pb_read_file(const char *path, struct sim_host_tensor *out,
                            struct sim_err *err);

/*
 * Encodes a tensor (name may be NULL; data holds numel * sim_dtype_size(dtype) bytes,
 * borrowed) as TensorProto bytes with raw_data. *out is caller-owned (free()), *len its
 * length.
 */
int sim_tensor_pb_encode(const char *name, int dtype, int rank, const int64_t *dims,
                         const void *data, void **out, size_t *len, struct sim_err *err);

/* Encodes as above and writes the file at path (created or truncated). */
int sim_tensor_pb_write_file(const char *path, const char *name, int dtype, int rank,
                             const int64_t *dims, const void *data, struct sim_err *err);

#endif /* SIM_TENSOR_PB_H */
