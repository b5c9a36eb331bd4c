/*
 * wiremap.c — the tables of wiremap.h. Each has one row per value of the public enum; the
 * asserts fail the build when a public enum or the protocol grows without its row.
 */
#include "wiremap.h"

#include "ipuof.pb-c.h"
#include "ipuof/client.h"

static const struct enummap_row dtype_rows[] = {
    {IPUOF_DTYPE_FLOAT, IPUOF__DTYPE__DTYPE_FLOAT, "IPUOF_DTYPE_FLOAT"},
    {IPUOF_DTYPE_UINT8, IPUOF__DTYPE__DTYPE_UINT8, "IPUOF_DTYPE_UINT8"},
    {IPUOF_DTYPE_INT8, IPUOF__DTYPE__DTYPE_INT8, "IPUOF_DTYPE_INT8"},
    {IPUOF_DTYPE_INT32, IPUOF__DTYPE__DTYPE_INT32, "IPUOF_DTYPE_INT32"},
    {IPUOF_DTYPE_INT64, IPUOF__DTYPE__DTYPE_INT64, "IPUOF_DTYPE_INT64"},
    {IPUOF_DTYPE_BOOL, IPUOF__DTYPE__DTYPE_BOOL, "IPUOF_DTYPE_BOOL"},
    {IPUOF_DTYPE_FLOAT16, IPUOF__DTYPE__DTYPE_FLOAT16, "IPUOF_DTYPE_FLOAT16"},
};
_Static_assert(ENUMMAP_LEN(dtype_rows) == 7, "a dtype without its wire row");
_Static_assert((int)IPUOF_DTYPE_FLOAT == (int)IPUOF__DTYPE__DTYPE_FLOAT &&
               (int)IPUOF_DTYPE_BOOL == (int)IPUOF__DTYPE__DTYPE_BOOL &&
               (int)IPUOF_DTYPE_FLOAT16 == (int)IPUOF__DTYPE__DTYPE_FLOAT16,
               "dtypes are ONNX's numbers in the library and on the wire");

static const struct enummap_row output_kind_rows[] = {
    {IPUOF_OUTPUT_DEFAULT, IPUOF__OUTPUT_KIND__OUTPUT_DEFAULT, "IPUOF_OUTPUT_DEFAULT"},
    {IPUOF_OUTPUT_ALL, IPUOF__OUTPUT_KIND__OUTPUT_ALL, "IPUOF_OUTPUT_ALL"},
    {IPUOF_OUTPUT_FINAL, IPUOF__OUTPUT_KIND__OUTPUT_FINAL, "IPUOF_OUTPUT_FINAL"},
    {IPUOF_OUTPUT_SUM, IPUOF__OUTPUT_KIND__OUTPUT_SUM, "IPUOF_OUTPUT_SUM"},
    {IPUOF_OUTPUT_EVERYN, IPUOF__OUTPUT_KIND__OUTPUT_EVERYN, "IPUOF_OUTPUT_EVERYN"},
};
_Static_assert(ENUMMAP_LEN(output_kind_rows) == IPUOF_OUTPUT_EVERYN + 1 &&
               ENUMMAP_LEN(output_kind_rows) == IPUOF__OUTPUT_KIND__OUTPUT_EVERYN + 1,
               "an output kind without its row");

static const struct enummap_row group_rows[] = {
    {IPUOF_GROUP_CONSECUTIVE, IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_CONSECUTIVE,
     "IPUOF_GROUP_CONSECUTIVE"},
    {IPUOF_GROUP_ORTHOGONAL, IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_ORTHOGONAL,
     "IPUOF_GROUP_ORTHOGONAL"},
    {IPUOF_GROUP_ALL, IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_ALL, "IPUOF_GROUP_ALL"},
    {IPUOF_GROUP_NONE, IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_NONE, "IPUOF_GROUP_NONE"},
};
_Static_assert(ENUMMAP_LEN(group_rows) == IPUOF_GROUP_NONE + 1 &&
               ENUMMAP_LEN(group_rows) == IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_NONE + 1,
               "a group type without its row");

static const struct enummap_row strategy_rows[] = {
    {IPUOF_STRATEGY_DEFAULT, IPUOF__EXECUTION_STRATEGY__STRATEGY_DEFAULT, "IPUOF_STRATEGY_DEFAULT"},
    {IPUOF_STRATEGY_PIPELINED, IPUOF__EXECUTION_STRATEGY__STRATEGY_PIPELINED,
     "IPUOF_STRATEGY_PIPELINED"},
    {IPUOF_STRATEGY_SHARDED, IPUOF__EXECUTION_STRATEGY__STRATEGY_SHARDED, "IPUOF_STRATEGY_SHARDED"},
    {IPUOF_STRATEGY_PHASED, IPUOF__EXECUTION_STRATEGY__STRATEGY_PHASED, "IPUOF_STRATEGY_PHASED"},
};
_Static_assert(ENUMMAP_LEN(strategy_rows) == IPUOF_STRATEGY_PHASED + 1 &&
               ENUMMAP_LEN(strategy_rows) == IPUOF__EXECUTION_STRATEGY__STRATEGY_PHASED + 1,
               "a strategy without its row");

static const struct enummap_row location_rows[] = {
    {IPUOF_LOCATION_ON_CHIP, IPUOF__TENSOR_LOCATION__LOCATION_ON_CHIP, "IPUOF_LOCATION_ON_CHIP"},
    {IPUOF_LOCATION_OFF_CHIP, IPUOF__TENSOR_LOCATION__LOCATION_OFF_CHIP,
     "IPUOF_LOCATION_OFF_CHIP"},
};
_Static_assert(ENUMMAP_LEN(location_rows) == IPUOF_LOCATION_OFF_CHIP + 1 &&
               ENUMMAP_LEN(location_rows) == IPUOF__TENSOR_LOCATION__LOCATION_OFF_CHIP + 1,
               "a tensor location without its row");

static const struct enummap_row optimizer_rows[] = {
    {0, IPUOF__OPTIMIZER_KIND__OPTIMIZER_DEFAULT, "0 (PopTorch's default SGD)"},
    {IPUOF_OPTIMIZER_SGD, IPUOF__OPTIMIZER_KIND__OPTIMIZER_SGD, "IPUOF_OPTIMIZER_SGD"},
    {IPUOF_OPTIMIZER_ADAM, IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAM, "IPUOF_OPTIMIZER_ADAM"},
    {IPUOF_OPTIMIZER_ADAMW, IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAMW, "IPUOF_OPTIMIZER_ADAMW"},
    {IPUOF_OPTIMIZER_RMSPROP, IPUOF__OPTIMIZER_KIND__OPTIMIZER_RMSPROP,
     "IPUOF_OPTIMIZER_RMSPROP"},
    {IPUOF_OPTIMIZER_LAMB, IPUOF__OPTIMIZER_KIND__OPTIMIZER_LAMB, "IPUOF_OPTIMIZER_LAMB"},
};
_Static_assert(ENUMMAP_LEN(optimizer_rows) == IPUOF_OPTIMIZER_LAMB + 1 &&
               ENUMMAP_LEN(optimizer_rows) == IPUOF__OPTIMIZER_KIND__OPTIMIZER_LAMB + 1,
               "an optimizer without its row");

static const struct enummap_row reduction_rows[] = {
    {IPUOF_REDUCTION_MEAN, IPUOF__REDUCTION_TYPE__REDUCTION_MEAN, "IPUOF_REDUCTION_MEAN"},
    {IPUOF_REDUCTION_SUM, IPUOF__REDUCTION_TYPE__REDUCTION_SUM, "IPUOF_REDUCTION_SUM"},
};
_Static_assert(ENUMMAP_LEN(reduction_rows) == IPUOF_REDUCTION_SUM + 1 &&
               ENUMMAP_LEN(reduction_rows) == IPUOF__REDUCTION_TYPE__REDUCTION_SUM + 1,
               "a reduction without its row");

static const struct enummap_row weight_kind_rows[] = {
    {IPUOF_WEIGHT_TRAINABLE, IPUOF__WEIGHT_KIND__WEIGHT_TRAINABLE, "IPUOF_WEIGHT_TRAINABLE"},
    {IPUOF_WEIGHT_BUFFER, IPUOF__WEIGHT_KIND__WEIGHT_BUFFER, "IPUOF_WEIGHT_BUFFER"},
    {IPUOF_WEIGHT_FROZEN, IPUOF__WEIGHT_KIND__WEIGHT_FROZEN, "IPUOF_WEIGHT_FROZEN"},
};
_Static_assert(ENUMMAP_LEN(weight_kind_rows) == IPUOF_WEIGHT_FROZEN &&
               ENUMMAP_LEN(weight_kind_rows) == IPUOF__WEIGHT_KIND__WEIGHT_FROZEN,
               "a weight kind without its row (WEIGHT_UNKNOWN is the wire's own)");

static const struct enummap_row ipu_state_rows[] = {
    {IPUOF_IPU_FREE, IPUOF__IPU_STATE__IPU_FREE, "IPUOF_IPU_FREE"},
    {IPUOF_IPU_ATTACHED, IPUOF__IPU_STATE__IPU_ATTACHED, "IPUOF_IPU_ATTACHED"},
    {IPUOF_IPU_BUSY, IPUOF__IPU_STATE__IPU_BUSY, "IPUOF_IPU_BUSY"},
    {IPUOF_IPU_ERROR, IPUOF__IPU_STATE__IPU_ERROR, "IPUOF_IPU_ERROR"},
};
_Static_assert(ENUMMAP_LEN(ipu_state_rows) == IPUOF_IPU_ERROR + 1 &&
               ENUMMAP_LEN(ipu_state_rows) == IPUOF__IPU_STATE__IPU_ERROR + 1,
               "an IPU state without its row");

static const struct enummap_row error_class_rows[] = {
    {IPUOF_ERROR_PLAIN, IPUOF__ERROR_CLASS__ERROR_CLASS_ERROR, "IPUOF_ERROR_PLAIN"},
    {IPUOF_ERROR_RECOVERABLE, IPUOF__ERROR_CLASS__ERROR_CLASS_RECOVERABLE,
     "IPUOF_ERROR_RECOVERABLE"},
    {IPUOF_ERROR_UNRECOVERABLE, IPUOF__ERROR_CLASS__ERROR_CLASS_UNRECOVERABLE,
     "IPUOF_ERROR_UNRECOVERABLE"},
};
_Static_assert(ENUMMAP_LEN(error_class_rows) == IPUOF_ERROR_UNRECOVERABLE + 1 &&
               ENUMMAP_LEN(error_class_rows) == IPUOF__ERROR_CLASS__ERROR_CLASS_UNRECOVERABLE + 1,
               "an error class without its row");

static const struct enummap_row recovery_rows[] = {
    {IPUOF_RECOVERY_NONE, IPUOF__RECOVERY_ACTION__RECOVERY_NONE, "IPUOF_RECOVERY_NONE"},
    {IPUOF_RECOVERY_RETRY, IPUOF__RECOVERY_ACTION__RECOVERY_RETRY, "IPUOF_RECOVERY_RETRY"},
    {IPUOF_RECOVERY_REATTACH, IPUOF__RECOVERY_ACTION__RECOVERY_REATTACH,
     "IPUOF_RECOVERY_REATTACH"},
    {IPUOF_RECOVERY_IPU_RESET, IPUOF__RECOVERY_ACTION__RECOVERY_IPU_RESET,
     "IPUOF_RECOVERY_IPU_RESET"},
    {IPUOF_RECOVERY_PARTITION_RESET, IPUOF__RECOVERY_ACTION__RECOVERY_PARTITION_RESET,
     "IPUOF_RECOVERY_PARTITION_RESET"},
    {IPUOF_RECOVERY_LINK_RESET, IPUOF__RECOVERY_ACTION__RECOVERY_LINK_RESET,
     "IPUOF_RECOVERY_LINK_RESET"},
    {IPUOF_RECOVERY_FULL_RESET, IPUOF__RECOVERY_ACTION__RECOVERY_FULL_RESET,
     "IPUOF_RECOVERY_FULL_RESET"},
};
_Static_assert(ENUMMAP_LEN(recovery_rows) == IPUOF_RECOVERY_FULL_RESET + 1 &&
               ENUMMAP_LEN(recovery_rows) ==
                   IPUOF__RECOVERY_ACTION__RECOVERY_FULL_RESET + 1,
               "a recovery action without its row");

static const struct enummap_row pod_host_state_rows[] = {
    {IPUOF_POD_HOST_UNKNOWN, IPUOF__POD_HOST_STATE__POD_HOST_UNKNOWN, "unknown"},
    {IPUOF_POD_HOST_REACHABLE, IPUOF__POD_HOST_STATE__POD_HOST_REACHABLE, "reachable"},
    {IPUOF_POD_HOST_UNREACHABLE, IPUOF__POD_HOST_STATE__POD_HOST_UNREACHABLE, "unreachable"},
    {IPUOF_POD_HOST_SELF, IPUOF__POD_HOST_STATE__POD_HOST_SELF, "self"},
};
_Static_assert(ENUMMAP_LEN(pod_host_state_rows) == IPUOF_POD_HOST_SELF + 1 &&
               ENUMMAP_LEN(pod_host_state_rows) == IPUOF__POD_HOST_STATE__POD_HOST_SELF + 1,
               "a Pod host state without its row");

#define TABLE(var, what, rows) const struct enummap var = {what, rows, ENUMMAP_LEN(rows)}
TABLE(ipuof_wm_dtype, "dtype", dtype_rows);
TABLE(ipuof_wm_output_kind, "output kind", output_kind_rows);
TABLE(ipuof_wm_group, "input group type", group_rows);
TABLE(ipuof_wm_strategy, "execution strategy", strategy_rows);
TABLE(ipuof_wm_location, "tensor location", location_rows);
TABLE(ipuof_wm_optimizer, "optimizer kind", optimizer_rows);
TABLE(ipuof_wm_reduction, "reduction", reduction_rows);
TABLE(ipuof_wm_weight_kind, "weight kind", weight_kind_rows);
TABLE(ipuof_wm_ipu_state, "IPU state", ipu_state_rows);
TABLE(ipuof_wm_error_class, "error class", error_class_rows);
TABLE(ipuof_wm_recovery, "recovery action", recovery_rows);
TABLE(ipuof_wm_pod_host_state, "Pod host state", pod_host_state_rows);
#undef TABLE

int
ipuof_wm_to_wire(const struct enummap *m, int v, int fallback)
{
    int w;

    return enummap_a_to_b(m, v, &w) == 0 ? w : fallback;
}

int
ipuof_wm_from_wire(const struct enummap *m, int w, int fallback)
{
    int v;

    return enummap_b_to_a(m, w, &v) == 0 ? v : fallback;
}
