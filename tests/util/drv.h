/*
 * drv.h — what the drivers of the shell integration tests share (tests/integ/drv_*.c, run
 * by a test_*.sh that starts the daemon and writes PyTorch's tensors): TAP-style checks with
 * a final count, tensors read from ONNX TensorProto files, a client attached to the daemon
 * named by IPUOF_SERVER.
 */
#ifndef IPUOF_TEST_DRV_H
#define IPUOF_TEST_DRV_H

#include "ipuof/client.h"
#include "tensor_pb.h"

/* Prints "ok - ..." or "not ok - ..." (the sentence fmt makes) and counts it. */
void drv_check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads DIR/NAME into *t (caller-owned: sim_host_tensor_fini). 0, or -1 when the file is
 * missing (printed unless quiet_missing) or cannot be decoded (printed). */
int drv_load(const char *dir, const char *name, struct sim_host_tensor *t, int quiet_missing);

/* A client connected to IPUOF_SERVER and attached to ipus IPUs, recorded as one check;
 * NULL when that failed. */
ipuof_client *drv_attach(unsigned ipus);

/* Frees c (may be NULL), prints "N passed, M failed" and returns the exit status (0 when
 * nothing failed, else 1). */
int drv_finish(ipuof_client *c);

#endif
