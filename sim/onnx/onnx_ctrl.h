/*
 * onnx_ctrl.h — ONNX Loop and If turned into plain nodes when a model loads (onnx_ctrl.c
 * says how and what is refused). Used by onnx_load.c only.
 */
#ifndef SIM_ONNX_CTRL_H
#define SIM_ONNX_CTRL_H

#include <stdbool.h>
#include <stddef.h>

#include "onnx.pb-c.h"

struct sim_err;

/* A graph with its Loop and If nodes expanded. graph is a shallow copy of the input graph
 * (inputs, outputs and original nodes' strings and attributes are borrowed from it); the
 * rest is owned here. */
struct sim_onnx_flat {
    Onnx__GraphProto graph;
    bool flattened;             /* graph.node / graph.initializer are arrays of our own */
    void **owned;
    size_t n_owned, cap_owned;
};

/* Fills *out from g (borrowed until sim_onnx_flat_fini; a graph without Loop or If is
 * copied as it is). 0, or an IPUOF_E_* code with err set; call sim_onnx_flat_fini in both
 * cases. opset: the model's ai.onnx opset (Unsqueeze's form). */
int sim_onnx_flatten(const Onnx__GraphProto *g, int64_t opset, struct sim_onnx_flat *out,
                     struct sim_err *err);

/* Frees what sim_onnx_flatten made. */
void sim_onnx_flat_fini(struct sim_onnx_flat *f);

#endif /* SIM_ONNX_CTRL_H */
