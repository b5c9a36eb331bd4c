/*
 * onnx_build.h — a small builder of ONNX ModelProto bytes, for tests, benchmarks and tools
 * that need a model without Python: declare inputs, initializers, nodes with attributes and
 * outputs, then serialize.
 *
 * Not a validator: the bytes it writes are checked by sim_model_load() like any other
 * model. Names and data are copied when passed in. One builder is used by one thread.
 */
#ifndef SIM_ONNX_BUILD_H
#define SIM_ONNX_BUILD_H

#include <stddef.h>
#include <stdint.h>

struct sim_ob;

/* A builder for a model importing ai.onnx opset `opset`; NULL when out of memory. */
struct sim_ob *sim_ob_new(int64_t opset);

/* Frees the builder and everything it copied (NULL is a no-op). */
void sim_ob_free(struct sim_ob *b);

/* A graph input; dims[i] < 0 declares dim i symbolic ("N"). dims may be NULL if rank 0. */
int sim_ob_input(struct sim_ob *b, const char *name, int dtype, int rank, const int64_t *dims);

/* A graph output; dtype 0 leaves its type undeclared. */
int sim_ob_output(struct sim_ob *b, const char *name, int dtype);

/* A graph output of known rank whose dims are left unknown (onnx.checker wants a shape). */
int sim_ob_output_rank(struct sim_ob *b, const char *name, int dtype, int rank);

/* An initializer holding numel(dims) * sim_dtype_size(dtype) bytes of data (copied). */
int sim_ob_initializer(struct sim_ob *b, const char *name, int dtype, int rank,
                       const int64_t *dims, const void *data);

/* A node. inputs and outputs are comma-separated names; an empty name between commas is
 * an omitted optional operand ("x,,b"). Attribute calls below apply to the last node. */
int sim_ob_node(struct sim_ob *b, const char *op_type, const char *name, const char *inputs,
                const char *outputs);

/* A node with its operands as arrays (names may hold any character; "" is an omitted
 * optional operand). */
int sim_ob_node_v(struct sim_ob *b, const char *op_type, const char *name,
                  const char *const *inputs, size_t n_in, const char *const *outputs,
                  size_t n_out);

/* Puts the last node in a custom domain ("ai.graphcore"); the model then imports version 1
 * of that domain. */
int sim_ob_node_domain(struct sim_ob *b, const char *domain);

/* A metadata_props entry of the ModelProto (at most 8, key and value under 128 bytes). */
int sim_ob_metadata(struct sim_ob *b, const char *key, const char *value);

/* The ModelProto's ir_version (default 8). */
void sim_ob_ir_version(struct sim_ob *b, int64_t v);

/* Attributes of the last node; values and arrays are copied. 0 or an IPUOF_E_* code. */
int sim_ob_attr_int(struct sim_ob *b, const char *name, int64_t v);
int sim_ob_attr_float(struct sim_ob *b, const char *name, float v);
int sim_ob_attr_str(struct sim_ob *b, const char *name, const char *v);
int sim_ob_attr_ints(struct sim_ob *b, const char *name, const int64_t *v, size_t n);
int sim_ob_attr_floats(struct sim_ob *b, const char *name, const float *v, size_t n);
int sim_ob_attr_tensor(struct sim_ob *b, const char *name, int dtype, int rank,
                       const int64_t *dims, const void *data);

/* A graph attribute of the last node (Loop's body, If's branches): body is a builder whose
 * inputs, initializers, nodes and outputs make the subgraph (its opset is ignored). Takes
 * ownership of body in every case (freed with b; freed at once on error). */
int sim_ob_attr_graph(struct sim_ob *b, const char *name, struct sim_ob *body);

/* Serializes the model; *out is caller-owned (free()). Errors: IPUOF_E_NOMEM, and
 * IPUOF_E_INVAL when an earlier call failed (the builder remembers the first error). */
int sim_ob_serialize(struct sim_ob *b, void **out, size_t *len);

#endif /* SIM_ONNX_BUILD_H */
