/*
 * testmodels.h — small ONNX models built in C for daemon tests (no Python needed).
 */
#ifndef IPUOF_TESTMODELS_H
#define IPUOF_TESTMODELS_H

#include <stddef.h>
#include <stdint.h>

/* Relu models: n_in float inputs x<i> of shape [1, width]; n_out outputs
 * y<k> = Relu(x<k % n_in>), node k named y<k>. ipu >= 0 puts node 0 on that IPU
 * (__ipu_number). Returns the bytes (caller frees) and their length, or NULL. */
void *testmodel_relu(int n_in, int n_out, int64_t width, int ipu, size_t *len);

#endif
