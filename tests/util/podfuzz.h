/*
 * podfuzz.h — the Pod port's fuzz harness (tests/fuzz/fuzz_pod.c runs it under libFuzzer;
 * tests/unit/test_pod_conn.c replays tests/fuzz/corpus/pod through it in make test): a
 * daemon's server state without sockets (dpair.h), two Pod-port connections over
 * bufferevent pairs with small output limits, and a sequence of PodHello, KvSet, KvGet
 * (waiting or not), KvDrop, raw bytes, reads and pauses taken from the input's bytes.
 *
 * Links against libipuofd-core.a (with libipuoftest.a).
 */
#ifndef IPUOF_PODFUZZ_H
#define IPUOF_PODFUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Runs one input; everything it made is freed before it returns. 0, or -1 when the
 * server state could not be set up (out of memory). */
int podfuzz_one(const uint8_t *data, size_t len);

#endif
