/*
 * conv3d.h — Conv with three spatial dims (op_conv3d.c), reached through op_conv.c's Conv
 * entry: its infer, forward and backward hand a 5-D input (N, C, D, H, W) to these; forward
 * and backward have the contracts of the sim_op functions of the same kind (ops.h).
 */
#ifndef SIM_CONV3D_H
#define SIM_CONV3D_H

#include "ops.h"

/* The rest of Conv's infer for a 5-D input, once op_conv.c's infer_conv has checked the
 * shapes, group, kernel_shape and bias and computed the window win: the params and the
 * output (N, M, OD, OH, OW). 0 or an IPUOF_E_* code. */
int sim_conv3d_infer(struct sim_infer *c, int64_t group, const struct sim_window *win);
int sim_conv3d_forward(const struct sim_kern *k, struct sim_err *err);
int sim_conv3d_backward(const struct sim_kern *k, const struct sim_tensor *dout,
                        struct sim_tensor *din, struct sim_err *err);

#endif /* SIM_CONV3D_H */
