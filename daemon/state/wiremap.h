/*
 * wiremap.h — the daemon's one place where the wire's enums (Ipuof__*, ipuof.proto) meet
 * the simulator's (sim_*), the devices' (dev_state) and the shared status header's
 * (IPUOF_ERROR_*, IPUOF_RECOVERY_*). Row a is the wire's value, row b the daemon's.
 *
 * From the wire (enummap_a_to_b): a value the table lacks came from a client and is refused
 * with wiremap_refuse(). To the wire (enummap_b_to_a): every daemon value has a row
 * (_Static_asserts in wiremap.c, tests/unit/test_wiremap.c), so wiremap_to_wire() falls
 * back to the wire's "unknown" value only on a bug.
 */
#ifndef IPUOFD_WIREMAP_H
#define IPUOFD_WIREMAP_H

#include <stddef.h>

#include "enummap.h"

extern const struct enummap wiremap_dtype;        /* Ipuof__DType <-> enum sim_dtype */
extern const struct enummap wiremap_output_kind;  /* Ipuof__OutputKind <-> sim_output_kind */
extern const struct enummap wiremap_optimizer;    /* Ipuof__OptimizerKind <-> sim_optimizer_kind */
extern const struct enummap wiremap_reduction;    /* Ipuof__ReductionType <-> sim_reduction */
extern const struct enummap wiremap_strategy;     /* Ipuof__ExecutionStrategy <-> sim_strategy */
extern const struct enummap wiremap_location;     /* Ipuof__TensorLocation <-> sim_location */
extern const struct enummap wiremap_weight_kind;  /* Ipuof__WeightKind <-> sim_weight_kind */
extern const struct enummap wiremap_ipu_state;    /* Ipuof__IpuState <-> enum dev_state */
extern const struct enummap wiremap_error_class;  /* Ipuof__ErrorClass <-> IPUOF_ERROR_* */
extern const struct enummap wiremap_recovery;     /* Ipuof__RecoveryAction <-> IPUOF_RECOVERY_* */
extern const struct enummap wiremap_pod_host_state; /* Ipuof__PodHostState <-> pod_host_state */

/* The simulator's dtype for wire dtype w, or -1 (no dtype) for one the daemon does not know. */
int wiremap_sim_dtype(int w);

/* The wire's value of the daemon's value v in m, or fallback when m has none. */
int wiremap_to_wire(const struct enummap *m, int v, int fallback);

/* Writes into msg[0..len) the sentence refusing wire value v of m for what ("the
 * accumulation reduction", "constant input 'x'"), naming the values this daemon knows. */
void wiremap_refuse(const struct enummap *m, int v, const char *what, char *msg, size_t len);

#endif
