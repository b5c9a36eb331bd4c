/*
 * test_client_wiremap.c — the client library's enum tables (client/wire/wiremap.c): every public
 * value maps to the wire and back, every wire value comes back as a public one, a value an
 * application makes up is refused by the compile with a sentence naming the accepted ones,
 * and a wire value a newer daemon might send becomes the caller's fallback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ipuof.pb-c.h"
#include "ipuof/client.h"
#include "../../client/wire/wiremap.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void
both_ways(const struct enummap *m, const int *pub, size_t np, const int *wire, size_t nw)
{
    assert_int_equal(m->n, np);
    assert_int_equal(np, nw);
    for (size_t i = 0; i < np; i++) {
        assert_int_equal(ipuof_wm_to_wire(m, pub[i], -99), wire[i]);
        assert_int_equal(ipuof_wm_from_wire(m, wire[i], -99), pub[i]);
    }
}

static void
test_every_value_maps(void **state)
{
    (void)state;
    {
        const int p[] = {IPUOF_DTYPE_FLOAT, IPUOF_DTYPE_UINT8, IPUOF_DTYPE_INT8,
                         IPUOF_DTYPE_INT32, IPUOF_DTYPE_INT64, IPUOF_DTYPE_BOOL,
                         IPUOF_DTYPE_FLOAT16};
        const int w[] = {IPUOF__DTYPE__DTYPE_FLOAT, IPUOF__DTYPE__DTYPE_UINT8,
                         IPUOF__DTYPE__DTYPE_INT8, IPUOF__DTYPE__DTYPE_INT32,
                         IPUOF__DTYPE__DTYPE_INT64, IPUOF__DTYPE__DTYPE_BOOL,
                         IPUOF__DTYPE__DTYPE_FLOAT16};
        both_ways(&ipuof_wm_dtype, p, N(p), w, N(w));
        for (size_t i = 0; i < N(p); i++)
            assert_true(ipuof_dtype_size(p[i]) > 0);
    }
    {
        const int p[] = {IPUOF_OUTPUT_DEFAULT, IPUOF_OUTPUT_ALL, IPUOF_OUTPUT_FINAL,
                         IPUOF_OUTPUT_SUM, IPUOF_OUTPUT_EVERYN};
        const int w[] = {IPUOF__OUTPUT_KIND__OUTPUT_DEFAULT, IPUOF__OUTPUT_KIND__OUTPUT_ALL,
                         IPUOF__OUTPUT_KIND__OUTPUT_FINAL, IPUOF__OUTPUT_KIND__OUTPUT_SUM,
                         IPUOF__OUTPUT_KIND__OUTPUT_EVERYN};
        both_ways(&ipuof_wm_output_kind, p, N(p), w, N(w));
    }
    {
        const int p[] = {IPUOF_GROUP_CONSECUTIVE, IPUOF_GROUP_ORTHOGONAL, IPUOF_GROUP_ALL,
                         IPUOF_GROUP_NONE};
        const int w[] = {IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_CONSECUTIVE,
                         IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_ORTHOGONAL,
                         IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_ALL,
                         IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_NONE};
        both_ways(&ipuof_wm_group, p, N(p), w, N(w));
    }
    {
        const int p[] = {IPUOF_STRATEGY_DEFAULT, IPUOF_STRATEGY_PIPELINED, IPUOF_STRATEGY_SHARDED,
                         IPUOF_STRATEGY_PHASED};
        const int w[] = {IPUOF__EXECUTION_STRATEGY__STRATEGY_DEFAULT,
                         IPUOF__EXECUTION_STRATEGY__STRATEGY_PIPELINED,
                         IPUOF__EXECUTION_STRATEGY__STRATEGY_SHARDED,
                         IPUOF__EXECUTION_STRATEGY__STRATEGY_PHASED};
        both_ways(&ipuof_wm_strategy, p, N(p), w, N(w));
    }
    {
        const int p[] = {IPUOF_LOCATION_ON_CHIP, IPUOF_LOCATION_OFF_CHIP};
        const int w[] = {IPUOF__TENSOR_LOCATION__LOCATION_ON_CHIP,
                         IPUOF__TENSOR_LOCATION__LOCATION_OFF_CHIP};
        both_ways(&ipuof_wm_location, p, N(p), w, N(w));
    }
    {
        const int p[] = {0, IPUOF_OPTIMIZER_SGD, IPUOF_OPTIMIZER_ADAM, IPUOF_OPTIMIZER_ADAMW,
                         IPUOF_OPTIMIZER_RMSPROP, IPUOF_OPTIMIZER_LAMB};
        const int w[] = {IPUOF__OPTIMIZER_KIND__OPTIMIZER_DEFAULT,
                         IPUOF__OPTIMIZER_KIND__OPTIMIZER_SGD,
                         IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAM,
                         IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAMW,
                         IPUOF__OPTIMIZER_KIND__OPTIMIZER_RMSPROP,
                         IPUOF__OPTIMIZER_KIND__OPTIMIZER_LAMB};
        both_ways(&ipuof_wm_optimizer, p, N(p), w, N(w));
    }
    {
        const int p[] = {IPUOF_REDUCTION_MEAN, IPUOF_REDUCTION_SUM};
        const int w[] = {IPUOF__REDUCTION_TYPE__REDUCTION_MEAN,
                         IPUOF__REDUCTION_TYPE__REDUCTION_SUM};
        both_ways(&ipuof_wm_reduction, p, N(p), w, N(w));
    }
    {
        const int p[] = {IPUOF_WEIGHT_TRAINABLE, IPUOF_WEIGHT_BUFFER, IPUOF_WEIGHT_FROZEN};
        const int w[] = {IPUOF__WEIGHT_KIND__WEIGHT_TRAINABLE, IPUOF__WEIGHT_KIND__WEIGHT_BUFFER,
                         IPUOF__WEIGHT_KIND__WEIGHT_FROZEN};
        both_ways(&ipuof_wm_weight_kind, p, N(p), w, N(w));
    }
    {
        const int p[] = {IPUOF_IPU_FREE, IPUOF_IPU_ATTACHED, IPUOF_IPU_BUSY, IPUOF_IPU_ERROR};
        const int w[] = {IPUOF__IPU_STATE__IPU_FREE, IPUOF__IPU_STATE__IPU_ATTACHED,
                         IPUOF__IPU_STATE__IPU_BUSY, IPUOF__IPU_STATE__IPU_ERROR};
        both_ways(&ipuof_wm_ipu_state, p, N(p), w, N(w));
    }
    {
        const int p[] = {IPUOF_ERROR_PLAIN, IPUOF_ERROR_RECOVERABLE, IPUOF_ERROR_UNRECOVERABLE};
        const int w[] = {IPUOF__ERROR_CLASS__ERROR_CLASS_ERROR,
                         IPUOF__ERROR_CLASS__ERROR_CLASS_RECOVERABLE,
                         IPUOF__ERROR_CLASS__ERROR_CLASS_UNRECOVERABLE};
        both_ways(&ipuof_wm_error_class, p, N(p), w, N(w));
    }
    {
        const int p[] = {IPUOF_RECOVERY_NONE, IPUOF_RECOVERY_RETRY, IPUOF_RECOVERY_REATTACH,
                         IPUOF_RECOVERY_IPU_RESET, IPUOF_RECOVERY_PARTITION_RESET,
                         IPUOF_RECOVERY_LINK_RESET, IPUOF_RECOVERY_FULL_RESET};
        const int w[] = {IPUOF__RECOVERY_ACTION__RECOVERY_NONE,
                         IPUOF__RECOVERY_ACTION__RECOVERY_RETRY,
                         IPUOF__RECOVERY_ACTION__RECOVERY_REATTACH,
                         IPUOF__RECOVERY_ACTION__RECOVERY_IPU_RESET,
                         IPUOF__RECOVERY_ACTION__RECOVERY_PARTITION_RESET,
                         IPUOF__RECOVERY_ACTION__RECOVERY_LINK_RESET,
                         IPUOF__RECOVERY_ACTION__RECOVERY_FULL_RESET};
        both_ways(&ipuof_wm_recovery, p, N(p), w, N(w));
    }
}

/* Made-up values: the fallback from the wire, -1 to the wire; and a compile with a made-up
 * input group type is refused before anything is sent, naming the accepted values. */
static void
test_unknown_refused(void **state)
{
    ipuof_client *c = ipuof_client_new();
    struct ipuof_model_opts o = {0};
    ipuof_model *m = NULL;
    static const unsigned char bytes[4] = {0};

    (void)state;
    assert_int_equal(ipuof_wm_to_wire(&ipuof_wm_group, 7, -1), -1);
    assert_int_equal(ipuof_wm_to_wire(&ipuof_wm_dtype, 4, -1), -1); /* ONNX uint16 */
    assert_int_equal(ipuof_wm_from_wire(&ipuof_wm_dtype, IPUOF__DTYPE__DTYPE_UNDEFINED, 0), 0);
    assert_int_equal(ipuof_wm_from_wire(&ipuof_wm_error_class, 9, IPUOF_ERROR_PLAIN),
                     IPUOF_ERROR_PLAIN);
    assert_int_equal(ipuof_wm_from_wire(&ipuof_wm_recovery, 9, IPUOF_RECOVERY_NONE),
                     IPUOF_RECOVERY_NONE);
    assert_int_equal(ipuof_wm_from_wire(&ipuof_wm_ipu_state, 9, IPUOF_IPU_ERROR),
                     IPUOF_IPU_ERROR);
    assert_non_null(c);
    o.input_group_type = 7;
    assert_int_equal(ipuof_model_compile(c, bytes, sizeof bytes, &o, &m),
                     IPUOF_E_INVAL);
    print_message("refused: %s\n", ipuof_client_errmsg(c));
    assert_non_null(strstr(ipuof_client_errmsg(c),
                           "input_group_type 7 is unknown; use IPUOF_GROUP_CONSECUTIVE (0), "
                           "IPUOF_GROUP_ORTHOGONAL (1), IPUOF_GROUP_ALL (2), IPUOF_GROUP_NONE "
                           "(3)"));
    assert_null(m);
    ipuof_client_free(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_value_maps),
        cmocka_unit_test(test_unknown_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
