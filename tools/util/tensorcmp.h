/*
 * tensorcmp.h — compares a tensor the daemon returned with an expected TensorProto, as the
 * ONNX backend tests do: |got - want| <= atol + rtol * |want| for floats (NaN equals NaN,
 * infinities must match), exact equality for integer and bool tensors.
 */
#ifndef TOOLS_TENSORCMP_H
#define TOOLS_TENSORCMP_H

#include <stddef.h>

#include "ipuof/client.h"
#include "tensorfile.h"

#define TENSORCMP_RTOL 1e-4
#define TENSORCMP_ATOL 1e-5

/* 0 when got matches want; -1 with a sentence in msg. *maxdiff receives the largest float
 * difference seen (left unchanged for non-float tensors). */
int tensorcmp(const struct ipuof_tensor *got, const struct tensorfile *want, double *maxdiff,
              char *msg, size_t len);

#endif
