/*
 * wiremap.h — the client library's one place where its public enums (ipuof/client.h,
 * ipuof/status.h) meet the wire's (Ipuof__*, ipuof.proto). Row a is the library's value,
 * row b the wire's.
 *
 * To the wire: an application's value is checked where it enters (check_opts and the
 * setters name the accepted values), so every value that reaches a request has a row
 * (_Static_asserts in wiremap.c, tests/unit/test_client_wiremap.c). From the wire: a value
 * a newer daemon sends that this library lacks becomes the caller's fallback.
 */
#ifndef IPUOF_CLIENT_WIREMAP_H
#define IPUOF_CLIENT_WIREMAP_H

#include "enummap.h"

extern const struct enummap ipuof_wm_dtype;        /* IPUOF_DTYPE_* <-> Ipuof__DType */
extern const struct enummap ipuof_wm_output_kind;  /* IPUOF_OUTPUT_* <-> Ipuof__OutputKind */
extern const struct enummap ipuof_wm_group;        /* IPUOF_GROUP_* <-> Ipuof__InputGroupType */
extern const struct enummap ipuof_wm_strategy;     /* IPUOF_STRATEGY_* <-> ExecutionStrategy */
extern const struct enummap ipuof_wm_location;     /* IPUOF_LOCATION_* <-> TensorLocation */
extern const struct enummap ipuof_wm_optimizer;    /* IPUOF_OPTIMIZER_* (0: default) <-> wire */
extern const struct enummap ipuof_wm_reduction;    /* IPUOF_REDUCTION_* <-> ReductionType */
extern const struct enummap ipuof_wm_weight_kind;  /* IPUOF_WEIGHT_* <-> Ipuof__WeightKind */
extern const struct enummap ipuof_wm_ipu_state;    /* IPUOF_IPU_* <-> Ipuof__IpuState */
extern const struct enummap ipuof_wm_error_class;  /* IPUOF_ERROR_* <-> Ipuof__ErrorClass */
extern const struct enummap ipuof_wm_pod_host_state; /* IPUOF_POD_HOST_* <-> PodHostState */
extern const struct enummap ipuof_wm_recovery;     /* IPUOF_RECOVERY_* <-> RecoveryAction */

/* The wire's value of the library's value v in m, or fallback when m has none. */
int ipuof_wm_to_wire(const struct enummap *m, int v, int fallback);
/* The library's value of wire value w in m, or fallback when m has none. */
int ipuof_wm_from_wire(const struct enummap *m, int w, int fallback);

#endif
