/*
 * testmodels.c — see testmodels.h.
 */
#include "testmodels.h"

#include <stdio.h>

#include "onnx_build.h"
#include "sim.h"

void *
testmodel_relu(int n_in, int n_out, int64_t width, int ipu, size_t *len)
{
    struct sim_ob *b = sim_ob_new(13);
    int64_t dims[2] = {1, width};
    char x[32], y[32];
    void *bytes = NULL;
    int bad = b == NULL;

    for (int i = 0; i < n_in && !bad; i++) {
        snprintf(x, sizeof x, "x%d", i);
        bad = sim_ob_input(b, x, SIM_DTYPE_FLOAT, 2, dims) != 0;
    }
    for (int k = 0; k < n_out && !bad; k++) {
        snprintf(x, sizeof x, "x%d", k % n_in);
        snprintf(y, sizeof y, "y%d", k);
        bad = sim_ob_node(b, "Relu", y, x, y) != 0 ||
              (k == 0 && ipu >= 0 && sim_ob_attr_int(b, "__ipu_number", ipu) != 0) ||
              sim_ob_output(b, y, SIM_DTYPE_FLOAT) != 0;
    }
    if (!bad && sim_ob_serialize(b, &bytes, len) != 0)
        bytes = NULL;
    sim_ob_free(b);
    return bytes;
}
