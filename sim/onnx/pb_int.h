/*
 * pb_int.h — the one internal bridge from protobuf-c's ONNX types to sim's own tensors.
 * Included only by onnx_load.c, onnx_ctrl.c and tensor_pb.c; compute code never sees protobuf
 * types.
 */
#ifndef SIM_PB_INT_H
#define SIM_PB_INT_H

#include "onnx.pb-c.h"

#include "model.h"

/*
 * Converts an unpacked TensorProto into a host tensor (*out, caller-owned: sim_const_free()).
 * The data goes to dest when not NULL (at least sim_pb_tensor_bytes(t) bytes, borrowed: the
 * const is then a view), else to a new buffer. what names the tensor in error messages
 * ("initializer 'w'"). Errors as sim_tensor_pb_decode().
 */
int sim_const_from_pb(const Onnx__TensorProto *t, const char *what, void *dest,
                      struct sim_const **out, struct sim_err *err);

/* Bytes of t's data, or 0 when t is invalid (sim_const_from_pb then says why). */
size_t sim_pb_tensor_bytes(const Onnx__TensorProto *t);

#endif /* SIM_PB_INT_H */
