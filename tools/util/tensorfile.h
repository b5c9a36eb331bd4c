/*
 * tensorfile.h — ONNX TensorProto files (.pb), as in the ONNX backend test data
 * (test_data_set_N/input_K.pb, output_K.pb): read one into a dtype, shape and bytes, write one
 * with name, dims, data_type and raw_data.
 *
 * Dtypes are those of libipuof-client (enum ipuof_dtype: float, float16, uint8, int8, int32,
 * int64, bool); others, external data and segments are refused with a sentence. Data is
 * read from raw_data (little-endian) or the typed fields (float_data, int64_data,
 * int32_data; float16 in int32_data as each half's 16 bits, as ONNX stores it).
 */
#ifndef TOOLS_TENSORFILE_H
#define TOOLS_TENSORFILE_H

#include <stddef.h>
#include <stdint.h>

#define TENSORFILE_MAX_RANK 8

/* A tensor read from a file. Owns name and data: release with tensorfile_free(). */
struct tensorfile {
    char *name;                       /* TensorProto.name, "" when absent */
    int dtype;                        /* enum ipuof_dtype */
    int rank;
    int64_t dims[TENSORFILE_MAX_RANK];
    void *data;                       /* bytes long; at least one byte is allocated */
    size_t bytes;
};

/* Reads and decodes the TensorProto file at path into *t (overwritten; zeroed on error).
 * Returns 0, or -1 with a sentence naming the file in err[0..errlen). */
int tensorfile_read(const char *path, struct tensorfile *t, char *err, size_t errlen);

/* Writes a TensorProto (name, dims, data_type, raw_data) to path: into a new file renamed
 * over it (proto/freshfile.h: a symlink at path is replaced, never written through).
 * name and data (bytes long, which must match dtype and dims) are borrowed for the call.
 * Returns 0, or -1 with a sentence in err[0..errlen). */
int tensorfile_write(const char *path, const char *name, int dtype, int rank,
                    const int64_t *dims, const void *data, size_t bytes, char *err,
                    size_t errlen);

/* Frees what t owns and zeroes it; a zeroed struct is accepted. */
void tensorfile_free(struct tensorfile *t);

#endif /* TOOLS_TENSORFILE_H */
