/*
 * faultcase.c — see faultcase.h.
 */
#include "faultcase.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "onnx_build.h"

void *
fc_add_model(size_t *len)
{
    static const float w[4] = {1, 2, 3, 4};
    int64_t dims[2] = {1, 4};
    struct sim_ob *b = sim_ob_new(13);
    void *bytes = NULL;

    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 2, dims);
    sim_ob_initializer(b, "w", IPUOF_DTYPE_FLOAT, 2, dims, w);
    sim_ob_node(b, "Add", "add", "x,w", "y");
    sim_ob_output(b, "y", IPUOF_DTYPE_FLOAT);
    assert_int_equal(sim_ob_serialize(b, &bytes, len), 0);
    sim_ob_free(b);
    return bytes;
}

ipuof_client *
fc_connect(const char *addr)
{
    ipuof_client *c = ipuof_client_new();

    assert_non_null(c);
    assert_int_equal(ipuof_client_set_timeouts(c, 5000, 20000), IPUOF_OK);
    assert_int_equal(ipuof_client_connect(c, addr), IPUOF_OK);
    return c;
}

int
fc_attach1(ipuof_client *c, const char *name, unsigned *ipu)
{
    struct ipuof_attach_opts ao = {.num_ipus = 1, .partition_name = name};
    unsigned ids[4];
    size_t n = 0;
    int rc = ipuof_attach(c, &ao, ids, 4, &n);

    if (rc == IPUOF_OK && ipu != NULL)
        *ipu = ids[0];
    return rc;
}

int
fc_compile_run(ipuof_client *c, ipuof_model **out)
{
    size_t len = 0;
    void *bytes = fc_add_model(&len);
    ipuof_model *m = NULL;
    const float x[4] = {10, 20, 30, 40};
    struct ipuof_tensor in = {"x", IPUOF_DTYPE_FLOAT, 2, {1, 4}, x, sizeof x};
    struct ipuof_tensor y;
    int rc = ipuof_model_compile(c, bytes, len, NULL, &m);

    free(bytes);
    if (rc == IPUOF_OK)
        rc = ipuof_model_run(m, &in, 1);
    if (rc == IPUOF_OK) {
        assert_int_equal(ipuof_model_output(m, 0, &y), IPUOF_OK);
        assert_true(((const float *)y.data)[3] == 44.0f);
    }
    if (out != NULL && rc == IPUOF_OK)
        *out = m;
    else
        ipuof_model_free(m);
    return rc;
}

int
fc_ipu_state(const char *addr, unsigned i, int *recovery, int *unrecoverable, char *error,
             size_t len)
{
    ipuof_client *c = fc_connect(addr);
    ipuof_status_report *r = NULL;
    struct ipuof_ipu_info in;
    int state;

    assert_int_equal(ipuof_status(c, &r), IPUOF_OK);
    assert_int_equal(ipuof_status_report_ipu(r, i, &in), IPUOF_OK);
    state = in.state;
    *recovery = ipuof_status_report_ipu_recovery(r, i, unrecoverable);
    snprintf(error, len, "%s", in.error);
    ipuof_status_report_free(r);
    ipuof_client_free(c);
    return state;
}

/* 1 when IPU i is held by a client. */
static int
ipu_held(const char *addr, unsigned i)
{
    ipuof_client *c = fc_connect(addr);
    ipuof_status_report *r = NULL;
    struct ipuof_ipu_info in;
    int held;

    assert_int_equal(ipuof_status(c, &r), IPUOF_OK);
    assert_int_equal(ipuof_status_report_ipu(r, i, &in), IPUOF_OK);
    held = in.held;
    ipuof_status_report_free(r);
    ipuof_client_free(c);
    return held;
}

void
fc_wait_unheld(const char *addr, unsigned i)
{
    for (int k = 0; k < 500 && ipu_held(addr, i); k++)
        usleep(10000);
    assert_false(ipu_held(addr, i));
}
