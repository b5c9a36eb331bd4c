/*
 * faultcase.h — what the injected-fault integration tests share (tests/integ/test_faults.c,
 * test_faults_more.c): a one-weight model, a client connected with test timeouts, a
 * 1-IPU attach, a compile-and-run that checks its answer, and an IPU's state from the
 * daemon's status. Each fails the running cmocka test on what must not fail.
 */
#ifndef IPUOF_FAULTCASE_H
#define IPUOF_FAULTCASE_H

#include <stddef.h>

#include "ipuof/client.h"

/* y = x + w, x and w float [1, 4] (w = 1, 2, 3, 4): an inference model with one weight.
 * The ONNX bytes (caller frees) and their length in *len. */
void *fc_add_model(size_t *len);

/* A client connected to addr with a 5 s connect and 20 s request timeout (caller frees). */
ipuof_client *fc_connect(const char *addr);

/* Attaches c to 1 IPU named name (NULL: the daemon names it); its id to *ipu (may be
 * NULL). Returns the status. */
int fc_attach1(ipuof_client *c, const char *name, unsigned *ipu);

/* Compiles the add model on c and runs it once with x = 10, 20, 30, 40, checking y = x + w;
 * the model to *out (may be NULL: freed). Returns the first failing status, or IPUOF_OK. */
int fc_compile_run(ipuof_client *c, ipuof_model **out);

/* IPU i's state (IPUOF_IPU_*) from addr's status, with the recovery it needs, whether it is
 * unrecoverable and its error sentence (error[0..len)). */
int fc_ipu_state(const char *addr, unsigned i, int *recovery, int *unrecoverable, char *error,
                 size_t len);

/* Waits (up to 5 s) until IPU i is not held: a client that gave up on a hung request has
 * closed its connection, and the daemon frees its partition once it sees that. */
void fc_wait_unheld(const char *addr, unsigned i);

#endif
