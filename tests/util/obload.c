/*
 * obload.c — see obload.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

struct sim_model *
test_ob_load(struct sim_ob *b)
{
    struct sim_model *m = NULL;
    struct sim_err err;
    void *bytes;
    size_t len;

    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    sim_ob_free(b);
    if (sim_model_load(bytes, len, &m, &err) != 0)
        fail_msg("%s", err.msg);
    free(bytes);
    return m;
}
