/*
 * test_wiremap.c — the daemon's enum tables (daemon/state/wiremap.c) and their lookup
 * (proto/enummap.c): every simulator, device and status value maps to the wire and back,
 * every wire value the protocol defines maps in, and a value outside a table is refused
 * with a sentence naming the value and the ones that would be right.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "devices.h"
#include "ipuof.pb-c.h"
#include "ipuof/status.h"
#include "sim.h"
#include "wiremap.h"

/* Every value of the daemon's side of m (given) goes to the wire and comes back; every
 * wire value (given) comes in and goes back out. */
static void
round_trip(const struct enummap *m, const int *local, size_t nl, const int *wire, size_t nw)
{
    for (size_t i = 0; i < nl; i++) {
        int w = -12345, back = -12345;
        assert_int_equal(enummap_b_to_a(m, local[i], &w), 0);
        assert_int_equal(enummap_a_to_b(m, w, &back), 0);
        assert_int_equal(back, local[i]);
    }
    for (size_t i = 0; i < nw; i++) {
        int l = -12345, back = -12345;
        assert_int_equal(enummap_a_to_b(m, wire[i], &l), 0);
        assert_int_equal(enummap_b_to_a(m, l, &back), 0);
        assert_int_equal(back, wire[i]);
    }
    assert_int_equal(m->n, nl);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void
test_every_value_maps(void **state)
{
    (void)state;
    {
        const int l[] = {SIM_DTYPE_FLOAT, SIM_DTYPE_UINT8, SIM_DTYPE_INT8, SIM_DTYPE_INT32,
                         SIM_DTYPE_INT64, SIM_DTYPE_BOOL, SIM_DTYPE_FLOAT16};
        const int w[] = {IPUOF__DTYPE__DTYPE_FLOAT, IPUOF__DTYPE__DTYPE_UINT8,
                         IPUOF__DTYPE__DTYPE_INT8, IPUOF__DTYPE__DTYPE_INT32,
                         IPUOF__DTYPE__DTYPE_INT64, IPUOF__DTYPE__DTYPE_BOOL,
                         IPUOF__DTYPE__DTYPE_FLOAT16};
        round_trip(&wiremap_dtype, l, N(l), w, N(w));
        for (size_t i = 0; i < N(l); i++)
            assert_true(sim_dtype_size(l[i]) > 0);
    }
    {
        const int l[] = {SIM_OUTPUT_ALL, SIM_OUTPUT_FINAL, SIM_OUTPUT_SUM, SIM_OUTPUT_EVERYN,
                         SIM_OUTPUT_DEFAULT};
        const int w[] = {IPUOF__OUTPUT_KIND__OUTPUT_DEFAULT, IPUOF__OUTPUT_KIND__OUTPUT_ALL,
                         IPUOF__OUTPUT_KIND__OUTPUT_FINAL, IPUOF__OUTPUT_KIND__OUTPUT_SUM,
                         IPUOF__OUTPUT_KIND__OUTPUT_EVERYN};
        int k = -1;
        round_trip(&wiremap_output_kind, l, N(l), w, N(w));
        /* the two sides number differently: Default is 0 on the wire, 4 in sim */
        assert_int_equal(enummap_a_to_b(&wiremap_output_kind, IPUOF__OUTPUT_KIND__OUTPUT_ALL,
                                        &k), 0);
        assert_int_equal(k, SIM_OUTPUT_ALL);
    }
    {
        const int l[] = {SIM_OPT_SGD, SIM_OPT_ADAM, SIM_OPT_ADAMW, SIM_OPT_RMSPROP, SIM_OPT_LAMB};
        const int w[] = {IPUOF__OPTIMIZER_KIND__OPTIMIZER_SGD, IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAM,
                         IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAMW,
                         IPUOF__OPTIMIZER_KIND__OPTIMIZER_RMSPROP,
                         IPUOF__OPTIMIZER_KIND__OPTIMIZER_LAMB};
        round_trip(&wiremap_optimizer, l, N(l), w, N(w));
    }
    {
        const int l[] = {SIM_REDUCE_MEAN, SIM_REDUCE_SUM};
        const int w[] = {IPUOF__REDUCTION_TYPE__REDUCTION_MEAN,
                         IPUOF__REDUCTION_TYPE__REDUCTION_SUM};
        round_trip(&wiremap_reduction, l, N(l), w, N(w));
    }
    {
        const int l[] = {SIM_STRATEGY_DEFAULT, SIM_STRATEGY_PIPELINED, SIM_STRATEGY_SHARDED,
                         SIM_STRATEGY_PHASED};
        const int w[] = {IPUOF__EXECUTION_STRATEGY__STRATEGY_DEFAULT,
                         IPUOF__EXECUTION_STRATEGY__STRATEGY_PIPELINED,
                         IPUOF__EXECUTION_STRATEGY__STRATEGY_SHARDED,
                         IPUOF__EXECUTION_STRATEGY__STRATEGY_PHASED};
        round_trip(&wiremap_strategy, l, N(l), w, N(w));
    }
    {
        const int l[] = {SIM_LOC_ON_CHIP, SIM_LOC_OFF_CHIP};
        const int w[] = {IPUOF__TENSOR_LOCATION__LOCATION_ON_CHIP,
                         IPUOF__TENSOR_LOCATION__LOCATION_OFF_CHIP};
        round_trip(&wiremap_location, l, N(l), w, N(w));
    }
    {
        const int l[] = {SIM_WEIGHT_TRAINABLE, SIM_WEIGHT_BUFFER, SIM_WEIGHT_FROZEN};
        const int w[] = {IPUOF__WEIGHT_KIND__WEIGHT_TRAINABLE, IPUOF__WEIGHT_KIND__WEIGHT_BUFFER,
                         IPUOF__WEIGHT_KIND__WEIGHT_FROZEN};
        round_trip(&wiremap_weight_kind, l, N(l), w, N(w));
    }
    {
        const int l[] = {DEV_FREE, DEV_ATTACHED, DEV_BUSY, DEV_ERROR};
        const int w[] = {IPUOF__IPU_STATE__IPU_FREE, IPUOF__IPU_STATE__IPU_ATTACHED,
                         IPUOF__IPU_STATE__IPU_BUSY, IPUOF__IPU_STATE__IPU_ERROR};
        round_trip(&wiremap_ipu_state, l, N(l), w, N(w));
    }
    {
        const int l[] = {IPUOF_ERROR_PLAIN, IPUOF_ERROR_RECOVERABLE, IPUOF_ERROR_UNRECOVERABLE};
        const int w[] = {IPUOF__ERROR_CLASS__ERROR_CLASS_ERROR,
                         IPUOF__ERROR_CLASS__ERROR_CLASS_RECOVERABLE,
                         IPUOF__ERROR_CLASS__ERROR_CLASS_UNRECOVERABLE};
        round_trip(&wiremap_error_class, l, N(l), w, N(w));
    }
    {
        const int l[] = {IPUOF_RECOVERY_NONE, IPUOF_RECOVERY_RETRY, IPUOF_RECOVERY_REATTACH,
                         IPUOF_RECOVERY_IPU_RESET, IPUOF_RECOVERY_PARTITION_RESET,
                         IPUOF_RECOVERY_LINK_RESET, IPUOF_RECOVERY_FULL_RESET};
        const int w[] = {IPUOF__RECOVERY_ACTION__RECOVERY_NONE,
                         IPUOF__RECOVERY_ACTION__RECOVERY_RETRY,
                         IPUOF__RECOVERY_ACTION__RECOVERY_REATTACH,
                         IPUOF__RECOVERY_ACTION__RECOVERY_IPU_RESET,
                         IPUOF__RECOVERY_ACTION__RECOVERY_PARTITION_RESET,
                         IPUOF__RECOVERY_ACTION__RECOVERY_LINK_RESET,
                         IPUOF__RECOVERY_ACTION__RECOVERY_FULL_RESET};
        round_trip(&wiremap_recovery, l, N(l), w, N(w));
    }
}

/* Values a client may send that no table holds are refused, and the sentence names the
 * value, what it was for and the values that would be right. */
static void
test_unknown_refused(void **state)
{
    char msg[320];
    int out = 77;

    (void)state;
    assert_int_equal(enummap_a_to_b(&wiremap_strategy, 9, &out), -1);
    assert_int_equal(out, 77);
    assert_int_equal(enummap_a_to_b(&wiremap_dtype, IPUOF__DTYPE__DTYPE_UNDEFINED, &out), -1);
    assert_int_equal(enummap_a_to_b(&wiremap_dtype, 4, &out), -1); /* ONNX uint16 */
    assert_int_equal(wiremap_sim_dtype(4), -1);
    assert_int_equal(wiremap_sim_dtype(IPUOF__DTYPE__DTYPE_INT64), SIM_DTYPE_INT64);
    assert_int_equal(enummap_a_to_b(&wiremap_optimizer, 0, &out), -1); /* caller's default */
    assert_int_equal(enummap_a_to_b(&wiremap_reduction, 2, &out), -1);
    assert_int_equal(enummap_a_to_b(&wiremap_output_kind, -1, &out), -1);
    wiremap_refuse(&wiremap_strategy, 9, "the compile", msg, sizeof msg);
    print_message("%s\n", msg);
    assert_string_equal(msg, "execution strategy 9 for the compile is unknown; use default (0), "
                             "pipelined (1), sharded (2), phased (3)");
    wiremap_refuse(&wiremap_reduction, 5, "accumulationAndReplicationReductionType", msg,
                   sizeof msg);
    assert_non_null(strstr(msg, "reduction 5 for accumulationAndReplicationReductionType is "
                                "unknown; use Mean (0), Sum (1)"));
    /* to the wire, a value without a row (only a bug makes one) takes the fallback */
    assert_int_equal(wiremap_to_wire(&wiremap_dtype, 42, IPUOF__DTYPE__DTYPE_UNDEFINED),
                     IPUOF__DTYPE__DTYPE_UNDEFINED);
    assert_int_equal(wiremap_to_wire(&wiremap_output_kind, SIM_OUTPUT_DEFAULT, -1),
                     IPUOF__OUTPUT_KIND__OUTPUT_DEFAULT);
    /* a short buffer is cut, never overrun */
    {
        char small[12];
        wiremap_refuse(&wiremap_dtype, 4, "x", small, sizeof small);
        assert_int_equal(strlen(small), sizeof small - 1);
        assert_non_null(enummap_known(&wiremap_recovery, small, sizeof small));
        assert_true(strlen(small) < sizeof small);
    }
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
