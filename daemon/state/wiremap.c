/*
 * wiremap.c — the tables of wiremap.h. Each table has one row per value of the daemon's
 * enum; the asserts below fail the build when an enum grows without its row, or when two
 * values that travel unchanged (dtypes are ONNX's numbers on every side) drift apart.
 */
#include "wiremap.h"

#include <stdio.h>

#include "devices.h"
#include "ipuof.pb-c.h"
#include "ipuof/status.h"
#include "pod.h"
#include "sim.h"

static const struct enummap_row dtype_rows[] = {
    {IPUOF__DTYPE__DTYPE_FLOAT, SIM_DTYPE_FLOAT, "float"},
    {IPUOF__DTYPE__DTYPE_UINT8, SIM_DTYPE_UINT8, "uint8"},
    {IPUOF__DTYPE__DTYPE_INT8, SIM_DTYPE_INT8, "int8"},
    {IPUOF__DTYPE__DTYPE_INT32, SIM_DTYPE_INT32, "int32"},
    {IPUOF__DTYPE__DTYPE_INT64, SIM_DTYPE_INT64, "int64"},
    {IPUOF__DTYPE__DTYPE_BOOL, SIM_DTYPE_BOOL, "bool"},
    {IPUOF__DTYPE__DTYPE_FLOAT16, SIM_DTYPE_FLOAT16, "float16"},
};
_Static_assert(ENUMMAP_LEN(dtype_rows) == 7, "a dtype without its wire row");
_Static_assert((int)IPUOF__DTYPE__DTYPE_FLOAT == (int)SIM_DTYPE_FLOAT &&
               (int)IPUOF__DTYPE__DTYPE_BOOL == (int)SIM_DTYPE_BOOL &&
               (int)SIM_DTYPE_INT64 == (int)IPUOF_DTYPE_INT64 &&
               (int)IPUOF__DTYPE__DTYPE_FLOAT16 == (int)SIM_DTYPE_FLOAT16 &&
               (int)SIM_DTYPE_FLOAT16 == (int)IPUOF_DTYPE_FLOAT16,
               "dtypes are ONNX's numbers on the wire, in the simulator and in status.h");

static const struct enummap_row output_kind_rows[] = {
    {IPUOF__OUTPUT_KIND__OUTPUT_DEFAULT, SIM_OUTPUT_DEFAULT, "Default"},
    {IPUOF__OUTPUT_KIND__OUTPUT_ALL, SIM_OUTPUT_ALL, "All"},
    {IPUOF__OUTPUT_KIND__OUTPUT_FINAL, SIM_OUTPUT_FINAL, "Final"},
    {IPUOF__OUTPUT_KIND__OUTPUT_SUM, SIM_OUTPUT_SUM, "Sum"},
    {IPUOF__OUTPUT_KIND__OUTPUT_EVERYN, SIM_OUTPUT_EVERYN, "EveryN"},
};
_Static_assert(ENUMMAP_LEN(output_kind_rows) == SIM_OUTPUT_DEFAULT + 1 &&
               ENUMMAP_LEN(output_kind_rows) == IPUOF__OUTPUT_KIND__OUTPUT_EVERYN + 1,
               "an output kind without its row");

static const struct enummap_row optimizer_rows[] = {
    {IPUOF__OPTIMIZER_KIND__OPTIMIZER_SGD, SIM_OPT_SGD, "SGD"},
    {IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAM, SIM_OPT_ADAM, "Adam"},
    {IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAMW, SIM_OPT_ADAMW, "AdamW"},
    {IPUOF__OPTIMIZER_KIND__OPTIMIZER_RMSPROP, SIM_OPT_RMSPROP, "RMSprop"},
    {IPUOF__OPTIMIZER_KIND__OPTIMIZER_LAMB, SIM_OPT_LAMB, "LAMB"},
};
_Static_assert(ENUMMAP_LEN(optimizer_rows) == SIM_OPT_LAMB &&
               ENUMMAP_LEN(optimizer_rows) == IPUOF__OPTIMIZER_KIND__OPTIMIZER_LAMB,
               "an optimizer without its row (OPTIMIZER_DEFAULT is handled by its caller)");

static const struct enummap_row reduction_rows[] = {
    {IPUOF__REDUCTION_TYPE__REDUCTION_MEAN, SIM_REDUCE_MEAN, "Mean"},
    {IPUOF__REDUCTION_TYPE__REDUCTION_SUM, SIM_REDUCE_SUM, "Sum"},
};
_Static_assert(ENUMMAP_LEN(reduction_rows) == SIM_REDUCE_SUM + 1 &&
               ENUMMAP_LEN(reduction_rows) == IPUOF__REDUCTION_TYPE__REDUCTION_SUM + 1,
               "a reduction without its row");

static const struct enummap_row strategy_rows[] = {
    {IPUOF__EXECUTION_STRATEGY__STRATEGY_DEFAULT, SIM_STRATEGY_DEFAULT, "default"},
    {IPUOF__EXECUTION_STRATEGY__STRATEGY_PIPELINED, SIM_STRATEGY_PIPELINED, "pipelined"},
    {IPUOF__EXECUTION_STRATEGY__STRATEGY_SHARDED, SIM_STRATEGY_SHARDED, "sharded"},
    {IPUOF__EXECUTION_STRATEGY__STRATEGY_PHASED, SIM_STRATEGY_PHASED, "phased"},
};
_Static_assert(ENUMMAP_LEN(strategy_rows) == SIM_STRATEGY_PHASED + 1 &&
               ENUMMAP_LEN(strategy_rows) == IPUOF__EXECUTION_STRATEGY__STRATEGY_PHASED + 1,
               "a strategy without its row");

static const struct enummap_row location_rows[] = {
    {IPUOF__TENSOR_LOCATION__LOCATION_ON_CHIP, SIM_LOC_ON_CHIP, "on chip"},
    {IPUOF__TENSOR_LOCATION__LOCATION_OFF_CHIP, SIM_LOC_OFF_CHIP, "off chip"},
};
_Static_assert(ENUMMAP_LEN(location_rows) == SIM_LOC_OFF_CHIP + 1 &&
               ENUMMAP_LEN(location_rows) == IPUOF__TENSOR_LOCATION__LOCATION_OFF_CHIP + 1,
               "a tensor location without its row");

static const struct enummap_row weight_kind_rows[] = {
    {IPUOF__WEIGHT_KIND__WEIGHT_TRAINABLE, SIM_WEIGHT_TRAINABLE, "trainable"},
    {IPUOF__WEIGHT_KIND__WEIGHT_BUFFER, SIM_WEIGHT_BUFFER, "buffer"},
    {IPUOF__WEIGHT_KIND__WEIGHT_FROZEN, SIM_WEIGHT_FROZEN, "frozen"},
};
_Static_assert(ENUMMAP_LEN(weight_kind_rows) == SIM_WEIGHT_FROZEN &&
               ENUMMAP_LEN(weight_kind_rows) == IPUOF__WEIGHT_KIND__WEIGHT_FROZEN,
               "a weight kind without its row (WEIGHT_UNKNOWN is the wire's fallback)");

static const struct enummap_row ipu_state_rows[] = {
    {IPUOF__IPU_STATE__IPU_FREE, DEV_FREE, "free"},
    {IPUOF__IPU_STATE__IPU_ATTACHED, DEV_ATTACHED, "attached"},
    {IPUOF__IPU_STATE__IPU_BUSY, DEV_BUSY, "busy"},
    {IPUOF__IPU_STATE__IPU_ERROR, DEV_ERROR, "error"},
};
_Static_assert(ENUMMAP_LEN(ipu_state_rows) == DEV_ERROR + 1 &&
               ENUMMAP_LEN(ipu_state_rows) == IPUOF__IPU_STATE__IPU_ERROR + 1,
               "an IPU state without its row");

static const struct enummap_row error_class_rows[] = {
    {IPUOF__ERROR_CLASS__ERROR_CLASS_ERROR, IPUOF_ERROR_PLAIN, "Error"},
    {IPUOF__ERROR_CLASS__ERROR_CLASS_RECOVERABLE, IPUOF_ERROR_RECOVERABLE, "RecoverableError"},
    {IPUOF__ERROR_CLASS__ERROR_CLASS_UNRECOVERABLE, IPUOF_ERROR_UNRECOVERABLE,
     "UnrecoverableError"},
};
_Static_assert(ENUMMAP_LEN(error_class_rows) == IPUOF_ERROR_UNRECOVERABLE + 1 &&
               ENUMMAP_LEN(error_class_rows) == IPUOF__ERROR_CLASS__ERROR_CLASS_UNRECOVERABLE + 1,
               "an error class without its row");

static const struct enummap_row recovery_rows[] = {
    {IPUOF__RECOVERY_ACTION__RECOVERY_NONE, IPUOF_RECOVERY_NONE, "NONE"},
    {IPUOF__RECOVERY_ACTION__RECOVERY_RETRY, IPUOF_RECOVERY_RETRY, "RETRY"},
    {IPUOF__RECOVERY_ACTION__RECOVERY_REATTACH, IPUOF_RECOVERY_REATTACH, "REATTACH"},
    {IPUOF__RECOVERY_ACTION__RECOVERY_IPU_RESET, IPUOF_RECOVERY_IPU_RESET, "IPU_RESET"},
    {IPUOF__RECOVERY_ACTION__RECOVERY_PARTITION_RESET, IPUOF_RECOVERY_PARTITION_RESET,
     "PARTITION_RESET"},
    {IPUOF__RECOVERY_ACTION__RECOVERY_LINK_RESET, IPUOF_RECOVERY_LINK_RESET, "LINK_RESET"},
    {IPUOF__RECOVERY_ACTION__RECOVERY_FULL_RESET, IPUOF_RECOVERY_FULL_RESET, "FULL_RESET"},
};
_Static_assert(ENUMMAP_LEN(recovery_rows) == IPUOF_RECOVERY_FULL_RESET + 1 &&
               ENUMMAP_LEN(recovery_rows) ==
                   IPUOF__RECOVERY_ACTION__RECOVERY_FULL_RESET + 1,
               "a recovery action without its row");

static const struct enummap_row pod_host_state_rows[] = {
    {IPUOF__POD_HOST_STATE__POD_HOST_UNKNOWN, POD_UNKNOWN, "unknown"},
    {IPUOF__POD_HOST_STATE__POD_HOST_REACHABLE, POD_REACHABLE, "reachable"},
    {IPUOF__POD_HOST_STATE__POD_HOST_UNREACHABLE, POD_UNREACHABLE, "unreachable"},
    {IPUOF__POD_HOST_STATE__POD_HOST_SELF, POD_SELF, "self"},
};
_Static_assert(ENUMMAP_LEN(pod_host_state_rows) == POD_SELF + 1 &&
               ENUMMAP_LEN(pod_host_state_rows) == IPUOF__POD_HOST_STATE__POD_HOST_SELF + 1,
               "a Pod host state without its row");

#define TABLE(var, what, rows) const struct enummap var = {what, rows, ENUMMAP_LEN(rows)}
TABLE(wiremap_dtype, "dtype", dtype_rows);
TABLE(wiremap_output_kind, "output kind", output_kind_rows);
TABLE(wiremap_optimizer, "optimizer", optimizer_rows);
TABLE(wiremap_reduction, "reduction", reduction_rows);
TABLE(wiremap_strategy, "execution strategy", strategy_rows);
TABLE(wiremap_location, "tensor location", location_rows);
TABLE(wiremap_weight_kind, "weight kind", weight_kind_rows);
TABLE(wiremap_ipu_state, "IPU state", ipu_state_rows);
TABLE(wiremap_error_class, "error class", error_class_rows);
TABLE(wiremap_recovery, "recovery action", recovery_rows);
TABLE(wiremap_pod_host_state, "Pod host state", pod_host_state_rows);
#undef TABLE

int
wiremap_sim_dtype(int w)
{
    int d;

    return enummap_a_to_b(&wiremap_dtype, w, &d) == 0 ? d : -1;
}

int
wiremap_to_wire(const struct enummap *m, int v, int fallback)
{
    int w;

    return enummap_b_to_a(m, v, &w) == 0 ? w : fallback;
}

void
wiremap_refuse(const struct enummap *m, int v, const char *what, char *msg, size_t len)
{
    char known[256];

    snprintf(msg, len, "%s %d for %s is unknown; use %s", m->what, v, what,
             enummap_known(m, known, sizeof known));
}
